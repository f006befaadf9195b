import Foundation
import SeggetTestServer
import Testing

#if canImport(Glibc)
import Glibc
#endif

// A batch runs every file in flight on one loop: a bounded number of threads, however many files,
// and one connection cache that the files share.

@Suite struct OneLoopTests {
    /// The `Threads:` line of /proc/PID/status, nil once the process is gone.
    static func threads(of pid: pid_t) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("Threads:") {
            return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// Samples `p`'s thread count until it exits, from a thread of its own (not one of the test
    /// runner's few cooperative threads): the peak, how many samples, and how it ended.
    static func watchThreads(
        of p: SpawnedProcess, everyMicroseconds interval: UInt32
    ) async throws -> (peak: Int, samples: Int, outcome: SpawnedProcess.Outcome) {
        try await blocking { () -> (peak: Int, samples: Int, outcome: SpawnedProcess.Outcome) in
            var peak = 0
            var samples = 0
            while p.isRunning {
                if let n = threads(of: p.pid) {
                    peak = max(peak, n)
                    samples += 1
                }
                usleep(interval)
            }
            return (peak, samples, p.wait())
        }
    }

    /// What `runBatch` saw: the files it served, the directory, the server, the process's thread peak,
    /// how many samples that peak came from, and how the process ended.
    struct BatchRun {
        let files: [String: [UInt8]]
        let dir: CLITempDir
        let server: TestServer
        let peak: Int
        let samples: Int
        let outcome: SpawnedProcess.Outcome

        /// Every file of the list is in `out/`, byte for byte.
        func expectAllWhole() {
            for (name, bytes) in files { #expect(fileMatches(dir.path("out") + "/" + name, bytes), "\(name)") }
        }
    }

    /// `count` files named PREFIX0… of `size + i` bytes, served paced at `rate` (the test server's
    /// `rate=` query) and listed one per line (with `lineOptions(name, bytes)` under each), downloaded
    /// by `segget -q … -i list -d out` with `arguments`, its threads sampled every `interval` µs.
    func runBatch(
        _ prefix: String, count: Int, size: Int, seed: UInt64, rate: String, arguments: [String],
        everyMicroseconds interval: UInt32, lineOptions: (String, [UInt8]) -> String = { _, _ in "" }
    ) async throws -> BatchRun {
        var files: [String: [UInt8]] = [:]
        for i in 0..<count { files["\(prefix)\(i)"] = cliTestBytes(size + i, seed: seed + UInt64(i)) }
        let server = try startCLITestServer(files)
        let dir = try CLITempDir()
        let list = dir.path("list.txt")
        try (0..<count).map { i -> String in
            let name = "\(prefix)\(i)"
            return server.url(name, query: "rate=\(rate)") + lineOptions(name, files[name]!)
        }.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let p = try SpawnedProcess(
            executable: SpawnedProcess.seggetPath(), arguments: ["-q"] + arguments + ["-i", list, "-d", dir.path("out")])
        let (peak, samples, outcome) = try await Self.watchThreads(of: p, everyMicroseconds: interval)
        return BatchRun(files: files, dir: dir, server: server, peak: peak, samples: samples, outcome: outcome)
    }

    /// 48 paced files, 16 in flight: the process never runs more than 4 threads (before, one thread
    /// per file in flight: 17 and more), every file arrives whole, and the files share their
    /// connections: one request each, never more than 16 connections open at once, and at most 24
    /// in all (16 on the first loop, 8 more where the batch of small files took a second loop,
    /// the first then keeping 8; the server sees a close a moment late, hence 2 more at the peak).
    @Test func batchRunsOnBoundedThreadsAndSharesConnections() async throws {
        // 2 MiB/s per response: each file takes about an eighth of a second, the batch about half a
        // second, long enough to watch its threads.
        let run = try await runBatch(
            "f", count: 48, size: 256 * 1024, seed: 300, rate: "2m", arguments: ["-n", "1", "-j", "16"],
            everyMicroseconds: 10_000)
        defer { run.server.stop() }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.stderr)")
        run.expectAllWhole()
        #expect(run.samples >= 5, "the batch ended before its threads could be watched")
        #expect(run.peak <= 4, "peak threads \(run.peak)")
        let requests = run.server.requests.filter { $0.path.hasPrefix("/f") }
        #expect(requests.count == 48, "\(requests)")
        #expect(run.server.connectionsAccepted <= 24, "\(run.server.connectionsAccepted) connections for 48 files")
        #expect(Set(requests.map(\.remotePort)).count <= 24)
        #expect(run.server.peakConnections <= 18, "\(run.server.peakConnections) connections open at once")
    }

    /// Files larger than the first answer (a part file, a journal, the engine), checkpointed every
    /// 50 ms: still at most 4 threads (the loop, the steps worker, where the checkpoints run too, and
    /// the two writers; a thread of the checkpoints' own made 5), every file whole, nothing left.
    @Test func rangedBatchWithCheckpointsRunsOnFourThreads() async throws {
        // 1 MiB/s per response, chunks of 256 KiB: up to half a second a file, about a second in all.
        let run = try await runBatch(
            "r", count: 32, size: 512 * 1024, seed: 700, rate: "1m",
            arguments: ["-n", "4", "-j", "16", "--chunk-size", "256k", "--sync-interval", "0.05"],
            everyMicroseconds: 5_000)
        defer { run.server.stop() }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.stderr)")
        run.expectAllWhole()
        let left = try FileManager.default.contentsOfDirectory(atPath: run.dir.path("out")).filter { $0.hasPrefix(".") || $0.contains("segget") }
        #expect(left.isEmpty, "\(left)")
        #expect(run.samples >= 5, "the batch ended before its threads could be watched")
        #expect(run.peak <= 4, "peak threads \(run.peak)")
    }

    /// The same ranged batch with a digest to check for every file: the hashers of the 16 files in
    /// flight share the two threads of `WorkerPool.readBack` (before, each hasher had a reader and a
    /// hashing thread of its own: 36 threads), every file verified and whole.
    @Test func checkedBatchHashesOnTwoSharedThreads() async throws {
        let run = try await runBatch(
            "h", count: 32, size: 512 * 1024, seed: 900, rate: "1m",
            arguments: ["-n", "4", "-j", "16", "--chunk-size", "256k"], everyMicroseconds: 5_000,
            lineOptions: { _, bytes in "\n  checksum=sha-256=\(sha256Hex(bytes))" })
        defer { run.server.stop() }
        #expect(run.outcome.exitCode == 0, "\(run.outcome.stderr)")
        run.expectAllWhole()
        #expect(run.samples >= 5, "the batch ended before its threads could be watched")
        #expect(run.peak <= 6, "peak threads \(run.peak)")
    }
}

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

    /// 48 paced files, 16 in flight: the process never runs more than 4 threads (before, one thread
    /// per file in flight: 17 and more), every file arrives whole, and the files share their
    /// connections: one request each over at most 16 connections in all.
    @Test func batchRunsOnBoundedThreadsAndSharesConnections() async throws {
        var files: [String: [UInt8]] = [:]
        for i in 0..<48 { files["f\(i)"] = cliTestBytes(256 * 1024 + i, seed: UInt64(300 + i)) }
        let server = try startCLITestServer(files)
        defer { server.stop() }
        let dir = try CLITempDir()
        let list = dir.path("list.txt")
        // 2 MiB/s per response: each file takes about an eighth of a second, the batch about half a
        // second, long enough to watch its threads.
        try (0..<48).map { server.url("f\($0)", query: "rate=2m") }.joined(separator: "\n")
            .write(toFile: list, atomically: true, encoding: .utf8)
        let p = try SpawnedProcess(
            executable: SpawnedProcess.seggetPath(), arguments: ["-q", "-n", "1", "-j", "16", "-i", list, "-d", dir.path("out")])
        let (peak, samples, r) = try await Self.watchThreads(of: p, everyMicroseconds: 10_000)
        #expect(r.exitCode == 0, "\(r.stderr)")
        for i in 0..<48 { #expect(fileMatches(dir.path("out") + "/f\(i)", files["f\(i)"]!)) }
        #expect(samples >= 5, "the batch ended before its threads could be watched")
        #expect(peak <= 4, "peak threads \(peak)")
        let requests = server.requests.filter { $0.path.hasPrefix("/f") }
        #expect(requests.count == 48, "\(requests)")
        #expect(server.connectionsAccepted <= 16, "\(server.connectionsAccepted) connections for 48 files")
        #expect(Set(requests.map(\.remotePort)).count <= 16)
    }

    /// Files larger than the first answer (a part file, a journal, the engine), checkpointed every
    /// 50 ms: still at most 4 threads (the loop, the steps worker, where the checkpoints run too, and
    /// the two writers; a thread of the checkpoints' own made 5), every file whole, nothing left.
    @Test func rangedBatchWithCheckpointsRunsOnFourThreads() async throws {
        var files: [String: [UInt8]] = [:]
        for i in 0..<32 { files["r\(i)"] = cliTestBytes(512 * 1024 + i, seed: UInt64(700 + i)) }
        let server = try startCLITestServer(files)
        defer { server.stop() }
        let dir = try CLITempDir()
        let list = dir.path("list.txt")
        // 1 MiB/s per response, chunks of 256 KiB: up to half a second a file, about a second in all.
        try (0..<32).map { server.url("r\($0)", query: "rate=1m") }.joined(separator: "\n")
            .write(toFile: list, atomically: true, encoding: .utf8)
        let p = try SpawnedProcess(
            executable: SpawnedProcess.seggetPath(),
            arguments: ["-q", "-n", "4", "-j", "16", "--chunk-size", "256k", "--sync-interval", "0.05", "-i", list, "-d", dir.path("out")])
        let (peak, samples, r) = try await Self.watchThreads(of: p, everyMicroseconds: 5_000)
        #expect(r.exitCode == 0, "\(r.stderr)")
        for i in 0..<32 { #expect(fileMatches(dir.path("out") + "/r\(i)", files["r\(i)"]!)) }
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path("out")).filter { $0.hasPrefix(".") || $0.contains("segget") }
        #expect(left.isEmpty, "\(left)")
        #expect(samples >= 5, "the batch ended before its threads could be watched")
        #expect(peak <= 4, "peak threads \(peak)")
    }

    /// The same ranged batch with a digest to check for every file: the hashers of the 16 files in
    /// flight share the two threads of `WorkerPool.readBack` (before, each hasher had a reader and a
    /// hashing thread of its own: 36 threads), every file verified and whole.
    @Test func checkedBatchHashesOnTwoSharedThreads() async throws {
        var files: [String: [UInt8]] = [:]
        for i in 0..<32 { files["h\(i)"] = cliTestBytes(512 * 1024 + i, seed: UInt64(900 + i)) }
        let server = try startCLITestServer(files)
        defer { server.stop() }
        let dir = try CLITempDir()
        let list = dir.path("list.txt")
        try (0..<32).map { "\(server.url("h\($0)", query: "rate=1m"))\n  checksum=sha-256=\(sha256Hex(files["h\($0)"]!))" }
            .joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let p = try SpawnedProcess(
            executable: SpawnedProcess.seggetPath(),
            arguments: ["-q", "-n", "4", "-j", "16", "--chunk-size", "256k", "-i", list, "-d", dir.path("out")])
        let (peak, samples, r) = try await Self.watchThreads(of: p, everyMicroseconds: 5_000)
        #expect(r.exitCode == 0, "\(r.stderr)")
        for i in 0..<32 { #expect(fileMatches(dir.path("out") + "/h\(i)", files["h\(i)"]!)) }
        #expect(samples >= 5, "the batch ended before its threads could be watched")
        #expect(peak <= 6, "peak threads \(peak)")
    }
}

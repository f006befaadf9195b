import Foundation
import Segget
import SeggetTestServer
import Synchronization
import Testing

@testable import segget

/// A batch of small files runs on two loops, one of larger files on one (`Batch.runOnLoops`), with
/// a real server and real files; names are still decided in list order across the loops.
@Suite struct BatchLoopsTests {
    /// Counts what a batch reports; safe from every loop.
    final class Counting: Reporter {
        private let done = Mutex(Set<Int>())
        var finishedIDs: Set<Int> { done.withLock { $0 } }
        var wantsProgress: Bool { false }
        func started(_ job: JobStart) {}
        func progress(id: Int, _ p: DownloadProgress) {}
        func event(id: Int, _ e: DownloadEvent) {}
        func finished(id: Int, url: String, _ r: DownloadResult) { _ = done.withLock { $0.insert(id) } }
        func skipped(id: Int, url: String, path: String, reason: SkipReason) {}
        func failed(id: Int, url: String, path: String?, _ e: SeggetError) {}
        func summary(_ outcomes: [Outcome], seconds: Double) {}
    }

    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var x = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<count).map { _ in
            x ^= x << 13
            x ^= x >> 7
            x ^= x << 17
            return UInt8(truncatingIfNeeded: x)
        }
    }

    /// A fresh directory under the system's temporary one.
    static func directory() throws -> String {
        let path = NSTemporaryDirectory() + "segget-loops-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// `urls` as a batch of `jobs` in flight into `dir`, with `arguments` on its command line.
    static func batch(_ urls: [String], into dir: String, jobs: Int, arguments: [String] = []) throws -> Batch {
        let list = try InputFile(parsing: urls.joined(separator: "\n"))
        let get = try Get.parse(arguments + ["-q", "-d", dir, "-i", "list"])
        return Batch(
            entries: list.entries, base: try get.downloadOptions(), jobs: jobs, totalConnections: nil, listMode: true,
            planPaths: true, skipExisting: false, checksumFile: nil)
    }

    /// A started server with `count` files named PREFIX0…, of `size + i` bytes each, and the files.
    static func serving(_ prefix: String, count: Int, size: Int, seed: UInt64) throws -> (TestServer, [String: [UInt8]]) {
        let server = try TestServer()
        try server.start()
        var files: [String: [UInt8]] = [:]
        for i in 0..<count {
            let body = bytes(size + i, seed: seed + UInt64(i))
            files["\(prefix)\(i)"] = body
            server.addResource(name: "\(prefix)\(i)", bytes: body)
        }
        return (server, files)
    }

    static func contents(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) }
    }

    @Test func loopLimitFollowsFilesInFlightSyncsAndCPUs() throws {
        let urls = (0..<40).map { "http://127.0.0.1:9/f\($0)" }
        let many = try Self.batch(urls, into: "/tmp", jobs: 16)
        #expect(many.loopLimit(cpus: 2) == Batch.batchLoops)
        #expect(many.loopLimit(cpus: 16) == Batch.batchLoops)
        #expect(many.loopLimit(cpus: 1) == 1)
        #expect(try Self.batch(urls, into: "/tmp", jobs: 1).loopLimit(cpus: 4) == 1)
        // Fewer than 4 files a loop: one loop, whose connections the files reuse (BatchTests).
        #expect(try Self.batch(urls, into: "/tmp", jobs: 7).loopLimit(cpus: 4) == 1)
        #expect(try Self.batch(urls, into: "/tmp", jobs: 8).loopLimit(cpus: 4) == 2)
        #expect(try Self.batch(Array(urls.prefix(1)), into: "/tmp", jobs: 16).loopLimit(cpus: 4) == 1)
        // With --fsync the steps have a thread of their own, where the syncs wait: one loop.
        #expect(try Self.batch(urls, into: "/tmp", jobs: 16, arguments: ["--fsync"]).loopLimit(cpus: 4) == 1)
    }

    /// 48 files of 64 KiB, 8 in flight: every one arrives whole, on two loops.
    @Test func smallFilesRunOnTwoLoops() throws {
        let (server, files) = try Self.serving("s", count: 48, size: 64 * 1024, seed: 40)
        defer { server.stop() }
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let reporter = Counting()
        let batch = try Self.batch((0..<48).map { server.url("s\($0)") }, into: dir, jobs: 8)
        let run = batch.runOnLoops(reporter: reporter, interrupt: InterruptFlag(), cpus: 2, cpuFree: { true })
        #expect(run.loops == 2)
        #expect(Batch.exitCode(run.outcomes) == 0)
        #expect(reporter.finishedIDs == Set(1...48))
        for (name, body) in files { #expect(Self.contents(dir + "/" + name) == body, "\(name)") }
        #expect(server.requests.count == 48, "one request a file: the probe brought each whole")
        // Each loop keeps 8 of the 16 connections the first kept alone (a close reaches the server
        // a moment late).
        #expect(server.peakConnections <= 18, "\(server.peakConnections) connections open at once")
    }

    /// Small files from a server that thinks 40 ms before each answer, as a far one's round trip
    /// would hold them: the first loop mostly waits (`DownloadLoop.busyFraction`), so no second loop
    /// is added, whose files would dial connections of their own; the files reuse the first loop's.
    /// (Through WAN link a, 24 files of 64 KiB at `-j 8` opened 13 connections on two loops, 9 on one.)
    @Test func aLoopThatMostlyWaitsGetsNoSecond() throws {
        let (server, files) = try Self.serving("w", count: 24, size: 64 * 1024, seed: 70)
        defer { server.stop() }
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let batch = try Self.batch((0..<24).map { server.baseURL + "/w\($0)?firstbyte=0.04" }, into: dir, jobs: 8)
        let run = batch.runOnLoops(reporter: Counting(), interrupt: InterruptFlag(), cpus: 2, cpuFree: { true })
        #expect(run.loops == 1)
        #expect(Batch.exitCode(run.outcomes) == 0)
        for (name, body) in files { #expect(Self.contents(dir + "/" + name) == body, "\(name)") }
        #expect(server.requests.count == 24, "one request a file")
        #expect(server.peakConnections <= 9, "\(server.peakConnections) connections open at once")
    }

    /// The same files on a machine of one CPU, or of two that something else keeps busy: one loop.
    @Test(arguments: [(cpus: 1, free: true), (cpus: 2, free: false)])
    func noFreeCPUKeepsOneLoop(_ machine: (cpus: Int, free: Bool)) throws {
        let (server, files) = try Self.serving("c", count: 12, size: 32 * 1024, seed: 7)
        defer { server.stop() }
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let batch = try Self.batch((0..<12).map { server.url("c\($0)") }, into: dir, jobs: 8)
        let free = machine.free
        let run = batch.runOnLoops(reporter: Counting(), interrupt: InterruptFlag(), cpus: machine.cpus, cpuFree: { free })
        #expect(run.loops == 1)
        #expect(Batch.exitCode(run.outcomes) == 0)
        for (name, body) in files { #expect(Self.contents(dir + "/" + name) == body, "\(name)") }
    }

    /// Files larger than the probe's first chunk are fetched in ranges with the writers: one loop.
    @Test func largerFilesStayOnOneLoop() throws {
        let (server, files) = try Self.serving("b", count: 12, size: 600 * 1024, seed: 90)
        defer { server.stop() }
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let batch = try Self.batch(
            (0..<12).map { server.url("b\($0)") }, into: dir, jobs: 8, arguments: ["--chunk-size", "256k"])
        let run = batch.runOnLoops(reporter: Counting(), interrupt: InterruptFlag(), cpus: 2, cpuFree: { true })
        #expect(run.loops == 1)
        #expect(Batch.exitCode(run.outcomes) == 0)
        for (name, body) in files { #expect(Self.contents(dir + "/" + name) == body, "\(name)") }
    }

    /// 30 URLs that all want the name `same`, on two loops: the names are still given in list order
    /// (`same`, `same.1`, … `same.29`), each once, and a rerun would pick them again.
    @Test func namesFollowTheListAcrossLoops() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let body = Self.bytes(20 * 1024, seed: 3)
        server.addResource(name: "same", bytes: body)
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let batch = try Self.batch((0..<30).map { server.url("same", query: "i=\($0)") }, into: dir, jobs: 8)
        let run = batch.runOnLoops(reporter: Counting(), interrupt: InterruptFlag(), cpus: 2, cpuFree: { true })
        #expect(run.loops == 2)
        #expect(Batch.exitCode(run.outcomes) == 0)
        let expected = ["same"] + (1..<30).map { "same.\($0)" }
        for (k, outcome) in run.outcomes.enumerated() {
            #expect(outcome.path == dir + "/" + expected[k], "file \(k + 1): \(outcome.path ?? "nil")")
        }
        let found = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        #expect(found == expected.sorted())
        for name in expected { #expect(Self.contents(dir + "/" + name) == body) }
    }

    /// Records the order of a batch's start and finish messages; safe from every loop.
    final class Ordering: Reporter {
        private let seen = Mutex([String]())
        var events: [String] { seen.withLock { $0 } }
        var wantsProgress: Bool { false }
        func started(_ job: JobStart) { seen.withLock { $0.append("start \(job.id)") } }
        func progress(id: Int, _ p: DownloadProgress) {}
        func event(id: Int, _ e: DownloadEvent) {}
        func finished(id: Int, url: String, _ r: DownloadResult) { seen.withLock { $0.append("finish \(id)") } }
        func skipped(id: Int, url: String, path: String, reason: SkipReason) {}
        func failed(id: Int, url: String, path: String?, _ e: SeggetError) { seen.withLock { $0.append("fail \(id)") } }
        func summary(_ outcomes: [Outcome], seconds: Double) {}
    }

    /// The first file's answer comes at once but its body trickles (a byte a second, until its probe
    /// is cut after `Prober.prefixSeconds`); the second file is small and quick. Paths are decided in
    /// list order, from the name each answer's head gives (`LoopRun.answered`): the second file is
    /// saved under its name while the first's probe still trickles, before the first file's
    /// download even starts. Its path once waited for the end of the first file's probe, and over
    /// HTTP/2, where every body of a batch comes at once, 300 finished files waited for the slowest
    /// file before them.
    @Test func aTricklingFileDoesNotHoldUpTheFilesAfterIt() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let first = Self.bytes(64 * 1024, seed: 91)
        let second = Self.bytes(64 * 1024, seed: 92)
        server.addResource(name: "first", bytes: first)
        server.addResource(name: "second", bytes: second)
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let urls = [server.url("first", query: "slowfirst=1&slowrate=1"), server.url("second")]
        let reporter = Ordering()
        let run = try Self.batch(urls, into: dir, jobs: 2).runOnLoops(reporter: reporter, interrupt: InterruptFlag(), cpus: 2)
        #expect(Batch.exitCode(run.outcomes) == 0)
        #expect(run.outcomes.map(\.path) == [dir + "/first", dir + "/second"])
        #expect(Self.contents(dir + "/first") == first)
        #expect(Self.contents(dir + "/second") == second)
        let events = reporter.events
        let secondDone = try #require(events.firstIndex(of: "finish 2"), "\(events)")
        let firstStarted = try #require(events.firstIndex(of: "start 1"), "\(events)")
        #expect(secondDone < firstStarted, "\(events)")
    }

    /// Small files from a host that serves 3 requests at once per client and refuses the rest with
    /// 429, on two loops: the slots the two loops' probes take are one budget, what a refusal teaches
    /// holds for both, and every file arrives whole, with about the first burst refused and not a
    /// refusal per request (which a loop that did not learn, or two budgets, would draw).
    @Test func twoLoopsShareOneHostBudget() throws {
        let (server, files) = try Self.serving("h", count: 24, size: 64 * 1024, seed: 500)
        defer { server.stop() }
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let urls = (0..<24).map { server.baseURL + "/h\($0)?rate=2m&maxconc=3&scope=client&reject=429" }
        let batch = try Self.batch(urls, into: dir, jobs: 8, arguments: ["--retry-wait", "0.1"])
        let started = DispatchTime.now().uptimeNanoseconds
        // The paced answers leave the first loop waiting: a second is added here all the same.
        let run = batch.runOnLoops(
            reporter: Counting(), interrupt: InterruptFlag(), cpus: 2, cpuFree: { true }, loopBusy: { _ in true })
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        #expect(run.loops == 2)
        #expect(Batch.exitCode(run.outcomes) == 0, "\(run.outcomes)")
        for (name, body) in files { #expect(Self.contents(dir + "/" + name) == body, "\(name)") }
        let stats = server.concurrency
        #expect(stats.maxInFlight <= 3)
        // The first burst (8 probes, 5 refused; 5 in every run here), a probe upwards now and then
        // (about two a second), and a race or three. Two budgets would each draw a burst.
        #expect(stats.rejected <= 5 + 3 + Int(seconds * 2), "\(stats) in \(seconds) s")
    }
}

/// A batch that multiplexes (`--http2`) has every file in flight from the start, but a list of
/// large files still downloads `-j` at a time (`LargeDownloadPlaces`).
@Suite struct LargeDownloadPlacesTests {
    @Test func placesAreTakenInTurnAndGivenBackInOrder() {
        var places = LargeDownloadPlaces(places: 2)
        #expect(places.ask(0) && places.ask(1))
        #expect(!places.ask(5) && !places.ask(3))
        places.enter()  // a held probe's download needs no place, but counts
        #expect(places.running == 3 && places.peak == 3 && places.waitingCount == 2)
        #expect(places.release().isEmpty)  // 2 still run: no place yet
        #expect(places.release() == [5])
        #expect(places.release() == [3])
        #expect(places.release().isEmpty && places.release().isEmpty)
        #expect(places.running == 0 && places.peak == 3 && places.waitingCount == 0)
        #expect(LargeDownloadPlaces(places: 0).places == 1)
    }

    /// Counts the downloads of more than `largeFileBytes` started and not yet ended, and the most
    /// at once; safe from every loop.
    final class Concurrency: Reporter {
        private let state = Mutex((running: Set<Int>(), peak: 0, finished: 0))
        var peak: Int { state.withLock { $0.peak } }
        var finished: Int { state.withLock { $0.finished } }
        var wantsProgress: Bool { false }
        func started(_ job: JobStart) {
            guard (job.size ?? 0) > Batch.largeFileBytes else { return }
            state.withLock { s in
                s.running.insert(job.id)
                s.peak = max(s.peak, s.running.count)
            }
        }
        func progress(id: Int, _ p: DownloadProgress) {}
        func event(id: Int, _ e: DownloadEvent) {}
        func finished(id: Int, url: String, _ r: DownloadResult) {
            state.withLock { s in
                s.running.remove(id)
                s.finished += 1
            }
        }
        func skipped(id: Int, url: String, path: String, reason: SkipReason) {}
        func failed(id: Int, url: String, path: String?, _ e: SeggetError) { _ = state.withLock { $0.running.remove(id) } }
        func summary(_ outcomes: [Outcome], seconds: Double) {}
    }

    /// 40 files of 1.5 MiB, `--http2 -j 4`: all 40 are in flight at once, the 36 beyond the first 4
    /// probing for their first 64 KiB only; no more than 8 download at once (4 places, and the 4
    /// first files' held probes), where without the places all 40 did. Every file arrives whole.
    @Test func largeFilesDownloadAFewAtATime() throws {
        let count = 40
        let (server, files) = try BatchLoopsTests.serving("L", count: count, size: 1536 * 1024, seed: 11)
        defer { server.stop() }
        let dir = try BatchLoopsTests.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let batch = try BatchLoopsTests.batch(
            (0..<count).map { server.url("L\($0)") }, into: dir, jobs: 4, arguments: ["--http2"])
        #expect(batch.multiplexes && batch.parallelFilesOverHTTP2 == count)
        let reporter = Concurrency()
        let run = batch.runOnLoops(reporter: reporter, interrupt: InterruptFlag(), cpus: 2, cpuFree: { true })
        #expect(Batch.exitCode(run.outcomes) == 0)
        #expect(reporter.finished == count)
        for (name, body) in files { #expect(BatchLoopsTests.contents(dir + "/" + name) == body, "\(name)") }
        #expect(run.loops == 1)
        #expect(reporter.peak >= 2 && reporter.peak <= 8, "\(reporter.peak) large downloads at once")
        #expect(run.largePeak >= 2 && run.largePeak <= 8, "\(run.largePeak) places taken at once")
        // Files 5-40 started while the 4 places were taken: their probes asked for 64 KiB.
        let ranges = server.requests.compactMap { $0.headers["range"] }
        #expect(ranges.filter { $0 == "bytes=0-65535" }.count == count - 4, "\(ranges)")
        #expect(ranges.filter { $0 == "bytes=0-" }.count == 4, "\(ranges)")
    }
}

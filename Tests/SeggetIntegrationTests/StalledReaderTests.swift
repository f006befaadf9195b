#if canImport(Glibc)
import Glibc
#endif
import SeggetTestServer
import Testing

/// A reader that keeps its end of the pipe open and reads nothing (`segget … | tool` where the tool
/// hangs, or a FIFO whose reader sleeps) cannot make a Ctrl-C or SIGTERM useless: segget stops, keeps
/// its journal and exits 130 within a few seconds. (A blocked `write` restarts after the signal
/// handler; before `PatientOutput` the stop waited for the reader forever.)
@Suite(.serialized) struct StalledReaderTests {
    /// A pipe already full: the test filled it and will never read it. Returns (read end, write end).
    static func fullPipe() throws -> (Int32, Int32) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw TestSupportError("pipe: \(errno)") }
        let flags = fcntl(fds[1], F_GETFL)
        _ = fcntl(fds[1], F_SETFL, flags | O_NONBLOCK)
        let junk = [UInt8](repeating: 0x2E, count: 4096)
        while junk.withUnsafeBytes({ write(fds[1], $0.baseAddress, $0.count) }) > 0 {}
        // The child gets the descriptor as a blocking one, as a shell would give it.
        _ = fcntl(fds[1], F_SETFL, flags)
        return (fds[0], fds[1])
    }

    @Test(arguments: ["stream", "json"]) func aStopEndsSeggetWhoseReaderTakesNothing(_ mode: String) async throws {
        let body = TestFiles.pattern(16 << 20, seed: 91)
        let server = try TestServer()
        server.addResource(name: "f", bytes: body)
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let url = server.url("f", query: "rate=2m")
        let output = dir.path("out.bin")
        let arguments = mode == "stream" ? ["-n", "4", "-o", "-", url] : ["--json", "-n", "4", "-o", output, url]
        let (reader, writer) = try Self.fullPipe()
        defer { close(reader) }
        let p = try SpawnedProcess(
            executable: try SpawnedProcess.seggetPath(), arguments: arguments, standardOutput: writer)
        close(writer)
        // Running and fetching (the stream fills its window; the JSON download waits on its first line).
        let fetching = mode == "stream" ? 2 : 1
        #expect(waitUntil(timeout: 20) { server.requests.count >= fetching }, "\(server.requests)")
        try await Task.sleep(for: .milliseconds(500))
        let signalled = nowSeconds()
        p.signal(SIGINT)
        let r = p.wait(timeout: 20)
        #expect(!r.timedOut, "segget did not end within 20 s of SIGINT")
        #expect(r.exitCode == 130, "stderr: \(r.stderr)")
        #expect(nowSeconds() - signalled < 10)
        if mode == "stream" {
            #expect(r.stderr.contains("interrupted while the stream's reader was not reading"), "stderr: \(r.stderr)")
        } else {
            #expect(TestFiles.exists(output + ".segget-journal"), "the journal is kept to resume")
            #expect(!TestFiles.exists(output))
        }
    }

    /// The second after a stop is one for the whole run, not one for each object still to write: a
    /// batch of 4 files in flight has an `error` for each and a `summary`, and each waited a second
    /// of its own for the reader that takes nothing (2.3-4.6 s from the signal to the exit).
    @Test func theObjectsLeftAfterAStopShareOneSecond() async throws {
        let server = try TestServer()
        for i in 0..<4 { server.addResource(name: "f\(i)", bytes: TestFiles.pattern(8 << 20, seed: 93 + UInt64(i))) }
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let list = dir.path("list")
        try TestFiles.write(list, Array((0..<4).map { server.url("f\($0)", query: "rate=1m") }.joined(separator: "\n").utf8))
        let (reader, writer) = try Self.fullPipe()
        defer { close(reader) }
        let p = try SpawnedProcess(
            executable: try SpawnedProcess.seggetPath(), arguments: ["--json", "-n", "1", "-j", "4", "-i", list, "-d", dir.path("out")],
            standardOutput: writer)
        close(writer)
        #expect(waitUntil(timeout: 20) { server.requests.count >= 4 }, "\(server.requests)")
        try await Task.sleep(for: .milliseconds(500))
        let signalled = nowSeconds()
        p.signal(SIGINT)
        let r = p.wait(timeout: 20)
        let took = nowSeconds() - signalled
        #expect(r.exitCode == 130, "stderr: \(r.stderr)")
        #expect(took < 2.0, "\(took) s from SIGINT to the exit")
    }

    /// A second signal ends a stream at once, with words for a stream: it keeps no journal, so "run the
    /// same command to resume" (what it said) would start it over; `--stream-from` continues it.
    @Test func aSecondSignalDuringAStreamSaysHowToContinueIt() async throws {
        let body = TestFiles.pattern(16 << 20, seed: 92)
        let server = try TestServer()
        server.addResource(name: "f", bytes: body)
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let fd = open(dir.path("stdout"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let p = try SpawnedProcess(
            executable: try SpawnedProcess.seggetPath(), arguments: ["-n", "4", "-o", "-", server.url("f", query: "rate=1m")],
            standardOutput: fd)
        close(fd)
        #expect(waitUntil(timeout: 20) { server.bodyBytesSent >= 1 << 20 || !p.isRunning })
        #expect(p.isRunning, "segget ended before the signals")
        // Two kinds, so that the second is not merged into the first while it is pending.
        p.signal(SIGINT)
        p.signal(SIGTERM)
        let r = p.wait(timeout: 20)
        #expect(r.exitCode == 130, "stderr: \(r.stderr)")
        #expect(r.stderr.contains("stopped at once; a stream keeps no journal") && r.stderr.contains("--stream-from N continues it"),
                "stderr: \(r.stderr)")
        #expect(!r.stderr.contains("run the same command"), "stderr: \(r.stderr)")
    }
}

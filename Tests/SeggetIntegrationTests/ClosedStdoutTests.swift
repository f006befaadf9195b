import Glibc
import SeggetTestServer
import Testing

/// `segget --json URL | head -c 1`: the reader of the events goes away after the first. The download
/// goes on to the end and exits 0 with the file identical (the events it could not write are let go).
/// Before, SIGPIPE's default ended it at the next event: exit 141, nothing said, the file unfinished.
@Suite(.serialized) struct ClosedStdoutTests {
    @Test(arguments: [["--json"], []]) func aReaderOfStandardOutputThatGoesAwayDoesNotStopTheDownload(_ extra: [String]) throws {
        let body = TestFiles.pattern(8 << 20, seed: 94)
        let server = try TestServer()
        server.addResource(name: "f.bin", bytes: body)
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let out = dir.path("f.bin")
        let segget = try SpawnedProcess.seggetPath()
        // Paced so that events come after the reader has gone: 2 s at 1 MiB/s on each of 4 connections.
        let command = ([segget, "-n", "4"] + extra + [server.url("f.bin", query: "rate=1m"), "-o", out, "2>&1"])
            .map { $0 == "2>&1" ? $0 : "'\($0)'" }.joined(separator: " ")
        let p = try SpawnedProcess(executable: "/bin/bash", arguments: ["-c", "\(command) | head -c 1 > /dev/null; exit ${PIPESTATUS[0]}"])
        let r = p.wait(timeout: 60)
        #expect(!r.timedOut)
        #expect(r.exitCode == 0, "exit \(r.exitCode): \(r.stderr)")
        #expect(TestFiles.fileDifference(out, body) == nil)
    }
}

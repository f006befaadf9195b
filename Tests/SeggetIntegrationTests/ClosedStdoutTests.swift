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

    /// Started with standard output (and standard error) closed (`>&-`): a free descriptor 1 was the
    /// next one libcurl's wake-up socket pair took, and `-o -` wrote the file into that socket and
    /// exited 0 ("streamed 4.9 KiB to standard output"). Now `-o -` is refused before any request,
    /// exit 5, and a download to a file still works, its messages going nowhere rather than into a
    /// socket.
    @Test func closedStandardDescriptorsAreNeverReused() throws {
        let body = TestFiles.pattern(200_000, seed: 95)
        let server = try TestServer()
        server.addResource(name: "f.bin", bytes: body)
        try server.start()
        defer { server.stop() }
        let dir = try TempDir()
        let segget = try SpawnedProcess.seggetPath()
        let stream = try SpawnedProcess(executable: "/bin/bash", arguments: ["-c", "exec '\(segget)' -o - '\(server.url("f.bin"))' >&-"])
        let r = stream.wait(timeout: 60)
        #expect(!r.timedOut)
        #expect(r.exitCode == 5 && r.stderr.contains("standard output is closed"), "exit \(r.exitCode): \(r.stderr)")
        #expect(server.requests.isEmpty, "\(server.requests)")
        for (name, closes) in [("a.bin", ">&-"), ("b.bin", ">&- 2>&-"), ("c.bin", "<&- >&- 2>&-")] {
            let out = dir.path(name)
            let p = try SpawnedProcess(executable: "/bin/bash", arguments: ["-c", "exec '\(segget)' -n 4 --json -o '\(out)' '\(server.url("f.bin"))' \(closes)"])
            let done = p.wait(timeout: 60)
            #expect(!done.timedOut && done.exitCode == 0, "\(closes): exit \(done.exitCode): \(done.stderr)")
            #expect(TestFiles.fileDifference(out, body) == nil, "\(closes)")
        }
    }
}

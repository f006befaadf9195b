import Glibc
import SeggetTestServer
import Testing

/// The live progress bar a user sees on a terminal, and the plain output off a terminal. segget runs
/// under `script(1)`, which gives it a real pseudo-terminal as standard error.
@Suite(.serialized, .enabled(if: access("/usr/bin/script", X_OK) == 0, "needs script(1) from bsdutils"))
struct TerminalProgressTests {
    @Test func terminalGetsALiveBarThenOneSummaryLine() throws {
        let body = TestFiles.pattern(3 << 20, seed: 91)
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        server.addResource(name: "f", bytes: body)
        let dir = try TempDir()
        let segget = try SpawnedProcess.seggetPath()
        // 4 connections at 512 KiB/s each: about 1.5 s, several redraws at 4-5 per second.
        let command = "\(segget) -n 4 -o \(dir.path("out.bin")) '\(server.url("f", query: "rate=512k"))'"
        let p = try SpawnedProcess(executable: "/usr/bin/script", arguments: ["-qefc", command, "/dev/null"])
        let r = p.wait(timeout: 60)
        #expect(r.exitCode == 0, "\(r)")
        #expect(TestFiles.fileDifference(dir.path("out.bin"), body) == nil)
        let screen = r.stdout
        // Redrawn in place: carriage return plus erase-line, more than once, with percent, a bar,
        // bytes, speed, ETA and one character per connection.
        let redraws = screen.components(separatedBy: "\r\u{1B}[2K").count - 1
        #expect(redraws >= 3, "only \(redraws) redraws: \(screen.debugDescription)")
        #expect(screen.contains("%") && screen.contains("[") && screen.contains("ETA"), "\(screen.debugDescription)")
        #expect(screen.contains("MiB/s") || screen.contains("KiB/s"))
        #expect(screen.contains { "▁▂▃▄▅▆▇█".contains($0) }, "no per-connection view: \(screen.debugDescription)")
        #expect(screen.contains("segget: saved \(dir.path("out.bin"))"))
    }

    @Test func quietTerminalShowsNothing() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        server.addResource(name: "f", bytes: TestFiles.pattern(1 << 20, seed: 92))
        let dir = try TempDir()
        let segget = try SpawnedProcess.seggetPath()
        let command = "\(segget) -q -n 4 -o \(dir.path("out.bin")) '\(server.url("f", query: "rate=1m"))'"
        let r = try SpawnedProcess(executable: "/usr/bin/script", arguments: ["-qefc", command, "/dev/null"]).wait(timeout: 60)
        #expect(r.exitCode == 0, "\(r)")
        #expect(r.stdout.isEmpty, "\(r.stdout.debugDescription)")
    }
}

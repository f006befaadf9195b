import Glibc
import SeggetTestServer
import Testing

/// The live progress bar a user sees on a terminal, and the plain output off a terminal. segget runs
/// under `script(1)`, which gives it a real pseudo-terminal as standard error.
@Suite(.serialized, .enabled(if: access("/usr/bin/script", X_OK) == 0, "needs script(1) from bsdutils"))
struct TerminalProgressTests {
    @Test func terminalGetsALiveBarThenOneSummaryLine() throws {
        let body = TestFiles.pattern(3 << 20, seed: 91)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let segget = try SpawnedProcess.seggetPath()
        // 4 connections at 512 KiB/s each: about 1.5 s, several redraws at 4-5 per second.
        let command = "\(segget) -n 4 -o \(dir.path("out.bin")) '\(server.url("f", query: "rate=512k"))'"
        let r = try Self.underScript(command)
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

    /// `command` run by a shell under `script(1)`, on a pseudo-terminal of its own, with `TERM` set.
    static func underScript(_ command: String, term: String = "xterm") throws -> SpawnedProcess.Outcome {
        try SpawnedProcess(executable: "/usr/bin/script", arguments: ["-qefc", command, "/dev/null"], environment: ["TERM": term])
            .wait(timeout: 60)
    }

    /// The frames drawn on the terminal of a script: the text between redraws, up to any line
    /// break, but for the lines that clear the last frame away (the summary).
    static func frames(_ screen: String) -> [Substring] {
        screen.components(separatedBy: "\r\u{1B}[2K").dropFirst().compactMap { $0.split(separator: "\n").first.map { $0 } }
            .filter { !$0.hasPrefix("segget:") }
    }

    /// A narrow terminal (20 columns: 80 was used for any of 20 or fewer) and one narrowed in the
    /// middle (the width was read once, at the start): no frame is wider than the terminal then, so
    /// none wraps and leaves its upper rows behind.
    @Test func framesFitANarrowOrNarrowedTerminal() throws {
        let server = try TestServer.serving(TestFiles.pattern(3 << 20, seed: 93))
        defer { server.stop() }
        let dir = try TempDir()
        let segget = try SpawnedProcess.seggetPath()
        let narrow = "stty cols 20 rows 10; \(segget) -n 4 -o \(dir.path("a.bin")) '\(server.url("f", query: "rate=512k"))'"
        let a = try Self.underScript(narrow)
        #expect(a.exitCode == 0, "\(a)")
        let narrowFrames = Self.frames(a.stdout)
        #expect(narrowFrames.count >= 3, "\(a.stdout.debugDescription)")
        #expect(narrowFrames.allSatisfy { $0.count <= 19 }, "\(narrowFrames)")

        let narrowed = "stty cols 100 rows 10; (sleep 0.6; stty cols 30 </dev/tty) & \(segget) -n 4 -o \(dir.path("b.bin")) '\(server.url("f", query: "rate=512k"))'"
        let b = try Self.underScript(narrowed)
        #expect(b.exitCode == 0, "\(b)")
        let frames = Self.frames(b.stdout)
        #expect(frames.contains { $0.count > 30 }, "never drawn wide: \(frames)")
        #expect(frames.last.map { $0.count <= 29 } == true, "\(frames)")
    }

    /// `TERM=dumb` (an editor's shell buffer) takes no erase-line: plain lines, as off a terminal.
    @Test func aDumbTerminalGetsPlainLines() throws {
        let server = try TestServer.serving(TestFiles.pattern(1 << 20, seed: 94))
        defer { server.stop() }
        let dir = try TempDir()
        let segget = try SpawnedProcess.seggetPath()
        let command = "\(segget) -n 4 -o \(dir.path("out.bin")) '\(server.url("f", query: "rate=1m"))'"
        let r = try Self.underScript(command, term: "dumb")
        #expect(r.exitCode == 0, "\(r)")
        #expect(!r.stdout.contains("\u{1B}["), "\(r.stdout.debugDescription)")
        #expect(r.stdout.contains("segget: saved"), "\(r.stdout.debugDescription)")
    }

    @Test func quietTerminalShowsNothing() throws {
        let server = try TestServer.serving(TestFiles.pattern(1 << 20, seed: 92))
        defer { server.stop() }
        let dir = try TempDir()
        let segget = try SpawnedProcess.seggetPath()
        let command = "\(segget) -q -n 4 -o \(dir.path("out.bin")) '\(server.url("f", query: "rate=1m"))'"
        let r = try Self.underScript(command)
        #expect(r.exitCode == 0, "\(r)")
        #expect(r.stdout.isEmpty, "\(r.stdout.debugDescription)")
    }
}

import Foundation
import Segget
import SeggetTestServer
import Testing

#if canImport(Glibc)
import Glibc
#endif

// The segget command line as a user meets it: the built binary, its exit codes, stdout and stderr.

/// Runs the built `segget` binary and captures what it printed.
enum SeggetCLI {
    struct Run: Sendable {
        var exitCode: Int32
        var stdout: String
        var stderr: String
        var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }
    }

    /// `$SEGGET_BIN`, else `segget` beside the test bundle (same build directory), else `.build/debug/segget`.
    static var binary: String {
        if let b = ProcessInfo.processInfo.environment["SEGGET_BIN"], !b.isEmpty { return b }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
        // The test runner may live inside `NAME.xctest/…`.
        while dir.path != "/" {
            let candidate = dir.appendingPathComponent("segget").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return ".build/debug/segget"
    }

    static func run(_ arguments: [String], environment: [String: String] = [:], timeout: Double = 60) throws -> Run {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for k in ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            env[k] = nil
        }
        for (k, v) in environment { env[k] = v }
        p.environment = env
        // Files, not pipes: a chatty child never blocks on a full pipe.
        let dir = try CLITempDir()
        let outPath = dir.path("stdout")
        let errPath = dir.path("stderr")
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        let deadline = Date().addingTimeInterval(timeout)
        while p.isRunning && Date() < deadline { usleep(10_000) }
        if p.isRunning {
            p.terminate()
            p.waitUntilExit()
            throw CLITestError("segget \(arguments) did not finish within \(timeout) s")
        }
        p.waitUntilExit()
        try out.close()
        try err.close()
        return Run(
            exitCode: p.terminationStatus,
            stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }
}

struct CLITestError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// A temporary directory removed when the value is released.
final class CLITempDir: @unchecked Sendable {
    let root: String
    init() throws {
        root = NSTemporaryDirectory() + "segget-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { root + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: root) }
}

/// Deterministic test bytes.
func cliTestBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}

func fileBytes(_ path: String) -> [UInt8]? {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) }
}

/// A started test server serving `resources`; stopped by the caller.
func startCLITestServer(_ resources: [String: [UInt8]]) throws -> TestServer {
    let s = try TestServer()
    for (name, bytes) in resources { s.addResource(name: name, bytes: bytes) }
    try s.start()
    return s
}

@Suite struct CLITests {
    static let badInvocations: [[String]] = [
        ["notaurl"],
        ["http:///no-host"],
        ["ftp://example.com/file.iso"],
        ["--no-such-option", "http://127.0.0.1:9/x"],
        ["-n", "0", "http://127.0.0.1:9/x"],
        ["-n", "500", "http://127.0.0.1:9/x"],
        ["-n", "abc", "http://127.0.0.1:9/x"],
        ["--checksum", "sha256=xyz", "http://127.0.0.1:9/x"],
        ["--checksum", "nonsense", "http://127.0.0.1:9/x"],
        ["-i", "/nonexistent/segget-list"],
        ["-i", "/"],
        ["-o", "a.bin", "-d", "dir", "http://127.0.0.1:9/x"],
        ["-o", "a.bin", "http://127.0.0.1:9/x", "http://127.0.0.1:9/y"],
        ["-j", "0", "http://127.0.0.1:9/x"],
        [],
    ]

    @Test(arguments: badInvocations)
    func badInputGivesOneLineAndExitTwo(_ arguments: [String]) throws {
        let r = try SeggetCLI.run(arguments)
        #expect(r.exitCode == 2, "\(arguments): \(r.stderr)")
        #expect(r.stderrLines.count == 1, "\(arguments) printed: \(r.stderr)")
        #expect(r.stderr.hasPrefix("segget: "))
        #expect(r.stdout.isEmpty)
    }

    @Test func badInputInJSONModeAlsoPrintsAnErrorObject() throws {
        let r = try SeggetCLI.run(["--json", "-n", "0", "http://127.0.0.1:9/x"])
        #expect(r.exitCode == 2)
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        let obj = try #require(JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(obj["type"] as? String == "error")
        #expect(obj["kind"] as? String == "usage")
        #expect(obj["exitCode"] as? Int == 2)
    }

    @Test func badLineInInputFileIsNamed() throws {
        let dir = try CLITempDir()
        let list = dir.path("list")
        try "http://127.0.0.1:9/a\n  colour=blue\n".write(toFile: list, atomically: true, encoding: .utf8)
        let r = try SeggetCLI.run(["-i", list])
        #expect(r.exitCode == 2)
        #expect(r.stderrLines.count == 1)
        #expect(r.stderr.contains("line 2"))
        #expect(r.stderr.contains("colour"))
    }

    /// Two lines that save to one path, however their directories are written (`-d dl` for one,
    /// `dir=./dl/` for the other): refused before anything is fetched, exit 2, both lines named.
    @Test func twoLinesSavingToOnePathAreRefused() throws {
        let dir = try CLITempDir()
        let list = dir.path("list")
        let dl = dir.path("dl")
        try "http://127.0.0.1:9/a\n  out=x.bin\n  dir=\(dl)//\nhttp://127.0.0.1:9/b\n  out=x.bin\n"
            .write(toFile: list, atomically: true, encoding: .utf8)
        let r = try SeggetCLI.run(["-i", list, "-d", dl])
        #expect(r.exitCode == 2)
        #expect(r.stderr.contains("lines 1 and 4 both give out="), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dl + "/x.bin"))
    }

    @Test func existingOutputIsRefusedWithoutForceAndKept() throws {
        let body = cliTestBytes(300_000, seed: 1)
        let server = try startCLITestServer(["f.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("f.bin")
        try "keep me".write(toFile: out, atomically: true, encoding: .utf8)
        let r = try SeggetCLI.run(["-q", "-o", out, server.url("f.bin")])
        #expect(r.exitCode == 5, "\(r.stderr)")
        #expect(r.stderr.contains("already exists"))
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "keep me")

        let forced = try SeggetCLI.run(["-q", "--force", "-o", out, server.url("f.bin")])
        #expect(forced.exitCode == 0, "\(forced.stderr)")
        #expect(fileMatches(out, body))
    }

    /// A FIFO or a device under the output name is never replaced by the download, `--force` or
    /// not (it was: `-f -o mynull` turned a character device into a plain file), in both of the
    /// ways a file is saved: whole from the probe (a small file) and in ranges.
    @Test func aDeviceOrFIFOUnderTheOutputNameIsRefusedEvenWithForce() throws {
        let small = cliTestBytes(100_000, seed: 3)
        let large = cliTestBytes(3_000_000, seed: 4)
        let server = try startCLITestServer(["s.bin": small, "l.bin": large])
        defer { server.stop() }
        let dir = try CLITempDir()
        let fifo = dir.path("fifo")
        #expect(mkfifo(fifo, 0o644) == 0)
        for (name, force) in [("s.bin", true), ("l.bin", true), ("l.bin", false)] {
            let r = try SeggetCLI.run(["-q", "-n", "4"] + (force ? ["--force"] : []) + ["-o", fifo, server.url(name)])
            #expect(r.exitCode == 5, "\(name) \(force): \(r.stderr)")
            #expect(r.stderr.contains("is a device, FIFO or socket"), "\(r.stderr)")
            var st = stat()
            #expect(lstat(fifo, &st) == 0 && (st.st_mode & S_IFMT) == S_IFIFO)
        }
        #expect(!FileManager.default.fileExists(atPath: fifo + ".segget-part"))
    }

    /// A directory under the name the URL gives the file is refused before the fetch, `--force` or
    /// not (it was found only after the whole file had come: exit 5 at the rename, the finished part
    /// file left to fail the same way on every rerun).
    @Test func aDirectoryUnderTheURLsNameIsRefusedBeforeTheFetch() throws {
        let small = cliTestBytes(100_000, seed: 5)
        let large = cliTestBytes(3_000_000, seed: 6)
        let server = try startCLITestServer(["s.bin": small, "l.bin": large])
        defer { server.stop() }
        let dir = try CLITempDir()
        for name in ["s.bin", "l.bin"] {
            #expect(mkdir(dir.path(name), 0o755) == 0)
            for force in [false, true] {
                let r = try SeggetCLI.run(["-q", "-n", "4", "-d", dir.root] + (force ? ["--force"] : []) + [server.url(name)])
                #expect(r.exitCode == 5, "\(name) \(force): \(r.stderr)")
                #expect(r.stderr.contains("is a directory, which segget does not replace (even with --force)"), "\(r.stderr)")
                #expect(r.stderr.contains("-d "), "\(r.stderr)")
                #expect(!FileManager.default.fileExists(atPath: dir.path(name) + ".segget-part"), "\(name) \(force)")
            }
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: dir.path(name), isDirectory: &isDirectory) && isDirectory.boolValue)
        }
    }

    /// An empty file run again says only that an earlier run finished it (it once also said
    /// "saved … (0 B) … 0 connections").
    @Test func anEmptyFileRunAgainSaysOnlyThatItWasDone() throws {
        let server = try startCLITestServer(["zero.bin": []])
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("zero.bin")
        let first = try SeggetCLI.run(["-o", out, server.url("zero.bin")])
        #expect(first.exitCode == 0 && first.stderr.contains("saved"), "\(first.stderr)")
        let again = try SeggetCLI.run(["-o", out, server.url("zero.bin")])
        #expect(again.exitCode == 0, "\(again.stderr)")
        #expect(again.stderr.contains("was already completed by an earlier run"), "\(again.stderr)")
        #expect(!again.stderr.contains("saved"), "\(again.stderr)")
    }

    /// A final name that is a side file's of another download is refused (a file saved as
    /// `big.segget-part` was deleted by the next `-o big` as a part file without its journal).
    @Test func aSideFilesNameIsRefusedAsTheOutput() throws {
        let body = cliTestBytes(300_000, seed: 5)
        let server = try startCLITestServer(["f.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        for suffix in [".segget-part", ".segget-journal", ".segget-progress"] {
            let out = dir.path("big" + suffix)
            let r = try SeggetCLI.run(["-q", "-o", out, server.url("f.bin")])
            #expect(r.exitCode == 5, "\(suffix): \(r.stderr)")
            #expect(r.stderr.contains("ends in \(suffix)"), "\(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.root).isEmpty)
    }

    /// The same download run again after it finished: done at once, exit 0, the file untouched (its
    /// `FinishedMark`), after the one request that names the file. Once the server's copy changes
    /// (its length, or at the same length its ETag), refused (5) with what to do; once the file on
    /// disk changes, refused as any file.
    @Test func aFinishedDownloadRunAgainIsDoneAndAChangedOneIsRefused() throws {
        let body = cliTestBytes(300_000, seed: 3)
        let server = try startCLITestServer(["f.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("f.bin")
        let first = try SeggetCLI.run(["-q", "-o", out, server.url("f.bin")])
        #expect(first.exitCode == 0, "\(first.stderr)")
        func inode() throws -> Int? { try FileManager.default.attributesOfItem(atPath: out)[.systemFileNumber] as? Int }
        let firstInode = try #require(try inode())

        let before = server.requests.count
        let sentBefore = server.bodyBytesSent
        let again = try SeggetCLI.run(["-o", out, server.url("f.bin")])
        #expect(again.exitCode == 0, "\(again.stderr)")
        // One request, for one byte: the mark was seen before the probe went out.
        #expect(server.bodyBytesSent - sentBefore <= 1, "sent \(server.bodyBytesSent - sentBefore) body bytes")
        #expect(again.stderr.contains("was already completed by an earlier run"), "\(again.stderr)")
        #expect(!again.stderr.contains("saved"), "\(again.stderr)")
        #expect(server.requests.count == before + 1, "\(server.requests.dropFirst(before))")
        #expect(try inode() == firstInode)
        #expect(fileMatches(out, body))

        // `--no-continue` does not use the mark: refused, after a probe of one byte.
        let sentBeforeNoContinue = server.bodyBytesSent
        let noContinue = try SeggetCLI.run(["-q", "--no-continue", "-o", out, server.url("f.bin")])
        #expect(noContinue.exitCode == 5, "\(noContinue.stderr)")
        #expect(noContinue.stderr.contains("already exists; pass --force"), "\(noContinue.stderr)")
        #expect(server.bodyBytesSent - sentBeforeNoContinue <= 1, "sent \(server.bodyBytesSent - sentBeforeNoContinue) body bytes")
        #expect(try inode() == firstInode)

        // Another URL of the same name is not this file's.
        server.addResource(name: "g.bin", bytes: body)
        let otherURL = try SeggetCLI.run(["-q", "-o", out, server.url("g.bin")])
        #expect(otherURL.exitCode == 5, "\(otherURL.stderr)")
        #expect(otherURL.stderr.contains("already exists, finished by an earlier segget run from a URL other than this one") && otherURL.stderr.contains("another name (-o)"), "\(otherURL.stderr)")

        // The server's copy grew: the file here is an older version of it.
        let grown = cliTestBytes(300_001, seed: 4)
        server.addResource(name: "f.bin", bytes: grown)
        let changedThere = try SeggetCLI.run(["-q", "-o", out, server.url("f.bin")])
        #expect(changedThere.exitCode == 5, "\(changedThere.stderr)")
        #expect(changedThere.stderr.contains("the server now sends 300001 bytes where that file has 300000"), "\(changedThere.stderr)")
        #expect(fileMatches(out, body))
        let refreshed = try SeggetCLI.run(["-q", "--force", "-o", out, server.url("f.bin")])
        #expect(refreshed.exitCode == 0, "\(refreshed.stderr)")
        #expect(fileMatches(out, grown))

        // Changed there at the same length (other bytes, so another ETag): an older version too.
        let sameLength = cliTestBytes(300_001, seed: 6)
        server.replaceResource(name: "f.bin", bytes: sameLength)
        let changedAtLength = try SeggetCLI.run(["-q", "-o", out, server.url("f.bin")])
        #expect(changedAtLength.exitCode == 5, "\(changedAtLength.stderr)")
        #expect(changedAtLength.stderr.contains("the server's ETag or Last-Modified now differs from that file's"), "\(changedAtLength.stderr)")
        #expect(fileMatches(out, grown))
        #expect(try SeggetCLI.run(["-q", "--force", "-o", out, server.url("f.bin")]).exitCode == 0)
        #expect(fileMatches(out, sameLength))
        let unchanged = try SeggetCLI.run(["-o", out, server.url("f.bin")])
        #expect(unchanged.exitCode == 0 && unchanged.stderr.contains("was already completed by an earlier run"), "\(unchanged.stderr)")

        // Changed here (same length, other bytes): any file under the name.
        try Data(cliTestBytes(300_001, seed: 5)).write(to: URL(fileURLWithPath: out))
        let changedHere = try SeggetCLI.run(["-q", "-o", out, server.url("f.bin")])
        #expect(changedHere.exitCode == 5, "\(changedHere.stderr)")
        #expect(changedHere.stderr.contains("already exists; pass --force"), "\(changedHere.stderr)")
    }

    /// A list whose server names the file (`Content-Disposition`): run again, the file is found under
    /// the server's name after its one request, and left alone.
    @Test func aListRunAgainFindsTheFileTheServerNamed() throws {
        let body = cliTestBytes(150_000, seed: 6)
        let server = try startCLITestServer(["plain.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let cd = "attachment%3B%20filename%3D%22suggested.bin%22"
        let list = dir.path("list.txt")
        try server.url("plain.bin", mode: .disposition, query: "cd=\(cd)").write(toFile: list, atomically: true, encoding: .utf8)
        let first = try SeggetCLI.run(["-q", "-i", list, "-d", dir.path("sub")])
        #expect(first.exitCode == 0, "\(first.stderr)")
        let before = server.requests.count
        let again = try SeggetCLI.run(["-i", list, "-d", dir.path("sub")])
        #expect(again.exitCode == 0, "\(again.stderr)")
        #expect(again.stderr.contains("suggested.bin was completed by an earlier run of this URL; skipped."), "\(again.stderr)")
        #expect(server.requests.count == before + 1)
        #expect(fileMatches(dir.path("sub/suggested.bin"), body))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path("sub")) == ["suggested.bin"])

        // The server's file changed at the same length: not skipped as done, refused as changed.
        server.replaceResource(name: "plain.bin", bytes: cliTestBytes(150_000, seed: 8))
        let changed = try SeggetCLI.run(["-i", list, "-d", dir.path("sub")])
        #expect(changed.exitCode == 5, "\(changed.stderr)")
        #expect(changed.stderr.contains("now differs from that file's"), "\(changed.stderr)")
        #expect(fileMatches(dir.path("sub/suggested.bin"), body))
    }

    @Test func directoryGetsTheServerSuggestedName() throws {
        let body = cliTestBytes(200_000, seed: 2)
        let server = try startCLITestServer(["plain.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let cd = "attachment%3B%20filename%3D%22suggested.bin%22"
        let r = try SeggetCLI.run(["-q", "-n", "3", "-d", dir.path("sub"), server.url("plain.bin", mode: .disposition, query: "cd=\(cd)")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileMatches(dir.path("sub/suggested.bin"), body))
        #expect(!FileManager.default.fileExists(atPath: dir.path("sub/plain.bin")))
    }

    /// A server's name ending as segget's side files do is saved with an underscore for that dot,
    /// the download unharmed (it was refused, exit 5, "choose another name with -o").
    @Test func aServerNameLikeASideFileIsSavedUnlikeOne() throws {
        let body = cliTestBytes(200_000, seed: 3)
        let server = try startCLITestServer(["plain.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let cd = "attachment%3B%20filename%3D%22other.iso.segget-part%22"
        let r = try SeggetCLI.run(["-q", "-n", "3", "-d", dir.path("sub"), server.url("plain.bin", mode: .disposition, query: "cd=\(cd)")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileMatches(dir.path("sub/other.iso_segget-part"), body))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path("sub")) == ["other.iso_segget-part"])
    }

    @Test func helpListsTheExitCodes() throws {
        let r = try SeggetCLI.run(["--help"])
        #expect(r.exitCode == 0)
        #expect(r.stdout.contains("EXIT CODES"))
        for kind in FailureKind.allCases {
            #expect(r.stdout.contains(kind.summary), "missing \(kind)")
        }
        #expect(r.stdout.contains("130"))
        let sub = try SeggetCLI.run(["get", "--help"])
        #expect(sub.exitCode == 0)
        #expect(sub.stdout.contains("--input-file"))
        #expect(sub.stdout.contains("EXIT CODES"))
    }

    @Test func versionPrintsTheVersion() throws {
        let r = try SeggetCLI.run(["--version"])
        #expect(r.exitCode == 0)
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == seggetVersion)
    }

    @Test func httpOptionsReachTheServer() throws {
        let body = cliTestBytes(100_000, seed: 3)
        let server = try startCLITestServer(["h.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let r = try SeggetCLI.run([
            "-q", "-n", "2", "-o", dir.path("h.bin"), "-u", "alice:s3cret", "-b", "session=abc; theme=dark",
            "-e", "http://example.com/page", "-H", "X-Segget-Test: yes", "-A", "segget-test-agent/1", server.url("h.bin"),
        ])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileMatches(dir.path("h.bin"), body))
        let requests = server.requests.filter { $0.path == "/h.bin" }
        #expect(!requests.isEmpty)
        let basic = "Basic " + Data("alice:s3cret".utf8).base64EncodedString()
        // Basic is sent with the first request, as curl -u does: the test server never challenges.
        #expect(requests.allSatisfy { $0.headers["authorization"] == basic })
        for q in requests {
            #expect(q.headers["cookie"] == "session=abc; theme=dark")
            #expect(q.headers["referer"] == "http://example.com/page")
            #expect(q.headers["x-segget-test"] == "yes")
            #expect(q.headers["user-agent"] == "segget-test-agent/1")
        }
    }

    @Test func netrcCredentialsAreSent() throws {
        let body = cliTestBytes(50_000, seed: 4)
        let server = try startCLITestServer(["n.bin": body])
        defer { server.stop() }
        let home = try CLITempDir()
        try "machine 127.0.0.1 login bob password hunter2\n".write(toFile: home.path(".netrc"), atomically: true, encoding: .utf8)
        chmod(home.path(".netrc"), 0o600)
        let r = try SeggetCLI.run(["-q", "--netrc", "-o", home.path("n.bin"), server.url("n.bin")], environment: ["HOME": home.root])
        #expect(r.exitCode == 0, "\(r.stderr)")
        let basic = "Basic " + Data("bob:hunter2".utf8).base64EncodedString()
        #expect(server.requests.contains { $0.headers["authorization"] == basic })
    }

    @Test func proxyReceivesTheRequests() throws {
        // The "proxy" is a test server; the origin in the URL has a closed port, so anything the
        // proxy sees can only have come through --proxy. The test server does not forward
        // absolute-form requests (it answers 400), so segget fails after asking it.
        let proxy = try startCLITestServer([:])
        defer { proxy.stop() }
        let closed = try TestServer()
        let deadPort = closed.port
        closed.stop()
        let dir = try CLITempDir()
        let r = try SeggetCLI.run(["-q", "--retries", "0", "--proxy", proxy.baseURL, "-o", dir.path("p.bin"), "http://127.0.0.1:\(deadPort)/p.bin"])
        #expect(r.exitCode != 0)
        // The test server records the absolute-form request it could not parse as a 400 with no
        // headers; that it saw a request at all proves the proxy was used.
        #expect(proxy.connectionsAccepted >= 1)
        #expect(proxy.requests.contains { $0.status == 400 })
    }

    @Test func autoConnectionsAndMirrorsDownloadCorrectly() throws {
        let body = cliTestBytes(3_000_000, seed: 6)
        let a = try startCLITestServer(["m.bin": body])
        let b = try startCLITestServer(["m.bin": body])
        defer {
            a.stop()
            b.stop()
        }
        let dir = try CLITempDir()
        let r = try SeggetCLI.run(["-q", "-n", "auto", "--chunk-size", "64k", "--mirror", b.url("m.bin"), "-o", dir.path("m.bin"), a.url("m.bin")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileMatches(dir.path("m.bin"), body))
        #expect(a.requests.contains { $0.headers["range"] != nil })
    }
}

/// True when the file at `path` holds exactly `bytes` (a Bool, so a failure does not print megabytes).
func fileMatches(_ path: String, _ bytes: [UInt8]) -> Bool {
    fileBytes(path) == bytes
}

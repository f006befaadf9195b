import Foundation
import Segget
import SeggetTestServer
import Testing

#if canImport(Glibc)
import Glibc
#endif

// Several downloads from one command: input files, -j, duplicate names, --json, failures.

@Suite struct BatchTests {
    /// Parses every stdout line as a JSON object; fails the test on a line that is not one.
    static func jsonLines(_ stdout: String) throws -> [[String: Any]] {
        try stdout.split(separator: "\n").map { line in
            let value = try JSONSerialization.jsonObject(with: Data(line.utf8))
            return try #require(value as? [String: Any], "not an object: \(line)")
        }
    }

    /// `count` files named prefix0, prefix1, … of `size` bytes and one more per number.
    static func numberedFiles(_ prefix: String, count: Int, size: Int, seed: UInt64) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for i in 0..<count { files["\(prefix)\(i)"] = cliTestBytes(size + i, seed: seed + UInt64(i)) }
        return files
    }

    /// An input file in `dir` listing `urls`, one per line; its path.
    static func writeList(_ dir: CLITempDir, _ urls: [String]) throws -> String {
        let list = dir.path("list.txt")
        try urls.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        return list
    }

    /// Runs segget with `arguments` and sends it SIGINT once `ready` holds (or after 60 s); its exit
    /// status, and whether `ready` came to hold. Never after a fixed delay, which a slow start on a
    /// loaded machine can outlast.
    static func interrupted(_ arguments: [String], signal: Int32 = SIGINT, once ready: () -> Bool) throws -> (status: Int32, wasReady: Bool) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: SeggetCLI.binary)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        let wasReady = waitUntil(timeout: 60, ready)
        kill(p.processIdentifier, signal)
        p.waitUntilExit()
        return (p.terminationStatus, wasReady)
    }

    @Test func inputFileWithSharedNamesIntoDirectory() throws {
        let a = cliTestBytes(2_000_000, seed: 11)
        let b = cliTestBytes(700_000, seed: 12)
        let c = cliTestBytes(123_457, seed: 13)
        let server = try startCLITestServer(["file.bin": a, "sub/file.bin": b, "c.dat": c])
        defer { server.stop() }
        let dir = try CLITempDir()
        let list = dir.path("list.txt")
        let sha = sha256Hex(c)
        try """
            # two URLs whose names are both file.bin
            \(server.url("file.bin"))
            \(server.url("sub/file.bin"))

            \(server.url("c.dat"))\r
              out=renamed.dat
              checksum=sha256=\(sha)
            """.write(toFile: list, atomically: true, encoding: .utf8)
        let out = dir.path("out")
        let r = try SeggetCLI.run(["-n", "4", "-i", list, "-d", out])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileMatches(out + "/file.bin", a))
        #expect(fileMatches(out + "/file.1.bin", b))
        #expect(fileMatches(out + "/renamed.dat", c))
        // The summary table names every file.
        #expect(r.stderr.contains("NAME"))
        #expect(r.stderr.contains("3 of 3 files downloaded"))
        for name in ["file.bin", "file.1.bin", "renamed.dat"] { #expect(r.stderr.contains(name)) }

        // Again, the same command: the same names are chosen, and each file is the one this list
        // finished there (its mark, `FinishedMark`), so the run is done at once, without a request.
        let before = server.requests.count
        let again = try SeggetCLI.run(["-i", list, "-d", out])
        #expect(again.exitCode == 0, "\(again.stderr)")
        for name in ["file.bin", "file.1.bin", "renamed.dat"] {
            #expect(again.stderr.contains("\(name) was completed by an earlier run of this URL; skipped."), "\(again.stderr)")
        }
        #expect(server.requests.count == before, "\(server.requests.dropFirst(before))")
        #expect(fileMatches(out + "/file.bin", a))
        #expect(!FileManager.default.fileExists(atPath: out + "/file.2.bin"))

        // A file changed since it was finished (here replaced by other bytes of the same length) is
        // any file under the name: refused (5), with the list's advice (--skip-existing to run a
        // stopped list again, not -o), and left as it is. The others are still done.
        let other = cliTestBytes(700_000, seed: 99)
        try Data(other).write(to: URL(fileURLWithPath: out + "/file.1.bin"))
        let changed = try SeggetCLI.run(["-q", "-i", list, "-d", out])
        #expect(changed.exitCode == 5)
        #expect(changed.stderr.contains("file.1.bin already exists; pass --skip-existing"), "\(changed.stderr)")
        #expect(!changed.stderr.contains("-o to choose"), "\(changed.stderr)")
        #expect(!changed.stderr.contains("renamed.dat"), "\(changed.stderr)")
        #expect(fileMatches(out + "/file.1.bin", other))
        let skip = try SeggetCLI.run(["--json", "--skip-existing", "-i", list, "-d", out])
        #expect(skip.exitCode == 0)
        #expect(try Self.jsonLines(skip.stdout).filter { $0["type"] as? String == "skip" }.count == 3)
        // --force fetches every file again.
        let forced = try SeggetCLI.run(["-q", "--force", "-i", list, "-d", out])
        #expect(forced.exitCode == 0, "\(forced.stderr)")
        #expect(fileMatches(out + "/file.1.bin", b))
    }

    /// An `out=` line gets the name it gives even where an earlier line's URL ends in that name: the
    /// URL's file is the one numbered (the `out=` file was saved as `x.1.bin`), and again on a rerun.
    @Test func anOutNameIsKeptFromAnEarlierURLsName() throws {
        let x = cliTestBytes(300_000, seed: 14)
        let y = cliTestBytes(200_000, seed: 15)
        let server = try startCLITestServer(["x.bin": x, "y.bin": y])
        defer { server.stop() }
        let dir = try CLITempDir()
        let list = dir.path("list.txt")
        try "\(server.url("x.bin"))\n\(server.url("y.bin"))\n  out=x.bin\n".write(toFile: list, atomically: true, encoding: .utf8)
        let out = dir.path("out")
        for jobs in ["1", "2"] {
            let r = try SeggetCLI.run(["-j", jobs, "-i", list, "-d", out + jobs])
            #expect(r.exitCode == 0, "\(r.stderr)")
            #expect(fileMatches(out + jobs + "/x.bin", y))
            #expect(fileMatches(out + jobs + "/x.1.bin", x))
        }
        // Again: each file is found finished under the name it had, without a request (a guess that
        // did not keep x.bin for the out= line sent the first file's probe to look).
        let before = server.requests.count
        let again = try SeggetCLI.run(["-i", list, "-d", out + "1"])
        #expect(again.exitCode == 0, "\(again.stderr)")
        #expect(server.requests.count == before, "\(server.requests.dropFirst(before))")
        #expect(fileMatches(out + "1/x.bin", y))
        #expect(!FileManager.default.fileExists(atPath: out + "1/x.2.bin"))
    }

    /// `--skip-existing` counts a regular file (or a link to one) as done, not a directory, a FIFO or
    /// a dangling link (each was skipped, exit 0, though no download was there); and a file another
    /// URL's run finished (two lines' names swapped) is named as such, without the advice to skip it.
    @Test func skipExistingCountsOnlyFilesAndAnotherURLsFileIsNamed() throws {
        let a = cliTestBytes(300_000, seed: 110), b = cliTestBytes(200_000, seed: 111)
        let server = try startCLITestServer(["a.bin": a, "b.bin": b])
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: out + "/a.bin", withIntermediateDirectories: true)
        #expect(mkfifo(out + "/b.bin", 0o644) == 0)
        let list = try Self.writeList(dir, [server.url("a.bin"), server.url("b.bin")])
        let notFiles = try SeggetCLI.run(["--json", "--skip-existing", "-i", list, "-d", out])
        #expect(notFiles.exitCode == 5, "\(notFiles.stderr)")
        #expect(try Self.jsonLines(notFiles.stdout).filter { $0["type"] as? String == "skip" }.isEmpty, "\(notFiles.stdout)")
        try FileManager.default.removeItem(atPath: out + "/a.bin")
        try FileManager.default.removeItem(atPath: out + "/b.bin")
        #expect(symlink("nowhere", out + "/a.bin") == 0)
        let dangling = try SeggetCLI.run(["-q", "--skip-existing", "-i", list, "-d", out])
        #expect(dangling.exitCode == 5, "\(dangling.stderr)")
        try FileManager.default.removeItem(atPath: out + "/a.bin")

        // Both downloaded, then the list with the names swapped.
        let first = try SeggetCLI.run(["-q", "-i", list, "-d", out])
        #expect(first.exitCode == 0, "\(first.stderr)")
        let swapped = dir.path("swapped.txt")
        try "\(server.url("a.bin"))\n  out=b.bin\n\(server.url("b.bin"))\n  out=a.bin\n".write(toFile: swapped, atomically: true, encoding: .utf8)
        let r = try SeggetCLI.run(["-q", "-i", swapped, "-d", out])
        #expect(r.exitCode == 5)
        #expect(r.stderr.contains("b.bin already exists, finished by an earlier segget run from a URL other than this one"), "\(r.stderr)")
        #expect(!r.stderr.contains("--skip-existing"), "\(r.stderr)")
        #expect(fileMatches(out + "/a.bin", a) && fileMatches(out + "/b.bin", b))
        // A link to a regular file counts as on disk.
        try FileManager.default.removeItem(atPath: out + "/b.bin")
        #expect(symlink("a.bin", out + "/b.bin") == 0)
        let linked = try SeggetCLI.run(["--json", "--skip-existing", "-i", list, "-d", out])
        #expect(linked.exitCode == 0, "\(linked.stderr)")
        #expect(try Self.jsonLines(linked.stdout).filter { $0["type"] as? String == "skip" }.count == 2)
    }

    /// Per-file costs vanish in a batch: a file no larger than a chunk takes exactly one request (the
    /// probe brings it whole, and the download does not probe again), and each of the `-j` workers
    /// keeps its connection alive for its next file instead of opening a new one.
    @Test func smallFilesTakeOneRequestEachOverKeptAliveConnections() throws {
        let files = Self.numberedFiles("f", count: 12, size: 100_000, seed: 40)
        let server = try startCLITestServer(files)
        defer { server.stop() }
        let dir = try CLITempDir()
        let list = try Self.writeList(dir, (0..<12).map { server.url("f\($0)") })
        let r = try SeggetCLI.run(["-q", "-n", "1", "-j", "3", "-i", list, "-d", dir.path("out")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        for i in 0..<12 { #expect(fileMatches(dir.path("out") + "/f\(i)", files["f\(i)"]!)) }
        #expect(server.requests.count == 12, "\(server.requests)")
        #expect(Set(server.requests.map(\.remotePort)).count <= 3, "\(server.requests)")
    }

    /// A 404 keeps its connection for the next file: its few bytes of text are read to their end.
    /// Cut at its head, each closed its connection, and the next file dialled again (a list of 330
    /// lines with 10 missing opened 24 connections at `-j 16` through a 200 ms link).
    @Test func aMissingFileLeavesItsConnectionForTheNext() throws {
        let files = Self.numberedFiles("f", count: 12, size: 50_000, seed: 44)
        let server = try startCLITestServer(files)
        defer { server.stop() }
        let dir = try CLITempDir()
        var urls: [String] = []
        for i in 0..<12 {
            urls.append(server.url("f\(i)"))
            if i % 3 == 0 { urls.append(server.url("missing\(i)")) }
        }
        let list = try Self.writeList(dir, urls)
        let r = try SeggetCLI.run(["-q", "-n", "1", "-j", "2", "--retries", "0", "-i", list, "-d", dir.path("out")])
        #expect(r.exitCode == 4, "\(r.stderr)")
        for i in 0..<12 { #expect(fileMatches(dir.path("out") + "/f\(i)", files["f\(i)"]!)) }
        #expect(server.requests.count == 16, "\(server.requests)")
        #expect(server.connectionsAccepted <= 2, "\(server.requests)")
    }

    /// A small file whose answer came whole while an earlier file's answer is late gives its place
    /// to the next file as it waits for its name: with `-j 2` and the first answer 1.5 s late, the
    /// second and third files wait so and the fourth is asked meanwhile. Kept, the second file held
    /// its place and nothing more was asked until the first answered (a list of 330 lines through
    /// 200 ms and 1 % loss spent a tenth of its places so).
    @Test func aWholeFileWaitingForItsNameGivesItsPlaceBack() throws {
        let files = Self.numberedFiles("f", count: 7, size: 20_000, seed: 45)
        let server = try startCLITestServer(files)
        defer { server.stop() }
        let dir = try CLITempDir()
        let urls = (0..<7).map { $0 == 0 ? server.url("f0", query: "firstbyte=1.5") : server.url("f\($0)") }
        let list = try Self.writeList(dir, urls)
        let r = try SeggetCLI.run(["-q", "-n", "1", "-j", "2", "-i", list, "-d", dir.path("out")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        for i in 0..<7 { #expect(fileMatches(dir.path("out") + "/f\(i)", files["f\(i)"]!)) }
        let requests = server.requests
        let first = try #require(requests.first { $0.path == "/f0" })
        let meanwhile = requests.filter { $0.path != "/f0" && $0.arrivedAt < first.arrivedAt + 1.2 }
        #expect(meanwhile.count == 3, "\(requests)")
    }

    /// A file whose name an earlier line of the list took in this run asks for its first bytes, not
    /// one: it gets a numbered name, and nothing an earlier run left is at its name. Asked for one
    /// byte, it cost a request more (3 for the two files).
    @Test func aNameThisRunTookCostsNoExtraRequest() throws {
        let a = cliTestBytes(50_000, seed: 46)
        let b = cliTestBytes(60_000, seed: 47)
        let server = try startCLITestServer(["a/x.bin": a, "b/x.bin": b])
        defer { server.stop() }
        let dir = try CLITempDir()
        let list = try Self.writeList(dir, [server.url("a/x.bin"), server.url("b/x.bin")])
        let r = try SeggetCLI.run(["-q", "-j", "1", "-i", list, "-d", dir.path("out")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileMatches(dir.path("out") + "/x.bin", a))
        #expect(fileMatches(dir.path("out") + "/x.1.bin", b))
        #expect(server.requests.count == 2, "\(server.requests)")
    }

    /// The last file of a list borrows the connections the finished files left: with a budget of 4
    /// shared by 4 files in flight, each starts on one connection; once the three small ones are done,
    /// the big paced one takes chunks of its run onto borrowed connections, never more than -n in all.
    @Test func theLastFileBorrowsTheConnectionsTheOthersLeft() throws {
        let big = cliTestBytes(4 << 20, seed: 61)
        var files = ["big.bin": big]
        for i in 0..<3 { files["s\(i)"] = cliTestBytes(50_000 + i, seed: UInt64(62 + i)) }
        let server = try startCLITestServer(files)
        defer { server.stop() }
        let dir = try CLITempDir()
        let list = dir.path("list.txt")
        // Last in the list, so the small files' names do not wait for its probe.
        try ((0..<3).map { server.url("s\($0)") } + [server.url("big.bin", query: "rate=2m")])
            .joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
        let r = try SeggetCLI.run(["--json", "-n", "3", "-j", "4", "--total-connections", "4", "-i", list, "-d", dir.path("out")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileMatches(dir.path("out") + "/big.bin", big))
        for i in 0..<3 { #expect(fileMatches(dir.path("out") + "/s\(i)", files["s\(i)"]!)) }
        let objects = try Self.jsonLines(r.stdout)
        let start = try #require(objects.first { $0["type"] as? String == "start" && $0["id"] as? Int == 4 })
        #expect(start["connections"] as? Int == 1)
        let finish = try #require(objects.first { $0["type"] as? String == "finish" && $0["id"] as? Int == 4 })
        let used = try #require(finish["connections"] as? Int)
        #expect(used >= 2 && used <= 3, "\(objects)")
        // Its requests came over as many connections, the borrowed ones asking from the second chunk on.
        let requests = server.requests.filter { $0.path == "/big.bin" }
        #expect(Set(requests.map(\.remotePort)).count >= 2, "\(requests)")
        let later = requests.dropFirst().compactMap { $0.headers["range"] }
        #expect(!later.isEmpty && later.allSatisfy { !$0.hasPrefix("bytes=0-") }, "\(later)")
    }

    @Test func jsonLinesParseAndDescribeEveryFile() throws {
        let a = cliTestBytes(1_500_000, seed: 21)
        let b = cliTestBytes(600_000, seed: 22)
        let server = try startCLITestServer(["a.bin": a, "b.bin": b])
        defer { server.stop() }
        let dir = try CLITempDir()
        // Throttled so that progress objects appear.
        let r = try SeggetCLI.run([
            "--json", "-j", "2", "-n", "2", "-d", dir.root, server.url("a.bin", query: "rate=1m"), server.url("b.bin"),
            server.url("a.bin", mode: .noranges),
        ])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(r.stderr.isEmpty, "stderr: \(r.stderr)")
        let objects = try Self.jsonLines(r.stdout)
        let types = objects.compactMap { $0["type"] as? String }
        #expect(types.count == objects.count)
        #expect(types.last == "summary")
        #expect(types.filter { $0 == "start" }.count == 3)
        #expect(types.filter { $0 == "finish" }.count == 3)
        #expect(types.contains("progress"))
        #expect(types.contains("notice"))  // the noranges server
        let finishes = objects.filter { $0["type"] as? String == "finish" }
        let paths = Set(finishes.compactMap { $0["path"] as? String })
        #expect(paths == [dir.root + "/a.bin", dir.root + "/b.bin", dir.root + "/a.1.bin"])
        for f in finishes {
            #expect(f["bytes"] is NSNumber)
            #expect(f["seconds"] is NSNumber)
        }
        let progress = try #require(objects.first { $0["type"] as? String == "progress" && $0["id"] as? Int == 1 })
        #expect(progress["completed"] is NSNumber)
        #expect(progress["total"] as? Int == a.count)
        #expect(progress["connections"] is [[String: Any]])
        let start = try #require(objects.first { $0["type"] as? String == "start" && $0["id"] as? Int == 1 })
        #expect(start["size"] as? Int == a.count)
        #expect(start["connections"] as? Int == 2)
        let summary = try #require(objects.last)
        #expect(summary["succeeded"] as? Int == 3)
        #expect(summary["exitCode"] as? Int == 0)
    }

    /// A file the first answer brought whole: its `progress` counts the bytes received as its
    /// `finish` does (it said 0 received).
    @Test func aFileTheFirstAnswerBroughtCountsItsBytesReceived() throws {
        let small = cliTestBytes(300_000, seed: 25)
        let server = try startCLITestServer(["s.bin": small])
        defer { server.stop() }
        let dir = try CLITempDir()
        let r = try SeggetCLI.run(["--json", "-o", dir.path("s.bin"), server.url("s.bin")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        let objects = try Self.jsonLines(r.stdout)
        let finish = try #require(objects.first { $0["type"] as? String == "finish" })
        #expect(finish["received"] as? Int == small.count, "\(finish)")
        let progress = objects.filter { $0["type"] as? String == "progress" }
        #expect(!progress.isEmpty && progress.allSatisfy { $0["received"] as? Int == small.count }, "\(progress)")
    }

    /// A Metalink's file starts with the document's size (it started with null: its name is the
    /// document's, so it starts before any answer).
    @Test func aMetalinksFileStartsWithItsSize() throws {
        let small = cliTestBytes(5_000, seed: 23)
        let server = try startCLITestServer(["s.bin": small])
        defer { server.stop() }
        let dir = try CLITempDir()
        try metalinkDocument(name: "m.bin", size: small.count, urls: [server.url("s.bin")], pieces: nil, hash: sha256(small))
            .write(toFile: dir.path("m.meta4"), atomically: true, encoding: .utf8)
        let m = try SeggetCLI.run(["--json", "-d", dir.path("meta"), dir.path("m.meta4")])
        #expect(m.exitCode == 0, "\(m.stderr)")
        let start = try #require(try Self.jsonLines(m.stdout).first { $0["type"] as? String == "start" })
        #expect(start["size"] as? Int == small.count, "\(start)")
    }

    /// A list's file with `out=` is looked for under that name, not the URL's: a file under the
    /// URL's own name made its first look a one-byte request, and the file cost two requests.
    @Test func outIsTheNameTheFirstLookLooksFor() throws {
        let small = cliTestBytes(5_000, seed: 24)
        let server = try startCLITestServer(["s.bin": small])
        defer { server.stop() }
        let dir = try CLITempDir()
        try TestFiles.write(dir.path("s.bin"), [1, 2, 3])
        try "\(server.url("s.bin"))\n  out=plain.bin\n".write(toFile: dir.path("l.txt"), atomically: true, encoding: .utf8)
        let r = try SeggetCLI.run(["-q", "-d", dir.root, "-i", dir.path("l.txt")])
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileBytes(dir.path("plain.bin")) == small)
        #expect(fileBytes(dir.path("s.bin")) == [1, 2, 3])
        #expect(server.requests.count == 1, "\(server.requests)")
    }

    @Test func aFailingURLDoesNotStopTheOthers() throws {
        let a = cliTestBytes(400_000, seed: 31)
        let b = cliTestBytes(300_000, seed: 32)
        let server = try startCLITestServer(["a.bin": a, "b.bin": b])
        defer { server.stop() }
        let dir = try CLITempDir()
        let r = try SeggetCLI.run([
            "--json", "-j", "2", "--retries", "0", "-d", dir.root, server.url("a.bin"), server.url("missing.bin"),
            server.url("b.bin"),
        ])
        #expect(r.exitCode == 4, "\(r.stdout)")
        #expect(fileMatches(dir.root + "/a.bin", a))
        #expect(fileMatches(dir.root + "/b.bin", b))
        let objects = try Self.jsonLines(r.stdout)
        let error = try #require(objects.first { $0["type"] as? String == "error" })
        #expect(error["id"] as? Int == 2)
        #expect(error["kind"] as? String == "httpStatus")
        #expect(error["exitCode"] as? Int == 4)
        #expect(error["httpStatus"] as? Int == 404)
        #expect((error["message"] as? String)?.isEmpty == false)
        #expect(error["requests"] as? Int == 1, "the 404's request is counted")
        let summary = try #require(objects.last)
        #expect(summary["failed"] as? Int == 1)
        #expect(summary["succeeded"] as? Int == 2)
        // Every request the run sent, the failed file's too (it was left out: exploratory run 9).
        #expect(summary["requests"] as? Int == server.requests.count, "\(server.requests)")

        // Human mode: the failure is one line and the table marks it.
        let human = try SeggetCLI.run(["-j", "2", "--force", "--retries", "0", "-d", dir.root, server.url("a.bin"), server.url("missing.bin")])
        #expect(human.exitCode == 4)
        #expect(human.stderr.contains("failed (exit 4"))
    }

    /// A file whose first look failed is not asked again at once: a 404 is asked once, as for one
    /// file, and a 503 is asked again only after its `Retry-After` (the batch once sent the second
    /// request of each at once, 2 ms after the refusal).
    @Test func aBatchKeepsAFailedProbesAnswer() throws {
        let body = cliTestBytes(200_000, seed: 35)
        let server = try startCLITestServer(["r.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let refused = server.url("r.bin", mode: .status, query: "code=503&times=1&retryafter=1")
        let r = try SeggetCLI.run(["-q", "-d", dir.root, refused, server.url("missing.bin")])
        #expect(r.exitCode == 4, "\(r.stderr)")
        #expect(fileMatches(dir.root + "/r.bin", body))
        let requests = server.requests
        #expect(requests.filter { $0.path.hasSuffix("/missing.bin") }.count == 1, "\(requests)")
        let asked = requests.filter { $0.path.hasSuffix("/r.bin") }.map(\.arrivedAt)
        #expect(asked.count >= 2, "\(requests)")
        if asked.count >= 2 { #expect(asked[1] - asked[0] >= 0.95, "\(asked)") }
    }

    @Test func jobsShareTheConnectionBudget() throws {
        let files = (0..<4).map { cliTestBytes(500_000, seed: 40 + UInt64($0)) }
        var resources: [String: [UInt8]] = [:]
        for (i, f) in files.enumerated() { resources["f\(i).bin"] = f }
        let server = try startCLITestServer(resources)
        defer { server.stop() }
        let dir = try CLITempDir()
        let urls = (0..<4).map { server.url("f\($0).bin") }
        let r = try SeggetCLI.run(["--json", "-j", "3", "-n", "8", "--total-connections", "6", "-d", dir.root] + urls)
        #expect(r.exitCode == 0, "\(r.stdout)")
        let starts = try Self.jsonLines(r.stdout).filter { $0["type"] as? String == "start" }
        #expect(starts.count == 4)
        #expect(starts.allSatisfy { $0["connections"] as? Int == 2 })  // 6 / 3 files
        for (i, f) in files.enumerated() { #expect(fileMatches(dir.root + "/f\(i).bin", f)) }
    }

    /// A batch reads each output directory once for what earlier runs left (`StartingNames`) instead
    /// of looking up every file's journal and part file. What an earlier run left is still seen: a
    /// small file whose interrupted run left a journal resumes from it, and a stale part file beside
    /// another is replaced, as in a download of one file. Without the reading's answers, or with a
    /// wrong one, the probe would bring both whole and leave those side files behind.
    @Test func aBatchOfSmallFilesSeesWhatEarlierRunsLeft() throws {
        let files = Self.numberedFiles("s", count: 10, size: 300_000, seed: 70)
        let server = try startCLITestServer(files)
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        // Interrupted once a third of s4 went out: whole 16 KiB chunks in its journal.
        let run = try Self.interrupted(["-q", "-n", "1", "--chunk-size", "16k", "-o", out + "/s4", server.url("s4", query: "rate=64k")]) {
            server.bodyBytesSent >= 100_000
        }
        #expect(run.wasReady && run.status == 130, "\(run), \(server.bodyBytesSent) bytes sent")
        #expect(FileManager.default.fileExists(atPath: out + "/s4.segget-journal"))
        try Data(cliTestBytes(5_000, seed: 99)).write(to: URL(fileURLWithPath: out + "/s7.segget-part"))

        let list = try Self.writeList(dir, (0..<10).map { server.url("s\($0)") })
        // The default chunk (1 MiB): each probe asks for enough to bring its file whole.
        let r = try SeggetCLI.run(["--json", "-n", "1", "-j", "4", "-i", list, "-d", out])
        #expect(r.exitCode == 0, "\(r.stderr)")
        for i in 0..<10 { #expect(fileMatches(out + "/s\(i)", files["s\(i)"]!), "s\(i)") }
        let left = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.contains(".segget-") }
        #expect(left.isEmpty, "\(left)")
        let finished = try Self.jsonLines(r.stdout).filter { $0["type"] as? String == "finish" }
        #expect(finished.count == 10)
        let resumed = finished.first { ($0["path"] as? String)?.hasSuffix("/s4") == true }?["resumed"] as? Int ?? 0
        #expect(resumed > 0, "\(finished)")
    }

    /// A list killed part-way (`kill -9`), then the same command: the files it finished are done
    /// without a request, the one it was in the middle of resumes from its journal, the rest are
    /// fetched, and the run exits 0 with every file identical.
    @Test func aListKilledPartWayFinishesWhenTheSameCommandRunsAgain() throws {
        let small = (0..<6).map { cliTestBytes(40_000 + 1_000 * $0, seed: 60 + UInt64($0)) }
        let big = cliTestBytes(4_000_000, seed: 70)
        var files: [String: [UInt8]] = ["big.bin": big]
        for (i, bytes) in small.enumerated() { files["s\(i).bin"] = bytes }
        let server = try startCLITestServer(files)
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("out")
        // The small files first, then the big one at a capped rate, then one more small file.
        let urls = (0..<5).map { server.url("s\($0).bin") } + [server.url("big.bin", query: "rate=512k"), server.url("s5.bin")]
        let list = try Self.writeList(dir, urls)
        let args = ["-q", "-n", "2", "--chunk-size", "256k", "-i", list, "-d", out]
        let run = try Self.interrupted(args, signal: SIGKILL) {
            FileManager.default.fileExists(atPath: out + "/big.bin.segget-journal") && server.bodyBytesSent >= 1_500_000
        }
        #expect(run.wasReady, "the list did not get going: \(server.bodyBytesSent) bytes sent")
        #expect(run.status == SIGKILL)
        for i in 0..<5 { #expect(fileMatches(out + "/s\(i).bin", small[i])) }
        let before = server.requests.count
        let again = try SeggetCLI.run(["--json"] + args)
        #expect(again.exitCode == 0, "\(again.stderr)")
        for i in 0..<6 { #expect(fileMatches(out + "/s\(i).bin", small[i])) }
        #expect(fileMatches(out + "/big.bin", big))
        let lines = try Self.jsonLines(again.stdout)
        #expect(lines.filter { $0["type"] as? String == "skip" && $0["reason"] as? String == "completed" }.count >= 5, "\(again.stdout)")
        let resumed = lines.first { $0["type"] as? String == "finish" && ($0["path"] as? String)?.hasSuffix("/big.bin") == true }?["resumed"] as? Int ?? 0
        #expect(resumed > 0, "\(again.stdout)")
        // No request of the rerun asked for a file the first run had finished.
        let asked = Set(server.requests.dropFirst(before).map(\.path))
        for i in 0..<5 { #expect(!asked.contains("/s\(i).bin"), "\(asked)") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: out).sorted() == (["big.bin"] + (0..<6).map { "s\($0).bin" }).sorted())
    }

    /// A list whose server names each file otherwise in every answer (`{n}`: the request's number),
    /// killed part-way: the rerun continues the partial download under the server's new name, from
    /// the directory's one reading, and leaves no side file of the old name.
    @Test func aListKilledPartWayContinuesUnderTheServersNewName() throws {
        let big = cliTestBytes(4_000_000, seed: 71)
        let small = cliTestBytes(50_000, seed: 72)
        let server = try startCLITestServer(["big.bin": big, "small.bin": small])
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("out")
        let cd = "cd=attachment%3B%20filename%3Dbuild-%7Bn%7D.bin"
        let urls = [server.url("small.bin"), server.url("big.bin", mode: .disposition, query: "\(cd)&rate=512k")]
        let list = try Self.writeList(dir, urls)
        let args = ["-q", "-n", "2", "--chunk-size", "256k", "-i", list, "-d", out]
        let run = try Self.interrupted(args, signal: SIGKILL) {
            FileManager.default.fileExists(atPath: out + "/build-1.bin.segget-journal") && server.bodyBytesSent >= 1_500_000
        }
        #expect(run.wasReady, "the list did not get going: \(server.bodyBytesSent) bytes sent")
        let again = try SeggetCLI.run(["--json"] + args)
        #expect(again.exitCode == 0, "\(again.stderr)")
        let lines = try Self.jsonLines(again.stdout)
        let finish = lines.first { $0["type"] as? String == "finish" && ($0["path"] as? String)?.contains("/build-") == true }
        let path = finish?["path"] as? String ?? ""
        #expect(!path.hasSuffix("/build-1.bin"), "\(again.stdout)")
        #expect(fileMatches(path, big))
        #expect(finish?["resumed"] as? Int ?? 0 > 0, "\(again.stdout)")
        let names = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        #expect(names == [String(path.split(separator: "/").last ?? ""), "small.bin"].sorted(), "\(names)")
    }

    /// Ctrl-C while the probe waits for an answer that never comes (a server that accepts and reads
    /// the request and stays silent) ends the run at once with 130, for one file and for a list:
    /// before, the probe went on until its own timeout (20 s here), and a single file exited 3
    /// ("timed out").
    @Test(arguments: [false, true]) func interruptedWhileTheServerIsSilentExitsAtOnce(list: Bool) throws {
        let server = try startCLITestServer(["f.bin": cliTestBytes(100_000, seed: 52), "g.bin": cliTestBytes(100_000, seed: 53)])
        defer { server.stop() }
        let dir = try CLITempDir()
        let urls = [server.url("f.bin", mode: .silent), server.url("g.bin", mode: .silent)]
        let args = list ? ["-q", "-j", "2", "-d", dir.root] + urls : ["-q", "-o", dir.path("f.bin"), urls[0]]
        let started = Date()
        let run = try Self.interrupted(args) { server.requests.count >= (list ? 2 : 1) }
        let seconds = Date().timeIntervalSince(started)
        #expect(run.wasReady, "no request reached the server")
        #expect(run.status == 130)
        #expect(seconds < 10, "\(seconds) s")
        #expect(!FileManager.default.fileExists(atPath: dir.path("f.bin")))
    }

    /// Under `--max-connections-per-host` below what the files' connections would take, a
    /// connection that runs out of work takes a whole free run, not a share for each planned
    /// connection that cannot start for want of a slot: 4 files of 32 MiB at `-j 4 -n 4` under a cap
    /// of 2 made 61-73 requests (each file's one connection took a third of a run at a time), now
    /// 15-20 (4 runs a file, and the probes).
    @Test func aCappedBatchHandsOutWholeRuns() throws {
        let big = cliTestBytes(32 << 20, seed: 54)
        let server = try startCLITestServer(["h.bin": big])
        defer { server.stop() }
        let dir = try CLITempDir()
        let urls = (1...4).map { server.url("h.bin", query: "k=\($0)") }
        let r = try SeggetCLI.run(["-q", "--json", "-j", "4", "-n", "4", "--max-connections-per-host", "2", "-d", dir.root] + urls)
        #expect(r.exitCode == 0, "\(r.stderr)")
        for name in ["h.bin", "h.1.bin", "h.2.bin", "h.3.bin"] { #expect(fileMatches(dir.path(name), big), "\(name)") }
        let summary = r.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.last { $0["type"] as? String == "summary" }
        let requests = summary?["requests"] as? Int ?? -1
        #expect((4...32).contains(requests), "\(requests) requests")
    }

    @Test func interruptedBatchExits130AndResumes() throws {
        let big = cliTestBytes(6_000_000, seed: 51)
        let server = try startCLITestServer(["big.bin": big])
        defer { server.stop() }
        let dir = try CLITempDir()
        let args = ["-q", "-j", "2", "-n", "2", "-d", dir.root, server.url("big.bin", query: "rate=512k"), server.url("big.bin", query: "rate=512k&x=2")]
        // Interrupted once half of the bytes went out (whole chunks to resume from; the rest takes
        // another 3 s at the cap), however long the start takes on a loaded machine: after a fixed
        // delay, a slow start left no whole chunk and the rerun nothing to resume.
        let run = try Self.interrupted(args) {
            FileManager.default.fileExists(atPath: dir.root + "/big.bin.segget-journal") && server.bodyBytesSent >= 6_000_000
        }
        #expect(run.wasReady, "the batch did not get going: \(server.bodyBytesSent) bytes sent")
        #expect(run.status == 130)
        #expect(FileManager.default.fileExists(atPath: dir.root + "/big.bin.segget-journal"))
        let again = try SeggetCLI.run(["-j", "2", "-n", "6", "-d", dir.root] + Array(args.suffix(2)))
        #expect(again.exitCode == 0, "\(again.stderr)")
        #expect(again.stderr.contains("resum"))
        #expect(fileMatches(dir.root + "/big.bin", big))
        #expect(fileMatches(dir.root + "/big.1.bin", big))
    }
}

/// SHA-256 through the `segget verify`-independent coreutils tool, so the test does not trust segget.
func sha256Hex(_ bytes: [UInt8]) -> String {
    let dir = try! CLITempDir()
    let path = dir.path("x")
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    p.arguments = [path]
    let pipe = Pipe()
    p.standardOutput = pipe
    try! p.run()
    let out = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: out, as: UTF8.self).split(separator: " ").first.map(String.init) ?? ""
}

/// The library's async API: progress as an AsyncSequence, task cancellation → resumable stop.
@Suite struct AsyncLibraryTests {
    /// A cancellation that does not stop the download leaves it waiting on silent connections: the
    /// time limit fails the test then.
    @Test(.timeLimit(.minutes(1))) func cancellingTheTaskStopsAndARerunResumes() async throws {
        // The first run's answers stop after 160 KiB each and hold their connections (`stall`), and
        // neither silence (for two minutes) nor a slow connection is cut and asked again: the
        // download cannot end before the task is cancelled, however long other suites' blocking
        // tests hold both threads of a 2-core runner's cooperative pool (with answers that merely
        // went slowly, 24 s of that once let it finish first). The rerun asks the same file without
        // the stall, over 16 connections.
        let body = cliTestBytes(3_000_000, seed: 61)
        let server = try startCLITestServer(["lib.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        var options = DownloadOptions()
        options.connections = 2
        options.chunkSize = 64 * 1024
        options.outputPath = dir.path("lib.bin")
        options.transfer.stallTimeout = 120
        options.redialSlowConnections = false
        let url = server.url("lib.bin", mode: .stall, query: "after=163840")
        let handle = Download(url: url, options: options).start()
        // On a busy 2-core runner the waiting task may be scheduled late; cancel it only once it runs,
        // so the test checks cancellation rather than the scheduler.
        let (started, startedSignal) = AsyncStream<Void>.makeStream()
        let waiter = Task { () async throws(SeggetError) -> DownloadResult in
            startedSignal.yield()
            return try await handle.result()
        }
        for await _ in started { break }
        var sawProgress = false
        for await p in handle.progress where p.completedBytes > 128 * 1024 {
            sawProgress = true
            waiter.cancel()
            break
        }
        #expect(sawProgress)
        do {
            _ = try await waiter.value
            Issue.record("the download finished although its task was cancelled")
        } catch let error as SeggetError {
            #expect(error.kind == .interrupted)
        }
        #expect(handle.isFinished)
        #expect(FileManager.default.fileExists(atPath: dir.path("lib.bin.segget-journal")))
        #expect(!FileManager.default.fileExists(atPath: dir.path("lib.bin")))

        options.connections = 16
        options.transfer.stallTimeout = 20
        options.redialSlowConnections = true
        // The same URL path (a partial download continues only where something shows it is the
        // same file), with a stall point past the file's end: every answer is whole.
        let result = try await Download(url: server.url("lib.bin", mode: .stall, query: "after=99999999"), options: options).run()
        #expect(result.resumedBytes > 0)
        #expect(result.bytes == Int64(body.count))
        #expect(fileMatches(dir.path("lib.bin"), body))
    }
}

import Foundation
import Segget
import SeggetTestServer
import Testing

// Metalink on the command line, as a user meets it: `segget FILE.meta4`, `--metalink URL`, a `.meta4`
// line in `-i`, several files as a batch, hostile documents refused with exit 2 before anything is
// fetched.

private func started(_ files: [String: [UInt8]]) throws -> TestServer {
    let s = try TestServer()
    for (name, bytes) in files { s.addResource(name: name, bytes: bytes, etag: "\"\(name)\"") }
    try s.start()
    return s
}

@Suite(.serialized) struct MetalinkCLITests {
    /// Two servers, one serving a bad MiB: identical file, exit 0, the `finish` line names the bad
    /// server and the piece fetched again.
    @Test func aMeta4FileWithACorruptingMirror() throws {
        let body = cliTestBytes(12 << 20, seed: 40)
        let good = try started(["f.bin": body])
        let bad = try started(["f.bin": corrupted(body, at: 0, count: body.count)])
        defer { good.stop(); bad.stop() }
        let dir = try CLITempDir()
        let doc = metalinkDocument(
            name: "f.bin", size: body.count, urls: [bad.url("f.bin", query: "rate=4m"), good.url("f.bin", query: "rate=4m")],
            pieces: pieceHashes(body, length: 1 << 20), hash: sha256(body))
        try doc.write(toFile: dir.path("f.meta4"), atomically: true, encoding: .utf8)
        let run = try SeggetCLI.run(["--json", "-d", dir.path("out"), dir.path("f.meta4")])
        #expect(run.exitCode == 0, "\(run.stdout)\(run.stderr)")
        #expect(fileBytes(dir.path("out/f.bin")) == body)
        let finish = try #require(run.stdout.split(separator: "\n").first { $0.contains("\"type\":\"finish\"") })
        #expect(finish.contains("\"badSources\":[\"\(bad.url("f.bin", query: "rate=4m"))\"]"), "\(finish)")
        #expect(finish.contains("\"count\":12,\"verified\":12"), "\(finish)")
        #expect(finish.contains("\"algorithm\":\"SHA-256\",\"hex\":\"\(hexString(sha256(body)))\""), "\(finish)")
    }

    /// Two files of one base name in different directories of the document's names: each saved under
    /// its directories in `-d`, made as needed (before, both were `out/x.bin` and the document was
    /// refused as naming one file twice).
    @Test func aMeta4NameWithDirectoriesIsSavedInThem() throws {
        let one = cliTestBytes(300_000, seed: 46)
        let two = cliTestBytes(200_000, seed: 47)
        let server = try started(["one.bin": one, "two.bin": two])
        defer { server.stop() }
        let dir = try CLITempDir()
        let doc = metalinkDocument(name: "a/x.bin", size: one.count, urls: [server.url("one.bin")], pieces: nil, hash: sha256(one))
            .replacingOccurrences(of: "</metalink>\n", with: "")
            + "<file name=\"b/c/x.bin\"><size>\(two.count)</size><url>\(server.url("two.bin"))</url></file>\n</metalink>\n"
        try doc.write(toFile: dir.path("f.meta4"), atomically: true, encoding: .utf8)
        let run = try SeggetCLI.run(["-d", dir.path("out"), dir.path("f.meta4")])
        #expect(run.exitCode == 0, "\(run.stderr)")
        #expect(fileBytes(dir.path("out/a/x.bin")) == one)
        #expect(fileBytes(dir.path("out/b/c/x.bin")) == two)
        #expect(!FileManager.default.fileExists(atPath: dir.path("out/x.bin")))
    }

    /// One file's name or digest given for a Metalink of two files (`--checksum`, an `-i` line's
    /// `checksum=` or `out=`): refused before any request, exit 2. Before, out= was dropped without a
    /// word, and a digest was held against both files: both fetched, the other discarded, exit 6.
    @Test func oneFilesNameOrDigestForAMetalinkOfTwoIsRefused() throws {
        let one = cliTestBytes(300_000, seed: 48)
        let two = cliTestBytes(200_000, seed: 49)
        let server = try started(["one.bin": one, "two.bin": two])
        defer { server.stop() }
        let dir = try CLITempDir()
        let doc = metalinkDocument(name: "x.bin", size: one.count, urls: [server.url("one.bin")], pieces: nil, hash: sha256(one))
            .replacingOccurrences(of: "</metalink>\n", with: "")
            + "<file name=\"y.bin\"><size>\(two.count)</size><url>\(server.url("two.bin"))</url></file>\n</metalink>\n"
        try doc.write(toFile: dir.path("f.meta4"), atomically: true, encoding: .utf8)
        let digest = "sha256=" + hexString(sha256(one))
        try "\(dir.path("f.meta4"))\n  out=z.bin\n".write(toFile: dir.path("out.txt"), atomically: true, encoding: .utf8)
        try "\(dir.path("f.meta4"))\n  checksum=\(digest)\n".write(toFile: dir.path("sum.txt"), atomically: true, encoding: .utf8)
        let runs = [
            (["--checksum", digest, dir.path("f.meta4")], "--checksum or checksum="),
            (["-i", dir.path("sum.txt")], "--checksum or checksum="),
            (["-i", dir.path("out.txt")], "but out= names one"),
        ]
        for (arguments, words) in runs {
            let run = try SeggetCLI.run(["-d", dir.path("out")] + arguments)
            #expect(run.exitCode == 2 && run.stderr.contains("describes 2 files") && run.stderr.contains(words), "\(arguments): \(run.stderr)")
        }
        #expect(server.requests.isEmpty, "\(server.requests)")
        #expect(!FileManager.default.fileExists(atPath: dir.path("out")))
    }

    /// A Metalink's first URLs may fail: one nothing listens at, one that answers 404, one that
    /// serves another length. Each is dropped with a notice and the next tried at once (a URL's
    /// probe is not retried while others are left); the file comes from the last, identical. Before,
    /// the first URL decided: exit 3 after its retries (about 30 s), exit 4, or exit 7 with the
    /// good URLs dropped as mirrors of another length. The file takes the Metalink's name (before,
    /// only with `--json` or `-i`: the last URL's name otherwise).
    @Test func aMeta4WhoseFirstURLsFailIsDownloadedFromTheNext() throws {
        let body = cliTestBytes(3 << 20, seed: 43)
        let good = try started(["f.bin": body])
        let other = try started(["f.bin": Array(body.prefix(1 << 20))])
        defer { good.stop(); other.stop() }
        let (fd, port) = try loopbackListener()
        close(fd)
        let urls = ["http://127.0.0.1:\(port)/f.bin", good.url("missing.bin"), other.url("f.bin"), good.url("f.bin")]
        let dir = try CLITempDir()
        let doc = metalinkDocument(name: "meta.bin", size: body.count, urls: urls, pieces: pieceHashes(body, length: 1 << 20), hash: sha256(body))
        try doc.write(toFile: dir.path("f.meta4"), atomically: true, encoding: .utf8)
        let began = Date()
        let run = try SeggetCLI.run(["-d", dir.path("out"), dir.path("f.meta4")])
        #expect(run.exitCode == 0, "\(run.stderr)")
        #expect(fileBytes(dir.path("out/meta.bin")) == body)
        #expect(!FileManager.default.fileExists(atPath: dir.path("out/f.bin")))
        for u in urls.dropLast() { #expect(run.stderr.contains("the Metalink's URL \(u) failed"), "\(run.stderr)") }
        #expect(Date().timeIntervalSince(began) < 15, "a failed URL's probe was retried: \(run.stderr)")
        // The last URL alone failing still fails, with its own error.
        let dead = metalinkDocument(name: "g.bin", size: body.count, urls: [good.url("missing.bin")], pieces: nil)
        try dead.write(toFile: dir.path("g.meta4"), atomically: true, encoding: .utf8)
        let none = try SeggetCLI.run(["-d", dir.path("out"), dir.path("g.meta4")])
        #expect(none.exitCode == 4, "\(none.stderr)")
    }

    /// A Metalink's mirror that never answers holds the download up for `mirrorPatience` (2 s here),
    /// not for its probe's timeout (20 s before): the file comes from the others, identical, and a
    /// notice names the mirror not waited for.
    @Test func aMeta4WithADeadMirrorIsNotHeldUpByIt() throws {
        let body = cliTestBytes(3 << 20, seed: 45)
        let good = try started(["f.bin": body])
        defer { good.stop() }
        let silent = good.url("f.bin", query: "firstbyte=30")
        let dir = try CLITempDir()
        let doc = metalinkDocument(name: "f.bin", size: body.count, urls: [good.url("f.bin"), silent], pieces: pieceHashes(body, length: 1 << 20), hash: sha256(body))
        try doc.write(toFile: dir.path("f.meta4"), atomically: true, encoding: .utf8)
        let began = Date()
        let run = try SeggetCLI.run(["-d", dir.path("out"), dir.path("f.meta4")])
        let seconds = Date().timeIntervalSince(began)
        #expect(run.exitCode == 0, "\(run.stderr)")
        #expect(fileBytes(dir.path("out/f.bin")) == body)
        #expect(seconds < 10, "the download took \(seconds) s: it waited for the dead mirror's probe")
        #expect(run.stderr.contains("not waiting for mirror \(silent): it did not answer within"), "\(run.stderr)")
    }

    /// `--metalink URL` fetches the document; its two files are one batch.
    @Test func aFetchedMetalinkOfTwoFilesIsABatch() throws {
        let a = cliTestBytes(3 << 20, seed: 41)
        let b = cliTestBytes(2 << 20 + 5, seed: 42)
        let s = try started(["a.bin": a, "b.bin": b])
        defer { s.stop() }
        var doc = metalinkDocument(name: "a.bin", size: a.count, urls: [s.url("a.bin")], pieces: pieceHashes(a, length: 256 << 10))
        let second = metalinkDocument(name: "b.bin", size: b.count, urls: [s.url("b.bin")], pieces: nil, hash: sha256(b))
        // One document of both files.
        doc = doc.replacingOccurrences(of: "</metalink>\n", with: "")
            + second.components(separatedBy: "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n")[1]
        s.addFixedAnswer(path: "/files.meta4", status: 200, headers: [("Content-Type", "application/metalink4+xml")], body: Array(doc.utf8))
        let dir = try CLITempDir()
        let run = try SeggetCLI.run(["-q", "-d", dir.path("out"), "--metalink", s.baseURL + "/files.meta4"])
        #expect(run.exitCode == 0, "\(run.stderr)")
        #expect(fileBytes(dir.path("out/a.bin")) == a)
        #expect(fileBytes(dir.path("out/b.bin")) == b)
        // A URL that answers something else is refused.
        let html = try SeggetCLI.run(["-d", dir.path("out2"), "--metalink", s.url("a.bin")])
        #expect(html.exitCode == 2 && html.stderr.contains("not a Metalink"), "\(html.stderr)")
    }

    /// A `-i` line may name a `.meta4` file; its option lines apply to the file it brings.
    @Test func aMeta4LineInAnInputFile() throws {
        let body = cliTestBytes(1 << 20, seed: 43)
        let s = try started(["m.bin": body, "plain.bin": body])
        defer { s.stop() }
        let dir = try CLITempDir()
        try metalinkDocument(name: "m.bin", size: body.count, urls: [s.url("m.bin")], pieces: pieceHashes(body, length: 64 << 10))
            .write(toFile: dir.path("m.meta4"), atomically: true, encoding: .utf8)
        try "\(s.url("plain.bin"))\n\(dir.path("m.meta4"))\n  dir=\(dir.path("sub"))\n".write(
            toFile: dir.path("list.txt"), atomically: true, encoding: .utf8)
        let run = try SeggetCLI.run(["-q", "-d", dir.path("out"), "-i", dir.path("list.txt")])
        #expect(run.exitCode == 0, "\(run.stderr)")
        #expect(fileBytes(dir.path("out/plain.bin")) == body)
        #expect(fileBytes(dir.path("sub/m.bin")) == body)
    }

    /// Hostile or inconsistent documents: exit 2 with a sentence, and no request reaches the server.
    @Test func hostileDocumentsAreRefusedBeforeAnyRequest() throws {
        let s = try started(["f.bin": cliTestBytes(1 << 20, seed: 44)])
        defer { s.stop() }
        let u = s.url("f.bin")
        let ns = "xmlns=\"urn:ietf:params:xml:ns:metalink\""
        let laughs = (1...9).map { "<!ENTITY l\($0) \"" + String(repeating: "&l\($0 - 1);", count: 10) + "\">" }.joined()
        let cases: [(String, String)] = [
            ("<?xml version=\"1.0\"?><!DOCTYPE m [<!ENTITY l0 \"lol\">\(laughs)]><metalink \(ns)><file name=\"f\"><url>\(u)&l9;</url></file></metalink>", "document type declaration"),
            ("<?xml version=\"1.0\"?><!DOCTYPE m [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><metalink \(ns)><file name=\"f\"><url>\(u)</url><description>&x;</description></file></metalink>", "document type declaration"),
            ("<metalink \(ns)>" + String(repeating: "<a>", count: 500) + String(repeating: "</a>", count: 500) + "<file name=\"f\"><url>\(u)</url></file></metalink>", "nests elements"),
            ("<metalink \(ns)><file name=\"f\"><size>99999999999999999999</size><url>\(u)</url></file></metalink>", "not a number of bytes"),
            ("<metalink \(ns)><file name=\"f\"><size>5000000</size><url>\(u)</url><pieces length=\"1048576\" type=\"sha-256\"><hash>\(String(repeating: "0", count: 64))</hash></pieces></file></metalink>", "needs 5"),
            ("<metalink \(ns)><file name=\"f\"><url>f.bin</url><url>ftp://127.0.0.1/f.bin</url></file></metalink>", "no http:// or https:// URL"),
            ("<metalink \(ns)><file name=\"../f\"><url>\(u)</url></file></metalink>", "not a safe relative path"),
        ]
        let dir = try CLITempDir()
        for (i, (text, says)) in cases.enumerated() {
            try text.write(toFile: dir.path("h\(i).meta4"), atomically: true, encoding: .utf8)
            let run = try SeggetCLI.run(["-d", dir.path("out"), dir.path("h\(i).meta4")])
            #expect(run.exitCode == 2, "case \(i): \(run.stderr)")
            #expect(run.stderr.contains(says) && run.stderr.contains("Nothing was downloaded"), "case \(i): \(run.stderr)")
        }
        #expect(s.requests.isEmpty, "requests reached the server: \(s.requests)")
        #expect(!TestFiles.exists(dir.path("out/f")))
    }
}

extension MetalinkCLITests {
    /// `segget verify FILE --metalink M`: names the bad pieces (exit 6); with `--repair`, fetches only
    /// those (the server sends their bytes and a probe's byte), and the file is identical after.
    @Test func verifyNamesBadPiecesAndRepairFetchesOnlyThem() throws {
        let body = cliTestBytes(6 << 20, seed: 45)
        let s = try started(["f.bin": body])
        defer { s.stop() }
        let dir = try CLITempDir()
        try metalinkDocument(name: "f.bin", size: body.count, urls: [s.url("f.bin")], pieces: pieceHashes(body, length: 512 << 10), hash: sha256(body))
            .write(toFile: dir.path("f.meta4"), atomically: true, encoding: .utf8)
        var damaged = corrupted(body, at: (1 << 20) + 5, count: 3)
        damaged = corrupted(damaged, at: 5 << 20, count: 600_000)
        try TestFiles.write(dir.path("f.bin"), damaged)
        let check = try SeggetCLI.run(["verify", dir.path("f.bin"), "--metalink", dir.path("f.meta4")])
        #expect(check.exitCode == 6, "\(check.stderr)")
        #expect(check.stderr.contains("3 of 12 SHA-256 pieces do not match: 2 (bytes 1048576-1572863), 10 (bytes 5242880-5767167), 11"), "\(check.stderr)")
        #expect(s.requests.isEmpty)
        let repair = try SeggetCLI.run(["verify", dir.path("f.bin"), "--metalink", dir.path("f.meta4"), "--repair", "-n", "2"])
        #expect(repair.exitCode == 0, "\(repair.stderr)")
        #expect(repair.stderr.contains("repaired 3 of 12 pieces") && repair.stderr.contains("matches its SHA-256 now"), "\(repair.stderr)")
        #expect(fileBytes(dir.path("f.bin")) == body)
        #expect(s.bodyBytesSent == 3 * (512 << 10) + 1, "sent \(s.bodyBytesSent)")
        // The server's log: besides the probe's one byte, GETs of exactly the three bad pieces.
        let ranges = s.requests.filter { $0.bodyBytesSent > 1 }.compactMap { $0.headers["range"] }
        let served = ranges.compactMap { r -> Range<Int>? in
            let ends = r.dropFirst("bytes=".count).split(separator: "-").compactMap { Int($0) }
            return ends.count == 2 ? ends[0]..<(ends[1] + 1) : nil
        }.sorted { $0.lowerBound < $1.lowerBound }
        let piece = 512 << 10
        let covered = served.flatMap { Array(stride(from: $0.lowerBound, to: $0.upperBound, by: piece)).map { $0 / piece } }
        #expect(covered == [2, 10, 11] && served.allSatisfy { $0.count % piece == 0 }, "\(s.requests.map { "\($0.headers["range"] ?? "-") \($0.bodyBytesSent)" })")
        let again = try SeggetCLI.run(["verify", "-q", dir.path("f.bin"), "--metalink", dir.path("f.meta4")])
        #expect(again.exitCode == 0 && again.stderr.isEmpty, "\(again.stderr)")
    }
}

extension MetalinkCLITests {
    /// A file its Metalink downloaded, damaged in place, is refused by the same command (exit 5: a
    /// file changed since); once `verify --repair` has fetched the bad piece, the same command finds
    /// it done (exit 0, no body byte sent) and leaves it as it is.
    @Test func aRepairedFileIsDoneWhenItsDownloadRunsAgain() throws {
        let body = cliTestBytes(3 << 20, seed: 46)
        let s = try started(["f.bin": body])
        defer { s.stop() }
        let dir = try CLITempDir()
        try metalinkDocument(name: "f.bin", size: body.count, urls: [s.url("f.bin")], pieces: pieceHashes(body, length: 512 << 10), hash: sha256(body))
            .write(toFile: dir.path("f.meta4"), atomically: true, encoding: .utf8)
        let download = ["-d", dir.path("out"), dir.path("f.meta4")]
        let first = try SeggetCLI.run(download)
        #expect(first.exitCode == 0, "\(first.stderr)")
        let path = dir.path("out/f.bin")
        let again = try SeggetCLI.run(download)
        #expect(again.exitCode == 0 && again.stderr.contains("completed by an earlier run"), "\(again.stderr)")

        // Three bytes of the second piece damaged in place, after the file's time has moved on.
        usleep(20_000)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seek(toOffset: 700_000)
        try handle.write(contentsOf: Data([0xff, 0xfe, 0xfd]))
        try handle.close()
        let beforeRefusal = s.bodyBytesSent
        let damaged = try SeggetCLI.run(download)
        #expect(damaged.exitCode == 5 && damaged.stderr.contains("already exists"), "\(damaged.stderr)")
        #expect(s.bodyBytesSent - beforeRefusal <= 1, "a refused file's probe sent \(s.bodyBytesSent - beforeRefusal) body bytes")

        let repair = try SeggetCLI.run(["verify", path, "--metalink", dir.path("f.meta4"), "--repair"])
        #expect(repair.exitCode == 0 && repair.stderr.contains("repaired 1 of 6 pieces"), "\(repair.stderr)")
        #expect(fileBytes(path) == body)
        let sent = s.bodyBytesSent
        let repaired = try SeggetCLI.run(download)
        #expect(repaired.exitCode == 0, "\(repaired.stderr)")
        #expect(repaired.stderr.contains("completed by an earlier run"), "\(repaired.stderr)")
        #expect(s.bodyBytesSent - sent <= 1, "sent \(s.bodyBytesSent - sent) more body bytes")
        #expect(fileBytes(path) == body)
    }
}

extension MetalinkCLITests {
    /// A Metalink whose whole-file digest contradicts its pieces: `verify` with every piece matching
    /// still checks the digest (exit 6); it said "all pieces match", exit 0, after a `--repair` of
    /// the same file had said 6.
    @Test func verifyChecksTheWholeDigestWhenEveryPieceMatches() throws {
        let body = cliTestBytes(2 << 20, seed: 47)
        let dir = try CLITempDir()
        var wrong = sha256(body)
        wrong[31] ^= 1
        try metalinkDocument(name: "f.bin", size: body.count, urls: ["http://127.0.0.1:9/f.bin"], pieces: pieceHashes(body, length: 512 << 10), hash: wrong)
            .write(toFile: dir.path("bad.meta4"), atomically: true, encoding: .utf8)
        try metalinkDocument(name: "f.bin", size: body.count, urls: ["http://127.0.0.1:9/f.bin"], pieces: pieceHashes(body, length: 512 << 10), hash: sha256(body))
            .write(toFile: dir.path("good.meta4"), atomically: true, encoding: .utf8)
        try TestFiles.write(dir.path("f.bin"), body)
        for extra in [[], ["--repair"]] {
            let check = try SeggetCLI.run(["verify", dir.path("f.bin"), "--metalink", dir.path("bad.meta4")] + extra)
            #expect(check.exitCode == 6 && check.stderr.contains("SHA-256 mismatch"), "\(extra) \(check.stderr)")
        }
        let good = try SeggetCLI.run(["verify", dir.path("f.bin"), "--metalink", dir.path("good.meta4")])
        #expect(good.exitCode == 0 && good.stderr.contains("all 4 SHA-256 pieces match, and so does its SHA-256."), "\(good.stderr)")
        #expect(fileBytes(dir.path("f.bin")) == body)
    }
}

extension MetalinkCLITests {
    /// A repair whose only server sends the bad piece again: exit 6, saying the file keeps what was
    /// repaired (it spoke of a download and its journal, which a repair has not).
    @Test func aRepairWithoutGoodBytesSaysWhatTheFileKeeps() throws {
        let body = cliTestBytes(2 << 20, seed: 49)
        let bad = corrupted(body, at: (1 << 20) + 10, count: 16)
        let s = try started(["f.bin": bad])
        defer { s.stop() }
        let dir = try CLITempDir()
        try metalinkDocument(name: "f.bin", size: body.count, urls: [s.url("f.bin")], pieces: pieceHashes(body, length: 512 << 10), hash: sha256(body))
            .write(toFile: dir.path("f.meta4"), atomically: true, encoding: .utf8)
        try TestFiles.write(dir.path("f.bin"), bad)
        let repair = try SeggetCLI.run(["verify", dir.path("f.bin"), "--metalink", dir.path("f.meta4"), "--repair"])
        #expect(repair.exitCode == 6, "\(repair.stderr)")
        #expect(repair.stderr.contains("the repair stops (the file keeps the pieces that were repaired)") && !repair.stderr.contains("journal"), "\(repair.stderr)")
    }
}

func sha256(_ bytes: [UInt8]) -> [UInt8] {
    let d = Digester(.sha256)
    d.update(bytes)
    return d.finalize()
}

/// The SHA-256 of `bytes` in lower-case hex, as `--checksum sha-256=` takes it.
func sha256Text(_ bytes: [UInt8]) -> String {
    sha256(bytes).map { String(format: "%02x", $0) }.joined()
}

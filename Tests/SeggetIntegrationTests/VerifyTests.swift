import Foundation
import Segget
import SeggetJournal
import SeggetTestServer
import SeggetVerify
import Testing

#if canImport(Glibc)
import Glibc
#endif

// End-to-end tests of download verification: the `segget` binary run as a user would (exit code,
// stderr, what is left on disk) against an in-process TestServer, plus library-level `Download` runs
// where the test needs to stop a download half-way.

// MARK: - Helpers

private enum VT {
    /// Deterministic, non-repeating bytes (xorshift).
    static func payload(_ count: Int, seed: UInt64 = 0x2545_F491_4F6C_DD1D) -> [UInt8] {
        var state = seed
        var out = [UInt8](repeating: 0, count: count)
        for i in 0..<count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            out[i] = UInt8(truncatingIfNeeded: state >> 24)
        }
        return out
    }

    /// The `segget` binary: `SEGGET_BIN`, else the one built beside this test bundle, else `.build/debug/segget`.
    static let binary: String = {
        if let env = ProcessInfo.processInfo.environment["SEGGET_BIN"], !env.isEmpty { return env }
        let me = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        var dir = me.deletingLastPathComponent()
        // .../debug/seggetPackageTests.xctest (a file on Linux) or a bundle directory on other systems.
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("segget").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return ".build/debug/segget"
    }()

    struct Run: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
    }

    /// Runs the CLI with `arguments` in `directory`; kills it after `timeout` seconds.
    static func segget(_ arguments: [String], in directory: String, timeout: Double = 60) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        // Output goes to files, not pipes, so a chatty child can never block on a full pipe.
        let outPath = directory + "/.stdout-\(UUID().uuidString)"
        let errPath = directory + "/.stderr-\(UUID().uuidString)"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning {
            if Date() > deadline {
                process.terminate()
                process.waitUntilExit()
                Issue.record("segget \(arguments) did not finish within \(timeout) s")
                break
            }
            usleep(10_000)
        }
        process.waitUntilExit()
        try? out.close()
        try? err.close()
        let stdout = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        return Run(status: process.terminationStatus, stdout: stdout, stderr: stderr)
    }

    /// A digest computed by coreutils (`sha256sum`, `md5sum`), independent of the code under test.
    static func coreutilsDigest(_ tool: String, of path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool, path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        return String(text.prefix { $0 != " " })
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    static func contents(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) }
    }

    static func flipBit(in path: String, at offset: Int64) throws {
        let fd = open(path, O_RDWR)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var byte: UInt8 = 0
        guard pread(fd, &byte, 1, off_t(offset)) == 1 else { throw POSIXError(.EIO) }
        byte ^= 0x01
        guard pwrite(fd, &byte, 1, off_t(offset)) == 1 else { throw POSIXError(.EIO) }
    }
}

/// A fresh temporary directory, removed with its contents at deinit.
private final class Scratch {
    let path: String
    init() {
        var template = Array((NSTemporaryDirectory() + "/segget-verify-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    func file(_ name: String) -> String { path + "/" + name }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A test server with one resource `NAME` and its coreutils digests.
private final class Fixture {
    let server: TestServer
    let scratch = Scratch()
    let bytes: [UInt8]
    let name: String
    let sha256: String
    let md5: String

    init(name: String = "data.bin", size: Int = 3 << 20 | 12_345) throws {
        self.name = name
        bytes = VT.payload(size)
        server = try TestServer()
        server.addResource(name: name, bytes: bytes)
        try server.start()
        let original = scratch.file(".original")
        _ = FileManager.default.createFile(atPath: original, contents: Data(bytes))
        sha256 = try VT.coreutilsDigest("sha256sum", of: original)
        md5 = try VT.coreutilsDigest("md5sum", of: original)
        try FileManager.default.removeItem(atPath: original)
    }

    deinit { server.stop() }

    func url(_ mode: String? = nil, query: String = "") -> String {
        server.baseURL + "/" + (mode.map { $0 + "/" } ?? "") + name + (query.isEmpty ? "" : "?" + query)
    }

    var wrongSHA256: String {
        // The right digest with its last hex digit changed: well-formed and surely wrong.
        let last = sha256.last!
        return String(sha256.dropLast()) + (last == "0" ? "1" : "0")
    }

    func out(_ name: String = "out.bin") -> String { scratch.file(name) }

    /// Asserts that nothing of a download to `path` is left behind: no file, no part, no journal.
    func expectNothingLeft(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!VT.exists(path), "final file must not exist", sourceLocation: sourceLocation)
        #expect(!VT.exists(path + ".segget-part"), "the part file must be discarded", sourceLocation: sourceLocation)
        #expect(!VT.exists(path + ".segget-journal"), "the journal must be discarded", sourceLocation: sourceLocation)
    }

    func expectIdentical(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        // Compared to a Bool first, so that a failure does not print megabytes of array literals.
        let same = VT.contents(path) == bytes
        #expect(same, "\(path) must equal the served bytes", sourceLocation: sourceLocation)
        #expect(!VT.exists(path + ".segget-part"), sourceLocation: sourceLocation)
        #expect(!VT.exists(path + ".segget-journal"), sourceLocation: sourceLocation)
    }
}

// MARK: - Tests

@Suite("Verification, end to end", .serialized)
struct VerifyTests {
    // MARK: --checksum

    @Test("--checksum sha256=RIGHT: exit 0, file identical")
    func rightSHA256() throws {
        let f = try Fixture()
        let out = f.out()
        let r = try VT.segget(["-q", "-n", "4", "-o", out, "--checksum", "sha256=\(f.sha256)", f.url()], in: f.scratch.path)
        #expect(r.status == 0, "\(r)")
        f.expectIdentical(out)
    }

    @Test("--checksum md5=RIGHT and sha-256=UPPERCASE: exit 0")
    func rightMD5AndUppercase() throws {
        let f = try Fixture()
        let a = f.out("a.bin")
        let r1 = try VT.segget(["-q", "-o", a, "--checksum", "md5=\(f.md5)", f.url()], in: f.scratch.path)
        #expect(r1.status == 0, "\(r1)")
        f.expectIdentical(a)

        let b = f.out("b.bin")
        let r2 = try VT.segget(["-q", "-o", b, "--checksum", "sha-256=\(f.sha256.uppercased())", f.url()], in: f.scratch.path)
        #expect(r2.status == 0, "\(r2)")
        f.expectIdentical(b)

        // Both at once, in the upper-case algorithm spelling too.
        let c = f.out("c.bin")
        let r3 = try VT.segget(
            ["-q", "-o", c, "--checksum", "SHA256=\(f.sha256)", "--checksum", "MD5=\(f.md5.uppercased())", f.url()],
            in: f.scratch.path)
        #expect(r3.status == 0, "\(r3)")
        f.expectIdentical(c)
    }

    @Test("--checksum-file in sha256sum format naming the output file")
    func checksumFile() throws {
        let f = try Fixture()
        let sums = f.scratch.file("SHA256SUMS")
        let text = """
            \(String(repeating: "0", count: 64))  other.iso
            \(f.sha256)  out.bin
            \(String(repeating: "f", count: 64)) *third.bin

            """
        try text.write(toFile: sums, atomically: true, encoding: .utf8)
        let out = f.out("out.bin")
        let r = try VT.segget(["-q", "-o", out, "--checksum-file", sums, f.url()], in: f.scratch.path)
        #expect(r.status == 0, "\(r)")
        f.expectIdentical(out)

        // The same file, but the entry for the output now is wrong: exit 6, nothing left.
        let bad = f.scratch.file("BADSUMS")
        try "\(f.wrongSHA256)  out2.bin\n\(f.sha256)  out.bin\n".write(toFile: bad, atomically: true, encoding: .utf8)
        let out2 = f.out("out2.bin")
        let r2 = try VT.segget(["-q", "-o", out2, "--checksum-file", bad, f.url()], in: f.scratch.path)
        #expect(r2.status == 6, "\(r2)")
        f.expectNothingLeft(out2)

        // --checksum and the file disagree: no file can match both, so it is refused before a byte
        // is fetched (exit 2; it used to fetch the whole file and fail the check, exit 6).
        let out3 = f.out("out3.bin")
        let sums3 = f.scratch.file("SUMS3")
        try "\(f.sha256)  out3.bin\n".write(toFile: sums3, atomically: true, encoding: .utf8)
        let r4 = try VT.segget(["-q", "-o", out3, "--checksum", "sha256=\(f.wrongSHA256)", "--checksum-file", sums3, f.url()], in: f.scratch.path)
        #expect(r4.status == 2, "\(r4)")
        #expect(r4.stderr.contains("--checksum gives"), "\(r4)")
        f.expectNothingLeft(out3)

        // md5sum format, with the output name taken from the URL (no -o).
        let md5s = f.scratch.file("MD5SUMS")
        try "\(f.md5)  \(f.name)\n".write(toFile: md5s, atomically: true, encoding: .utf8)
        let sub = f.scratch.file("sub")
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: false)
        let r3 = try VT.segget(["-q", "-d", sub, "--checksum-file", md5s, f.url()], in: f.scratch.path)
        #expect(r3.status == 0, "\(r3)")
        f.expectIdentical(sub + "/" + f.name)
    }

    @Test("--checksum-file is matched against the name segget saves under (Content-Disposition)")
    func checksumFileFollowsContentDisposition() throws {
        let f = try Fixture(size: 300_000)
        let sums = f.scratch.file("SHA256SUMS")
        try "\(f.sha256)  nice.iso\n".write(toFile: sums, atomically: true, encoding: .utf8)
        let dir = f.scratch.file("d")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        let url = f.url("disposition", query: "cd=attachment%3B%20filename%3Dnice.iso")
        // Without a checksum file the download is saved as nice.iso ...
        let plain = try VT.segget(["-q", "-d", dir, url], in: f.scratch.path)
        #expect(plain.status == 0, "\(plain)")
        f.expectIdentical(dir + "/nice.iso")
        try FileManager.default.removeItem(atPath: dir + "/nice.iso")
        // ... so a checksum file listing nice.iso verifies it.
        let r = try VT.segget(["-q", "-d", dir, "--checksum-file", sums, url], in: f.scratch.path)
        #expect(r.status == 0, "\(r)")
        f.expectIdentical(dir + "/nice.iso")
    }

    @Test("wrong --checksum: exit 6, nothing left, message names algorithm, expected and actual; next run succeeds")
    func wrongChecksumDiscardsThenFreshRunSucceeds() throws {
        let f = try Fixture()
        let out = f.out()
        let r = try VT.segget(["-q", "-o", out, "--checksum", "sha256=\(f.wrongSHA256)", f.url()], in: f.scratch.path)
        #expect(r.status == 6, "\(r)")
        f.expectNothingLeft(out)
        #expect(r.stderr.contains("SHA-256"), "\(r.stderr)")
        #expect(r.stderr.contains(f.wrongSHA256), "stderr must name the expected digest: \(r.stderr)")
        #expect(r.stderr.contains(f.sha256), "stderr must name the actual digest: \(r.stderr)")
        #expect(r.stderr.contains("mismatch"), "\(r.stderr)")
        // Whom to doubt: the digest the user gave, not the server.
        #expect(r.stderr.contains("\(f.wrongSHA256) (the digest segget was given)"), "\(r.stderr)")
        #expect(!r.stderr.contains("--no-verify"), "\(r.stderr)")

        // Wrong MD5 likewise names MD5.
        let r2 = try VT.segget(["-q", "-o", out, "--checksum", "md5=\(String(repeating: "a", count: 32))", f.url()], in: f.scratch.path)
        #expect(r2.status == 6, "\(r2)")
        #expect(r2.stderr.contains("MD5") && r2.stderr.contains(f.md5), "\(r2.stderr)")
        f.expectNothingLeft(out)

        // The next run with the right digest fetches the whole file afresh and succeeds.
        f.server.resetCounters()
        let r3 = try VT.segget(["-o", out, "--checksum", "sha256=\(f.sha256)", f.url()], in: f.scratch.path)
        #expect(r3.status == 0, "\(r3)")
        #expect(!r3.stderr.contains("resuming"), "nothing may be resumed from a discarded download: \(r3.stderr)")
        #expect(f.server.bodyBytesSent >= Int64(f.bytes.count))
        f.expectIdentical(out)
    }

    @Test("wrong digest at the library level: SeggetError.verification, nothing left")
    func wrongChecksumLibrary() throws {
        let f = try Fixture()
        var o = DownloadOptions()
        o.outputPath = f.out()
        o.connections = 4
        o.checksums = [try ExpectedDigest(parsing: "sha256=\(f.wrongSHA256)")]
        o.syncBeforeRename = false
        let error = #expect(throws: SeggetError.self) {
            _ = try Download(url: f.url(), options: o).run()
        }
        #expect(error?.kind == .verification)
        #expect(error?.exitCode == 6)
        #expect(error?.message.contains(f.sha256) == true, "\(String(describing: error))")
        f.expectNothingLeft(f.out())

        o.checksums = [try ExpectedDigest(parsing: "sha256=\(f.sha256)"), try ExpectedDigest(parsing: "md5=\(f.md5)")]
        let result = try Download(url: f.url(), options: o).run()
        #expect(result.resumedBytes == 0)
        #expect(Set(result.verified) == ["SHA-256=\(f.sha256)", "MD5=\(f.md5)"])
        f.expectIdentical(f.out())
    }

    // MARK: Server digests

    @Test("server Repr-Digest right: exit 0; wrong: exit 6 and nothing left; --no-verify: exit 0")
    func serverReprDigest() throws {
        let f = try Fixture()
        let ok = f.out("ok.bin")
        let r1 = try VT.segget(["-q", "-o", ok, f.url("digest")], in: f.scratch.path)
        #expect(r1.status == 0, "\(r1)")
        f.expectIdentical(ok)

        let bad = f.out("bad.bin")
        let r2 = try VT.segget(["-q", "-o", bad, f.url("digest", query: "wrong=1")], in: f.scratch.path)
        #expect(r2.status == 6, "\(r2)")
        #expect(r2.stderr.contains("SHA-256") && r2.stderr.contains(f.sha256), "\(r2.stderr)")
        // Whom to doubt: the server's field, and what to do where it is wrong.
        #expect(r2.stderr.contains("(from the server's Repr-Digest field)"), "\(r2.stderr)")
        #expect(r2.stderr.contains("Where the server's Repr-Digest field is what is wrong, --no-verify"), "\(r2.stderr)")
        f.expectNothingLeft(bad)

        let r3 = try VT.segget(["-q", "--no-verify", "-o", bad, f.url("digest", query: "wrong=1")], in: f.scratch.path)
        #expect(r3.status == 0, "\(r3)")
        f.expectIdentical(bad)
    }

    @Test("server legacy Digest is checked too; Content-MD5 on a 206 is not")
    func serverLegacyDigests() throws {
        let f = try Fixture()
        let a = f.out("a.bin")
        let r1 = try VT.segget(["-q", "-o", a, f.url("digest", query: "legacy=1")], in: f.scratch.path)
        #expect(r1.status == 0, "\(r1)")
        f.expectIdentical(a)

        let b = f.out("b.bin")
        let r2 = try VT.segget(["-q", "-o", b, f.url("digest", query: "legacy=1&wrong=1")], in: f.scratch.path)
        #expect(r2.status == 6, "\(r2)")
        #expect(r2.stderr.contains("(from the server's Digest field)"), "\(r2.stderr)")
        f.expectNothingLeft(b)

        // Content-MD5 describes the body of the response it comes with: on the probe's 206 that is one
        // byte, not the file, so it must not be checked against the whole file (nor fail the download).
        let c = f.out("c.bin")
        var o = DownloadOptions()
        o.outputPath = c
        o.syncBeforeRename = false
        let result = try Download(url: f.url("digest", query: "md5=1"), options: o).run()
        #expect(result.usedRanges)
        #expect(result.verified.isEmpty, "Content-MD5 on a 206 must be ignored: \(result.verified)")
        f.expectIdentical(c)
    }

    @Test("a right --checksum of another algorithm does not mask a wrong server digest")
    func userChecksumPlusWrongServerDigest() throws {
        let f = try Fixture()
        let out = f.out()
        // The user's MD5 is right, but the server's SHA-256 is wrong: both are checked.
        let r = try VT.segget(["-q", "-o", out, "--checksum", "md5=\(f.md5)", f.url("digest", query: "wrong=1")], in: f.scratch.path)
        #expect(r.status == 6, "\(r)")
        f.expectNothingLeft(out)
        // The user's SHA-256 takes precedence over the server's SHA-256 of the same algorithm.
        let r2 = try VT.segget(["-q", "-o", out, "--checksum", "sha256=\(f.sha256)", f.url("digest", query: "wrong=1")], in: f.scratch.path)
        #expect(r2.status == 0, "\(r2)")
        f.expectIdentical(out)
    }

    // MARK: After a resume

    /// Starts a throttled library download and interrupts it once about half of it is done; returns the
    /// chunk size used. The part file and journal are left for a resume.
    private func interruptHalfway(_ f: Fixture, url: String, out: String) throws -> Int64 {
        var o = DownloadOptions()
        o.outputPath = out
        o.connections = 4
        o.chunkSize = 64 << 10
        o.syncBeforeRename = false
        let flag = InterruptFlag()
        let total = Int64(f.bytes.count)
        let error = #expect(throws: SeggetError.self) {
            _ = try Download(url: url, options: o).run(
                progress: { p in
                    if p.completedBytes >= total / 2 { flag.set() }
                },
                interrupt: flag)
        }
        #expect(error?.kind == .interrupted, "\(String(describing: error))")
        #expect(VT.exists(out + ".segget-part"))
        #expect(VT.exists(out + ".segget-journal"))
        #expect(!VT.exists(out))
        return o.chunkSize
    }

    /// The chunks the journal at `out` records as written.
    private func writtenChunks(_ out: String) throws -> [Int] {
        let opened = try Journal.open(path: out + ".segget-journal", currentBootID: Journal.currentBootID())
        defer { opened.journal.close() }
        return (0..<opened.trusted.count).filter { opened.trusted[$0] }
    }

    @Test("interrupted at ~50 %, resumed with --checksum: verified from the bytes on disk")
    func verifyAfterResume() throws {
        let f = try Fixture(size: 4 << 20)
        // 4 connections at 256 KiB/s each: about 4 s for the whole file, so the interrupt lands mid-way.
        let url = f.url(query: "rate=256k")
        let out = f.out()
        _ = try interruptHalfway(f, url: url, out: out)
        let done = try writtenChunks(out)
        #expect(!done.isEmpty && done.count < 64, "chunks finished before the interrupt: \(done.count)")

        // Resume through the library: some bytes came from disk, and the digest still covers them.
        var o = DownloadOptions()
        o.outputPath = out
        o.connections = 4
        o.syncBeforeRename = false
        o.checksums = [try ExpectedDigest(parsing: "sha256=\(f.sha256)")]
        let result = try Download(url: url, options: o).run()
        #expect(result.resumedBytes > 0, "the second run must resume, not start over")
        #expect(result.resumedBytes < Int64(f.bytes.count))
        #expect(result.verified == ["SHA-256=\(f.sha256)"])
        f.expectIdentical(out)
    }

    @Test("interrupted, then resumed by the CLI with --checksum: exit 0")
    func verifyAfterResumeCLI() throws {
        let f = try Fixture(size: 4 << 20)
        let url = f.url(query: "rate=256k")
        let out = f.out()
        _ = try interruptHalfway(f, url: url, out: out)
        f.server.resetCounters()
        let r = try VT.segget(["-o", out, "-n", "4", "--checksum", "sha256=\(f.sha256)", url], in: f.scratch.path)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("resuming"), "\(r.stderr)")
        #expect(f.server.bodyBytesSent < Int64(f.bytes.count), "the resumed run must not fetch everything again")
        f.expectIdentical(out)
    }

    /// Changes one bit of chunk `chunk` in the partial file and rewrites that chunk's CRC-32C in the
    /// journal to match: a deliberate forgery that the resume's chunk check cannot see.
    private func forgeChunk(_ out: String, chunk: Int, chunkSize: Int64, at offset: Int64) throws {
        try VT.flipBit(in: out + ".segget-part", at: Int64(chunk) * chunkSize + offset)
        let opened = try Journal.open(path: out + ".segget-journal", currentBootID: Journal.currentBootID())
        let header = opened.journal.header
        opened.journal.close()
        let part = try #require(TestFiles.read(out + ".segget-part"))
        let range = header.byteRange(ofChunk: chunk)
        let crc = CRC32C.checksum(part[Int(range.lowerBound)..<Int(range.upperBound)])
        var journal = try #require(TestFiles.read(out + ".segget-journal"))
        let at = Int(JournalCodec.checksumOffset(header: header, chunk: chunk))
        journal.replaceSubrange(at..<(at + 4), with: JournalCodec.encodeChecksum(crc))
        try TestFiles.write(out + ".segget-journal", journal)
    }

    @Test("a resumed download whose finished chunk was tampered with on disk fetches it again (exit 0)")
    func tamperedPartAfterResume() throws {
        let f = try Fixture(size: 4 << 20)
        let url = f.url(query: "rate=256k")
        let out = f.out()
        let chunkSize = try interruptHalfway(f, url: url, out: out)
        let done = try writtenChunks(out)
        try #require(!done.isEmpty)
        // Corrupt the middle of the last chunk the journal calls finished.
        let victim = Int64(done.last!)
        try VT.flipBit(in: out + ".segget-part", at: victim * chunkSize + chunkSize / 2)
        // The resumed run checks the chunk against its CRC-32C, fetches it again, and verifies.
        let r = try VT.segget(["-o", out, "-n", "4", "--checksum", "sha256=\(f.sha256)", url], in: f.scratch.path)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("resuming"), "the run must have resumed for this test to mean anything: \(r.stderr)")
        #expect(r.stderr.contains("1 of \(done.count) chunks kept from the last run did not match"), "\(r.stderr)")
        f.expectIdentical(out)
    }

    @Test("a chunk forged together with its journal checksum gets past the resume, not --checksum (exit 6)")
    func forgedPartAfterResume() throws {
        let f = try Fixture(size: 4 << 20)
        let url = f.url(query: "rate=256k")
        let out = f.out()
        let chunkSize = try interruptHalfway(f, url: url, out: out)
        let done = try writtenChunks(out)
        try #require(!done.isEmpty)
        try forgeChunk(out, chunk: done.last!, chunkSize: chunkSize, at: chunkSize / 2)
        let r = try VT.segget(["-o", out, "-n", "4", "--checksum", "sha256=\(f.sha256)", url], in: f.scratch.path)
        #expect(r.status == 6, "\(r)")
        #expect(r.stderr.contains("resuming"), "the run must have resumed for this test to mean anything: \(r.stderr)")
        #expect(!r.stderr.contains("did not match their checksums"), "the forgery was meant to pass the chunk check")
        #expect(r.stderr.contains("SHA-256") && r.stderr.contains(f.sha256), "\(r.stderr)")
        f.expectNothingLeft(out)

        // And the run after that starts afresh and succeeds.
        let r2 = try VT.segget(["-q", "-o", out, "-n", "4", "--checksum", "sha256=\(f.sha256)", f.url()], in: f.scratch.path)
        #expect(r2.status == 0, "\(r2)")
        f.expectIdentical(out)
    }

    @Test("a forged resume is caught by the server's Repr-Digest as well")
    func tamperedPartServerDigest() throws {
        let f = try Fixture(size: 4 << 20)
        let url = f.url("digest", query: "rate=256k")
        let out = f.out()
        let chunkSize = try interruptHalfway(f, url: url, out: out)
        let done = try writtenChunks(out)
        try #require(!done.isEmpty)
        try forgeChunk(out, chunk: done.first!, chunkSize: chunkSize, at: 17)
        let r = try VT.segget(["-q", "-o", out, "-n", "4", url], in: f.scratch.path)
        #expect(r.status == 6, "\(r)")
        f.expectNothingLeft(out)
    }

    // MARK: segget verify

    @Test("segget verify: right 0, wrong 6, missing file 5, bad spec 2")
    func verifyCommand() throws {
        let f = try Fixture(size: 1 << 20 | 7)
        let path = f.scratch.file("local.bin")
        _ = FileManager.default.createFile(atPath: path, contents: Data(f.bytes))

        let ok = try VT.segget(["verify", path, "--checksum", "sha256=\(f.sha256)"], in: f.scratch.path)
        #expect(ok.status == 0, "\(ok)")
        #expect(ok.stderr.contains("OK"), "\(ok)")
        let okBoth = try VT.segget(
            ["verify", "-q", path, "--checksum", "md5=\(f.md5.uppercased())", "--checksum", "sha-256=\(f.sha256)"],
            in: f.scratch.path)
        #expect(okBoth.status == 0, "\(okBoth)")
        #expect(okBoth.stderr.isEmpty, "\(okBoth)")

        let sums = f.scratch.file("SHA256SUMS")
        try "\(f.sha256)  local.bin\n".write(toFile: sums, atomically: true, encoding: .utf8)
        let okFile = try VT.segget(["verify", path, "--checksum-file", sums], in: f.scratch.path)
        #expect(okFile.status == 0, "\(okFile)")

        let wrong = try VT.segget(["verify", path, "--checksum", "sha256=\(f.wrongSHA256)"], in: f.scratch.path)
        #expect(wrong.status == 6, "\(wrong)")
        #expect(wrong.stderr.contains(f.wrongSHA256) && wrong.stderr.contains(f.sha256), "\(wrong)")
        #expect(VT.exists(path), "verify must never remove the file")

        let missing = try VT.segget(["verify", f.scratch.file("nope.bin"), "--checksum", "sha256=\(f.sha256)"], in: f.scratch.path)
        #expect(missing.status == 5, "\(missing)")

        for spec in ["sha256=xyz", "sha1=\(String(repeating: "0", count: 40))", "sha256", "sha256=\(f.md5)", ""] {
            let bad = try VT.segget(["verify", path, "--checksum", spec], in: f.scratch.path)
            #expect(bad.status == 2, "spec '\(spec)': \(bad)")
        }
        let none = try VT.segget(["verify", path], in: f.scratch.path)
        #expect(none.status == 2, "\(none)")
    }

    @Test("get with a malformed --checksum is a usage error (2) and downloads nothing")
    func badSpecOnGet() throws {
        let f = try Fixture(size: 64 << 10)
        let out = f.out()
        let r = try VT.segget(["-q", "-o", out, "--checksum", "sha256=1234", f.url()], in: f.scratch.path)
        #expect(r.status == 2, "\(r)")
        #expect(f.server.requests.isEmpty, "a usage error must not touch the network")
        f.expectNothingLeft(out)
        let r2 = try VT.segget(["-q", "-o", out, "--no-verify", "--checksum", "sha256=\(f.sha256)", f.url()], in: f.scratch.path)
        #expect(r2.status == 2, "\(r2)")
    }
}

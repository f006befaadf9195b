import Glibc
import Testing
import SeggetSystem
import SeggetVerify
@testable import Segget

/// The mark a finished download leaves on its file: what it keeps, how it is read back, and what it
/// vouches for.
@Suite struct FinishedMarkTests {
    static let url = "https://example.com/pub/file.iso?X-Amz-Signature=secret"
    static let digest = ExpectedDigest(algorithm: .sha256, bytes: Array(repeating: 0xab, count: 32))!
    static let other = ExpectedDigest(algorithm: .md5, bytes: Array(repeating: 0x01, count: 16))!

    static func mark(verified: [FinishedMark.Digest] = []) -> FinishedMark {
        FinishedMark(size: 65536, modified: 1_764_451_200_123_456_789, source: FinishedMark.source(of: url), verified: verified)
    }

    static func file(size: Int64 = 65536, modified: Int64 = 1_764_451_200_123_456_789, kind: FileStatus.Kind = .regular) -> FileStatus {
        FileStatus(kind: kind, size: size, permissions: 0o644, device: 1, inode: 2, modified: modified)
    }

    @Test func roundTripsThroughItsBytes() throws {
        let digests = [FinishedMark.Digest(Self.digest), FinishedMark.Digest(Self.other)]
        for verified in [[], [digests[0]], digests] {
            let m = Self.mark(verified: verified)
            #expect(m.encoded.count == 25 + 9 * verified.count)
            #expect(FinishedMark(decoding: m.encoded) == m)
        }
        // Version, then little-endian numbers.
        #expect(Array(Self.mark().encoded.prefix(9)) == [1, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0])
    }

    @Test func staysSmallEnoughForAnExt4Inode() {
        // 256-byte inodes leave 96 bytes for attributes: 4 of header, 16 for the entry and 16 for
        // the name "segget.finished" padded, so at most 60 for the value.
        let two = [FinishedMark.Digest(Self.digest), FinishedMark.Digest(Self.other)]
        var m = Self.mark(verified: two)
        m.serverVersion = 1
        #expect(m.encoded.count <= 60)
    }

    @Test func keepsTheServersVersionAfterItsDigests() throws {
        for verified in [[], [FinishedMark.Digest(Self.digest)], [FinishedMark.Digest(Self.digest), FinishedMark.Digest(Self.other)]] {
            var m = Self.mark(verified: verified)
            m.serverVersion = 0x0102_0304_0506_0708
            #expect(m.encoded.count == 25 + 9 * verified.count + 9)
            #expect(Array(m.encoded.suffix(9)) == [16, 8, 7, 6, 5, 4, 3, 2, 1])
            #expect(FinishedMark(decoding: m.encoded) == m)
        }
        // A mark written before the version was kept reads as one without it.
        let old = Self.mark(verified: [FinishedMark.Digest(Self.digest)]).encoded
        #expect(try #require(FinishedMark(decoding: old)).serverVersion == nil)
        // An unknown record is not a mark.
        #expect(FinishedMark(decoding: Self.mark().encoded + [17, 0, 0, 0, 0, 0, 0, 0, 0]) == nil)
    }

    @Test func theServersVersionIsItsStrongValidator() {
        let v = FinishedMark.version(validator:)
        let a = v("\"5f3a-1000\"")
        #expect(a == v("\"5f3a-1000\""), "stable")
        #expect(a != v("\"5f3a-1001\""))
        #expect(a >> 63 == 1 && v("Sat, 05 Dec 2026 10:00:00 GMT") >> 63 == 0, "the top bit says ETag or date")
        // From an answer: its strong ETag, else a Last-Modified a minute old or more; from the URL's host only.
        var p = ProbeResult(
            finalURL: "https://h.example/f", totalLength: 1, acceptsRanges: true, etag: nil, lastModified: nil,
            suggestedFileName: "f", reprDigest: nil, digest: nil, contentMD5: nil, redirects: 0, noRangesReason: nil)
        p.answeredAt = 1_796_464_800 + 3600  // an hour after the date below
        #expect(FinishedMark.version(of: p, url: "https://h.example/f") == nil, "no validator")
        p.lastModified = "Sat, 05 Dec 2026 10:00:00 GMT"
        #expect(FinishedMark.version(of: p, url: "https://h.example/f") == v("Sat, 05 Dec 2026 10:00:00 GMT"))
        p.etag = "W/\"weak\""
        #expect(FinishedMark.version(of: p, url: "https://h.example/f") == v("Sat, 05 Dec 2026 10:00:00 GMT"), "a weak ETag is no version")
        p.etag = "\"strong\""
        #expect(FinishedMark.version(of: p, url: "https://h.example/f") == v("\"strong\""))
        #expect(FinishedMark.version(of: p, url: "https://redirector.example/f") == nil, "a mirror's answer: its own validators")
        // Comparable only in kind; unknown on either side: the length alone decides.
        var m = Self.mark()
        #expect(m.sameServerVersion(a))
        m.serverVersion = a
        #expect(m.sameServerVersion(a))
        #expect(m.sameServerVersion(nil))
        #expect(!m.sameServerVersion(v("\"other\"")))
        #expect(m.sameServerVersion(v("Sat, 05 Dec 2026 10:00:00 GMT")), "an ETag dropped since: not comparable")
    }

    @Test func keepsADigestByItsAlgorithmAndFirstEightBytes() {
        #expect(FinishedMark.Digest(Self.digest) == FinishedMark.Digest(algorithm: .sha256, prefix: 0xabab_abab_abab_abab))
        #expect(FinishedMark.Digest(verified: "SHA-256=" + Self.digest.hex) == FinishedMark.Digest(Self.digest))
        #expect(FinishedMark.Digest(verified: "MD5=" + Self.other.hex) == FinishedMark.Digest(Self.other))
        for bad in ["SHA-256=abc", "sha256=" + Self.digest.hex, "SHA-256", "MD5=" + Self.digest.hex, "SHA-256=" + String(repeating: "g", count: 64)] {
            #expect(FinishedMark.Digest(verified: bad) == nil, "\(bad)")
        }
    }

    @Test func theSourceIsTheURLWithoutCredentials() {
        #expect(FinishedMark.source(of: "https://u:p@example.com/a") == FinishedMark.source(of: "https://example.com/a"))
        // The same cut as the journal's form of the URL, on every shape of authority.
        for url in ["https://u:p@example.com/a@b", "http://x@y@h:8/p?q=@#f", "a#b://x@y", "https://h/p?u=a@b", "ftp://@h", "no-scheme@x", "https://é@ü.example/ä", "://@", ""] {
            let direct = FinishedMark.source(of: URLParts.redactingCredentials(url))
            #expect(FinishedMark.source(of: url) == direct, "\(url)")
        }
        #expect(FinishedMark.source(of: "https://example.com/a") != FinishedMark.source(of: "https://example.com/b"))
        // The fragment is never sent: the same file.
        #expect(FinishedMark.source(of: "https://example.com/a#sha256=ab") == FinishedMark.source(of: "https://example.com/a"))
        #expect(FinishedMark.source(of: "https://u:p@example.com/a?q#f") == FinishedMark.source(of: "https://example.com/a?q"))
        #expect(FinishedMark.source(of: "https://example.com/a") != FinishedMark.source(of: "http://example.com/a"))
        // FNV-1a 64 of "a", a published test vector: the hash is stable across runs and machines.
        #expect(FinishedMark.source(of: "a") == 0xaf63_dc4c_8601_ec8c)
    }

    @Test func refusesWhatIsNotAVersionOneMark() {
        let good = Self.mark(verified: [FinishedMark.Digest(Self.digest)]).encoded
        var negative = good
        negative[8] = 0x80  // the length's top byte: negative
        var version2 = good
        version2[0] = 2
        var unknownAlgorithm = good
        unknownAlgorithm[25] = 9
        for bytes in [[], Array(good.prefix(24)), Array(good.dropLast()), good + [0], negative, version2, unknownAlgorithm] {
            #expect(FinishedMark(decoding: bytes) == nil, "\(bytes)")
        }
    }

    @Test func vouchesOnlyForTheSameFileFromTheSameURL() {
        let m = Self.mark()
        #expect(m.vouches(for: Self.url, file: Self.file(), expected: []))
        #expect(!m.vouches(for: Self.url, file: Self.file(size: 65535), expected: []))
        #expect(!m.vouches(for: Self.url, file: Self.file(modified: 1_764_451_200_123_456_790), expected: []))
        #expect(!m.vouches(for: Self.url, file: Self.file(kind: .symbolicLink), expected: []))
        #expect(!m.vouches(for: "https://example.com/pub/file.iso", file: Self.file(), expected: []))
    }

    @Test func vouchesForADigestOnlyWhenTheFileWasCheckedAgainstIt() {
        let unchecked = Self.mark()
        #expect(!unchecked.vouches(for: Self.url, file: Self.file(), expected: [Self.digest]))
        let checked = Self.mark(verified: [FinishedMark.Digest(Self.digest)])
        #expect(checked.vouches(for: Self.url, file: Self.file(), expected: [Self.digest]))
        #expect(!checked.vouches(for: Self.url, file: Self.file(), expected: [Self.digest, Self.other]))
        let wrong = ExpectedDigest(algorithm: .sha256, bytes: Array(repeating: 0xac, count: 32))!
        #expect(!checked.vouches(for: Self.url, file: Self.file(), expected: [wrong]))
    }

    /// `verify --repair` renews the mark for the file as the repair left it: a later modification
    /// time and the digests of both, the same URL; not for another length, a non-regular file, or a
    /// repair whose digest of an algorithm the mark has differs from it (another file's Metalink).
    @Test func aRepairRenewsTheMarkOnlyForTheFileItDescribed() {
        let sha = FinishedMark.Digest(Self.digest)
        let md5 = FinishedMark.Digest(Self.other)
        let m = Self.mark(verified: [sha])
        let later = Self.file(modified: 1_764_451_300_000_000_000)
        let renewed = m.renewed(as: later, verified: [sha, md5])
        #expect(renewed == FinishedMark(size: 65536, modified: 1_764_451_300_000_000_000, source: m.source, verified: [sha, md5]))
        #expect(renewed?.vouches(for: Self.url, file: later, expected: [Self.digest, Self.other]) == true)
        #expect(!m.vouches(for: Self.url, file: later, expected: []), "the old mark does not vouch for the repaired file")
        #expect(m.renewed(as: later, verified: []) == FinishedMark(size: 65536, modified: later.modified, source: m.source, verified: [sha]))
        #expect(m.renewed(as: Self.file(size: 65535, modified: later.modified), verified: []) == nil)
        #expect(m.renewed(as: Self.file(modified: later.modified, kind: .symbolicLink), verified: []) == nil)
        let otherSHA = FinishedMark.Digest(ExpectedDigest(algorithm: .sha256, bytes: Array(repeating: 0xac, count: 32))!)
        #expect(m.renewed(as: later, verified: [otherSHA]) == nil)
        #expect(Self.mark().renewed(as: later, verified: [otherSHA])?.verified == [otherSHA])
        // The server's version the file was downloaded as is still what it holds.
        var versioned = m
        versioned.serverVersion = 9
        #expect(versioned.renewed(as: later, verified: [])?.serverVersion == 9)
    }

    /// The size a mark vouches for with `expected` checked, as the rerun reads it.
    static func vouchedSize(at path: String, url: String, expected: [ExpectedDigest]) -> Int64? {
        FinishedMark.vouched(at: path, url: url, expected: expected).flatMap { $0.checked ? $0.size : nil }
    }

    @Test func aFileOnDiskIsVouchedForUntilItChanges() throws {
        var template = Array("/tmp/segget-mark-test-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        let path = dir + "/f.bin"
        defer {
            unlink(path)
            rmdir(dir)
        }
        let file = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o644))
        defer { file.close() }
        try file.write(Array(repeating: 7, count: 1000), at: 0)
        FinishedMark.write(on: file, url: Self.url, verified: ["SHA-256=" + Self.digest.hex, "SHA-256=" + Self.digest.hex], serverVersion: 42)
        guard let stored = FileSystem.attribute(path, FinishedMark.attributeName) else { return }  // no xattrs here
        #expect(stored.count == 25 + 9 + 9, "the same digest twice is kept once, then the server's version")
        #expect(Self.vouchedSize(at: path, url: Self.url, expected: []) == 1000)
        #expect(Self.vouchedSize(at: path, url: Self.url, expected: [Self.digest]) == 1000)
        #expect(Self.vouchedSize(at: path, url: Self.url, expected: [Self.other]) == nil)
        #expect(Self.vouchedSize(at: path, url: Self.url + "&x", expected: []) == nil)
        // One read answers both: the file is this URL's, and whether this run's digests were checked.
        #expect(FinishedMark.vouched(at: path, url: Self.url, expected: [Self.digest]).map { "\($0.size) \($0.checked)" } == "1000 true")
        #expect(FinishedMark.vouched(at: path, url: Self.url, expected: [Self.other]).map { "\($0.size) \($0.checked)" } == "1000 false")
        #expect(FinishedMark.vouched(at: path, url: Self.url + "&x", expected: [Self.digest]) == nil)
        #expect(FinishedMark.vouched(at: path, url: Self.url, expected: [])?.mark.serverVersion == 42)
        usleep(20_000)
        try file.write([8], at: 10)
        #expect(Self.vouchedSize(at: path, url: Self.url, expected: []) == nil)
        #expect(FinishedMark.vouched(at: path, url: Self.url, expected: []) == nil)
    }
}

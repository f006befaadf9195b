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

    static func mark(verified: [String] = []) -> FinishedMark {
        FinishedMark(size: 65536, modified: 1_764_451_200_123_456_789, source: FinishedMark.source(of: url), verified: verified)
    }

    static func file(size: Int64 = 65536, modified: Int64 = 1_764_451_200_123_456_789, kind: FileStatus.Kind = .regular) -> FileStatus {
        FileStatus(kind: kind, size: size, permissions: 0o644, device: 1, inode: 2, modified: modified)
    }

    @Test func roundTripsThroughItsBytes() throws {
        for verified in [[], ["SHA-256=" + Self.digest.hex], ["SHA-256=" + Self.digest.hex, "MD5=" + Self.other.hex]] {
            let m = Self.mark(verified: verified)
            #expect(FinishedMark(decoding: m.encoded) == m)
        }
        let text = String(decoding: Self.mark().encoded, as: UTF8.self)
        #expect(text.hasPrefix("segget-finished 1\nsize 65536\nmodified 1764451200123456789\nsource "))
    }

    @Test func keepsNoPartOfTheURL() {
        let text = String(decoding: Self.mark().encoded, as: UTF8.self)
        for part in ["example", "secret", "file.iso", "Signature"] { #expect(!text.contains(part)) }
        #expect(FinishedMark.source(of: Self.url).count == 64)
    }

    @Test func theSourceIsTheURLWithoutCredentials() {
        #expect(FinishedMark.source(of: "https://u:p@example.com/a") == FinishedMark.source(of: "https://example.com/a"))
        #expect(FinishedMark.source(of: "https://example.com/a") != FinishedMark.source(of: "https://example.com/b"))
        #expect(FinishedMark.source(of: "https://example.com/a") != FinishedMark.source(of: "http://example.com/a"))
    }

    @Test func refusesWhatIsNotAVersionOneMark() {
        let good = String(decoding: Self.mark().encoded, as: UTF8.self)
        let source = FinishedMark.source(of: Self.url)
        let bad = [
            "", "segget-finished 2\nsize 1\nmodified 1\nsource \(source)\n",
            good.replacingOccurrences(of: "size 65536\n", with: ""),
            good.replacingOccurrences(of: "modified 1764451200123456789\n", with: ""),
            good.replacingOccurrences(of: "source \(source)\n", with: ""),
            good.replacingOccurrences(of: "size 65536", with: "size -1"),
            good.replacingOccurrences(of: "size 65536", with: "size 12x"),
            good.replacingOccurrences(of: source, with: String(source.dropLast())),
            good.replacingOccurrences(of: source, with: source.uppercased()),
            "x" + good,
        ]
        for text in bad { #expect(FinishedMark(decoding: Array(text.utf8)) == nil, "\(text)") }
        #expect(FinishedMark(decoding: [0xff, 0xfe]) == nil)
        // Lines a later version adds are passed over.
        #expect(FinishedMark(decoding: Array((good + "etag \"x\"\n").utf8)) == Self.mark())
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
        let checked = Self.mark(verified: ["SHA-256=" + Self.digest.hex])
        #expect(checked.vouches(for: Self.url, file: Self.file(), expected: [Self.digest]))
        #expect(!checked.vouches(for: Self.url, file: Self.file(), expected: [Self.digest, Self.other]))
        let wrong = ExpectedDigest(algorithm: .sha256, bytes: Array(repeating: 0xac, count: 32))!
        #expect(!checked.vouches(for: Self.url, file: Self.file(), expected: [wrong]))
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
        FinishedMark.write(on: file, url: Self.url, verified: [])
        guard FileSystem.attribute(path, FinishedMark.attributeName) != nil else { return }  // no xattrs here
        #expect(FinishedMark.vouchedSize(at: path, url: Self.url, expected: []) == 1000)
        #expect(FinishedMark.vouchedSize(at: path, url: Self.url + "&x", expected: []) == nil)
        #expect(FinishedMark.vouchedSize(at: path, url: Self.url, expected: [Self.digest]) == nil)
        usleep(20_000)
        try file.write([8], at: 10)
        #expect(FinishedMark.vouchedSize(at: path, url: Self.url, expected: []) == nil)
    }
}

import Testing

@testable import SeggetVerify

@Suite struct ChecksumFileTests {
    static let sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    static let sha2 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    static let md5 = "900150983cd24fb0d6963f7d28e17f72"

    @Test func gnuTextAndBinaryForms() throws {
        let text = try ChecksumFile.expectedDigest(in: "\(Self.sha)  file.iso\n", forFileName: "file.iso")
        #expect(text.algorithm == .sha256 && text.hex == Self.sha)
        let binary = try ChecksumFile.expectedDigest(in: "\(Self.md5) *file.iso\n", forFileName: "file.iso")
        #expect(binary.algorithm == .md5 && binary.hex == Self.md5)
        let upper = try ChecksumFile.expectedDigest(in: Self.sha.uppercased() + "  file.iso", forFileName: "file.iso")
        #expect(upper.hex == Self.sha)
    }

    @Test func bsdForms() throws {
        let coreutils = try ChecksumFile.expectedDigest(
            in: "SHA256 (file.iso) = \(Self.sha)\nMD5 (other) = \(Self.md5)\n", forFileName: "file.iso")
        #expect(coreutils.algorithm == .sha256 && coreutils.hex == Self.sha)
        let md5 = try ChecksumFile.expectedDigest(in: "MD5 (a (1).txt) = \(Self.md5)", forFileName: "a (1).txt")
        #expect(md5.algorithm == .md5)
        // OpenSSL 3's `openssl dgst -sha256` output.
        let openssl = try ChecksumFile.expectedDigest(in: "SHA2-256(file.iso)= \(Self.sha)\n", forFileName: "file.iso")
        #expect(openssl.hex == Self.sha)
    }

    @Test func severalLinesCommentsBlankLinesAndCRLF() throws {
        let contents = """
            # SHA-256 checksums for release 1.2

            \(Self.sha2)  other.tar.gz\r
            \(Self.sha) *release/file-1.2.tar.gz\r

            \(Self.md5)  release/file-1.2.tar.gz
            """
        let digest = try ChecksumFile.expectedDigest(in: contents, forFileName: "file-1.2.tar.gz")
        // SHA-256 is preferred over MD5, and the basename matches "release/file-1.2.tar.gz".
        #expect(digest.algorithm == .sha256 && digest.hex == Self.sha)
        let other = try ChecksumFile.expectedDigest(in: contents, forFileName: "/downloads/other.tar.gz")
        #expect(other.hex == Self.sha2)
    }

    @Test func exactNameBeatsBasename() throws {
        let contents = "\(Self.sha2)  a/file\n\(Self.sha)  b/file\n"
        #expect(try ChecksumFile.expectedDigest(in: contents, forFileName: "b/file").hex == Self.sha)
        // Two different digests for the same basename and no exact match: refuse to guess.
        #expect {
            _ = try ChecksumFile.expectedDigest(in: contents, forFileName: "file")
        } throws: { error in
            (error as? ChecksumSpecError)?.description.contains("different SHA-256 lines") ?? false
        }
    }

    @Test func loneBareDigest() throws {
        let digest = try ChecksumFile.expectedDigest(in: "\(Self.sha)\n", forFileName: "anything.iso")
        #expect(digest.hex == Self.sha)
    }

    @Test func gnuEscapedName() throws {
        let digest = try ChecksumFile.expectedDigest(in: "\\\(Self.sha)  a\\nb\\\\c\n", forFileName: "a\nb\\c")
        #expect(digest.hex == Self.sha)
        let bsd = try ChecksumFile.expectedDigest(in: "\\MD5 (x\\ny) = \(Self.md5)\n", forFileName: "x\ny")
        #expect(bsd.algorithm == .md5)
    }

    @Test func nameNotPresent() {
        let contents = "\(Self.sha)  one.iso\n\(Self.sha2)  two.iso\n"
        #expect {
            _ = try ChecksumFile.expectedDigest(in: contents, forFileName: "three.iso")
        } throws: { error in
            guard let message = (error as? ChecksumSpecError)?.description else { return false }
            return message.contains("no line for “three.iso”") && message.contains("one.iso, two.iso")
        }
    }

    @Test func emptyAndUnsupportedFiles() {
        #expect {
            _ = try ChecksumFile.expectedDigest(in: "# nothing here\n\n", forFileName: "f")
        } throws: { error in
            (error as? ChecksumSpecError)?.description.contains("no checksum lines") ?? false
        }
        let sha512 = String(repeating: "ab", count: 64)
        #expect {
            _ = try ChecksumFile.expectedDigest(in: "\(sha512)  f\nSHA1 (f) = abcd\n", forFileName: "f")
        } throws: { error in
            guard let message = (error as? ChecksumSpecError)?.description else { return false }
            return message.contains("SHA-512") && message.contains("SHA1") && message.contains("cannot check")
        }
    }

    @Test func malformedLinesAreSkipped() throws {
        let contents = """
            not a checksum line
            \(Self.sha.dropLast())  file
            zz\(Self.sha.dropFirst(2))  file
            SHA256 (file) = nothex
            \(Self.md5)  file
            """
        let digest = try ChecksumFile.expectedDigest(in: contents, forFileName: "file")
        #expect(digest.algorithm == .md5)
    }
}

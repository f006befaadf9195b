import Testing

@testable import SeggetVerify

@Suite struct ExpectedDigestTests {
    static let sha256Hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    static let md5Hex = "900150983cd24fb0d6963f7d28e17f72"

    @Test(arguments: [
        "sha256=" + sha256Hex,
        "SHA256=" + sha256Hex.uppercased(),
        "sha-256=" + sha256Hex,
        "Sha-256=" + sha256Hex,
        "  sha256 = " + sha256Hex + "\n",
    ])
    func acceptsSHA256Forms(spec: String) throws {
        let digest = try ExpectedDigest(parsing: spec)
        #expect(digest.algorithm == .sha256)
        #expect(digest.hex == Self.sha256Hex)
        #expect(digest.bytes.count == 32)
    }

    @Test(arguments: ["md5=" + md5Hex, "MD5=" + md5Hex.uppercased()])
    func acceptsMD5Forms(spec: String) throws {
        let digest = try ExpectedDigest(parsing: spec)
        #expect(digest.algorithm == .md5)
        #expect(digest.hex == Self.md5Hex)
    }

    /// Each bad spec with words its message must contain.
    @Test(arguments: [
        ("", ["empty", "sha256=HEX", "md5=HEX"]),
        ("   ", ["empty", "sha256=HEX"]),
        (sha256Hex, ["does not name its algorithm", "sha256=HEX", "md5=HEX"]),
        ("hello", ["not of the form ALGORITHM=HEX", "sha256=HEX"]),
        ("sha512=abcd", ["“sha512”", "not supported", "sha256=HEX", "md5=HEX"]),
        ("=abcd", ["(none)", "not supported"]),
        ("sha256=" + String(sha256Hex.dropLast()), ["SHA-256", "63 hex digits", "needs 64"]),
        ("md5=" + sha256Hex, ["MD5", "64 hex digits", "needs 32"]),
        ("sha256=", ["SHA-256", "0 hex digits", "needs 64"]),
        ("sha256=" + String(sha256Hex.dropLast()) + "g", ["SHA-256", "“g”", "not a hex digit", "64 digits"]),
        ("md5=" + String(md5Hex.dropLast()) + "é", ["MD5", "“é”", "not a hex digit"]),
    ])
    func rejectsWithHelpfulMessage(spec: String, words: [String]) {
        #expect {
            _ = try ExpectedDigest(parsing: spec)
        } throws: { error in
            guard let error = error as? ChecksumSpecError else { return false }
            let message = error.description
            // One sentence: ends with a period and has no second sentence after it.
            #expect(message.hasSuffix("."))
            #expect(!message.dropLast().contains(". "))
            for word in words {
                #expect(message.contains(word), "“\(message)” should mention \(word)")
            }
            return true
        }
    }

    @Test func longGarbageIsAbbreviated() {
        let spec = String(repeating: "x", count: 5000)
        #expect {
            _ = try ExpectedDigest(parsing: spec)
        } throws: { error in
            (error as? ChecksumSpecError).map { $0.description.count < 300 } ?? false
        }
    }

    @Test func memberwiseInitChecksLength() {
        #expect(ExpectedDigest(algorithm: .md5, bytes: [UInt8](repeating: 0, count: 16)) != nil)
        #expect(ExpectedDigest(algorithm: .md5, bytes: [UInt8](repeating: 0, count: 32)) == nil)
        #expect(ExpectedDigest(algorithm: .sha256, bytes: []) == nil)
    }
}

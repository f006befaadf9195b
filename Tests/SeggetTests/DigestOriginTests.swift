import SeggetVerify
import Testing
@testable import Segget

/// A mismatch names where the digest it expected came from.
@Suite struct DigestOriginTests {
    private let sha = try! ExpectedDigest(parsing: "sha256=" + String(repeating: "ab", count: 32))
    private let md5 = try! ExpectedDigest(parsing: "md5=" + String(repeating: "cd", count: 16))
    /// The two digests above in base64.
    private let shaBase64 = "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="
    private let md5Base64 = "zc3Nzc3Nzc3Nzc3Nzc3NzQ=="
    private var shaField: String { "sha-256=:" + shaBase64 + ":" }

    @Test func givenBeforeTheServersFields() {
        let o = DigestOrigin(given: [sha], reprDigest: shaField, digest: nil, contentMD5: nil)
        #expect(o.of(sha) == .init(phrase: "the digest segget was given", field: nil))
    }

    @Test func eachFieldByName() {
        let o = DigestOrigin(given: [], reprDigest: nil, digest: "MD5=" + md5Base64, contentMD5: nil)
        #expect(o.of(md5).field == "Digest")
        let r = DigestOrigin(given: [], reprDigest: shaField, digest: nil, contentMD5: md5Base64)
        #expect(r.of(sha) == .init(phrase: "from the server's Repr-Digest field", field: "Repr-Digest"))
        #expect(r.of(md5).field == "Content-MD5")
    }

    @Test func anythingElseIsTheMetalinks() {
        let o = DigestOrigin(given: [md5], reprDigest: nil, digest: nil, contentMD5: nil)
        #expect(o.of(sha) == .init(phrase: "from the Metalink the server pointed to", field: nil))
    }

    @Test func theMessageSaysIt() throws {
        let got: [DigestAlgorithm: [UInt8]] = [.sha256: [UInt8](repeating: 0, count: 32)]
        let o = DigestOrigin(given: [], reprDigest: shaField, digest: nil, contentMD5: nil)
        let error = #expect(throws: SeggetError.self) {
            _ = try Download.checkDigests(got, expected: [sha], name: "f", afterMismatch: "Discarded.", origin: o)
        }
        #expect(error?.message == "SHA-256 mismatch for f: expected \(sha.hex) (from the server's Repr-Digest field), got \(String(repeating: "00", count: 32)). Discarded. Where the server's Repr-Digest field is what is wrong, --no-verify downloads without checking it.")
    }
}

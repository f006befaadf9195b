import Testing

@testable import SeggetVerify

@Suite struct ServerDigestsTests {
    /// The representation used throughout RFC 9530's examples.
    static let helloWorld = Array(#"{"hello": "world"}"#.utf8)
    static let sha256Base64 = "X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE="
    static let sha512Base64 =
        "WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew=="
    static let md5Base64 = "Sd/dVLAcvNLSq16eXua5uQ=="

    static func digest(_ algorithm: DigestAlgorithm, of bytes: [UInt8]) -> ExpectedDigest? {
        let digester = Digester(algorithm)
        digester.update(bytes)
        return ExpectedDigest(algorithm: algorithm, bytes: digester.finalize())
    }

    static func parse(repr: String? = nil, digest: String? = nil, md5: String? = nil) -> [ExpectedDigest] {
        ServerDigests.parse(reprDigest: repr, digest: digest, contentMD5: md5)
    }

    @Test func rfc9530SHA256Example() {
        let found = Self.parse(repr: "sha-256=:\(Self.sha256Base64):")
        #expect(found == [Self.digest(.sha256, of: Self.helloWorld)].compactMap { $0 })
    }

    @Test func rfc9530SHA512AndSHA256WithParameters() {
        let field =
            "sha-512=:\(Self.sha512Base64):;q=1, "
            + "sha-256=:\(Self.sha256Base64):;foo=bar;ok;n=-1.5, md5=:\(Self.md5Base64):"
        let found = Self.parse(repr: field)
        #expect(found.map(\.algorithm) == [.sha256, .md5])
        #expect(found.first == Self.digest(.sha256, of: Self.helloWorld))
        #expect(found.last == Self.digest(.md5, of: Self.helloWorld))
    }

    @Test func reprDigestOtherValueTypesAndUnknownKeys() {
        // Strings with commas, inner lists, tokens, booleans and unknown algorithms are skipped over.
        let field = #"unixsum="a, b", sha=(1 2);x, id-sha-256=?1, sha-256=:\#(Self.sha256Base64):, foo=bar/baz"#
        #expect(Self.parse(repr: field).map(\.algorithm) == [.sha256])
        // Unpadded base64 is accepted in byte sequences; upper-case keys are tolerated.
        let unpadded = "SHA-256=:\(Self.sha256Base64.dropLast()):"
        #expect(Self.parse(repr: unpadded) == [Self.digest(.sha256, of: Self.helloWorld)].compactMap { $0 })
        // The last value of a repeated key wins.
        let repeated = "sha-256=:\(Self.sha512Base64):, sha-256=:\(Self.sha256Base64):"
        #expect(Self.parse(repr: repeated).count == 1)
    }

    @Test(arguments: [
        "sha-256=:not base64!:",  // bad base64: member ignored
        "sha-256=:\(md5Base64):",  // wrong length for SHA-256
        "md5=:\(sha256Base64):",  // wrong length for MD5
        "sha-256=:\(sha256Base64)",  // unterminated byte sequence: whole field ignored
        "sha-256=:\(sha256Base64):,",  // trailing comma
        "sha-256=:\(sha256Base64): garbage",
        "sha-256=\(sha256Base64)",  // a token, not a byte sequence
        "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPF=:",  // non-zero padding bits
        "",
        ",",
        "=",
    ])
    func malformedReprDigestYieldsNothing(field: String) {
        #expect(Self.parse(repr: field).isEmpty)
    }

    @Test func badMemberDoesNotSpoilGoodOne() {
        let field = "md5=:!!!!:, sha-256=:\(Self.sha256Base64):"
        #expect(Self.parse(repr: field).map(\.algorithm) == [.sha256])
    }

    @Test func rfc3230Digest() {
        let found = Self.parse(digest: "SHA-256=\(Self.sha256Base64), MD5=\(Self.md5Base64)")
        #expect(
            found
                == [Self.digest(.sha256, of: Self.helloWorld), Self.digest(.md5, of: Self.helloWorld)].compactMap { $0 }
        )
        // Case-insensitive names, unknown algorithms (SHA is SHA-1) skipped, white space tolerated.
        let mixed = Self.parse(digest: "sha=qUqP5cyxm6YcTAhz05Hph5gvu9M= ,  md5 = \(Self.md5Base64) ,UNIXsum=30637")
        #expect(mixed == [Self.digest(.md5, of: Self.helloWorld)].compactMap { $0 })
        // Hex instead of base64, as some servers send.
        let hex = Self.parse(digest: "SHA-256=5f8f04f6a3a892aaabbddb6cf273894493773960d4a325b105fee46eef4304f1")
        #expect(hex == [Self.digest(.sha256, of: Self.helloWorld)].compactMap { $0 })
    }

    @Test(arguments: ["SHA-256=", "SHA-256=abc", "MD5=\(sha256Base64)", "SHA-256", "SHA-256=@@@@", ", ,"])
    func malformedDigestYieldsNothing(field: String) {
        #expect(Self.parse(digest: field).isEmpty)
    }

    @Test func contentMD5() {
        // RFC 1864's example value is base64 of the 16 bytes "Check Integrity!".
        let found = Self.parse(md5: " Q2hlY2sgSW50ZWdyaXR5IQ== ")
        #expect(found.map(\.bytes) == [Array("Check Integrity!".utf8)])
        #expect(Self.parse(md5: Self.sha256Base64).isEmpty)
        #expect(Self.parse(md5: "Q2hlY2sgSW50ZWdyaXR5IQ").count == 1)  // unpadded
        #expect(Self.parse(md5: "Q2hlY2sgSW50ZWdyaXR5IQ=").isEmpty)  // wrong padding
        #expect(Self.parse(md5: "").isEmpty)
    }

    @Test func allHeadersTogetherAreDeduplicated() {
        let found = Self.parse(
            repr: "sha-256=:\(Self.sha256Base64):",
            digest: "SHA-256=\(Self.sha256Base64), MD5=\(Self.md5Base64)",
            md5: Self.md5Base64)
        #expect(found.map(\.algorithm) == [.sha256, .md5])
        #expect(Self.parse().isEmpty)
    }

    @Test func base64Decoder() {
        #expect(Base64.decode("") == [])
        #expect(Base64.decode("Zg==") == Array("f".utf8))
        #expect(Base64.decode("Zm8=") == Array("fo".utf8))
        #expect(Base64.decode("Zm9v") == Array("foo".utf8))
        #expect(Base64.decode("Zm9vYg") == Array("foob".utf8))
        #expect(Base64.decode("Zm9vYmE=") == Array("fooba".utf8))
        #expect(Base64.decode("Zm9vYmFy") == Array("foobar".utf8))
        for bad in ["Z", "Zg===", "Zm9v=", "Zh==", "Zm 9v", "Zm9v\n", "Zm-_", "=Zm9", "Zg=a"] {
            #expect(Base64.decode(bad[...]) == nil, "\(bad)")
        }
    }

    /// Thousands of random and mutated header values: nothing crashes or hangs, and everything returned has the
    /// algorithm's length.
    @Test func fuzzNeverCrashesAndReturnsRightLengths() {
        var generator = SeededGenerator(seed: 9530)
        let seeds = [
            "sha-256=:\(Self.sha256Base64):, sha-512=:\(Self.sha512Base64):;a=1",
            "md5=:\(Self.md5Base64):, sha-256=:\(Self.sha256Base64):",
            "SHA-256=\(Self.sha256Base64), MD5=\(Self.md5Base64)",
            #"a="x\"y", b=(1 "2" :AA==:);p=?0, c=@12, d=%"t""#,
            Self.md5Base64,
        ]
        let alphabet = Array(#"sha-256md5=:;,() "\?*@%./+_ABZaz09é"#)
        var found = 0
        for round in 0..<6000 {
            var text: [Character]
            if round % 3 == 0 {
                // Pure noise from a structural alphabet.
                text = (0..<Int.random(in: 0...60, using: &generator)).map { _ in
                    alphabet.randomElement(using: &generator) ?? " "
                }
            } else {
                // A valid field with a few insertions, deletions and substitutions.
                text = Array(seeds.randomElement(using: &generator) ?? "")
                for _ in 0..<Int.random(in: 1...4, using: &generator) where !text.isEmpty {
                    let index = Int.random(in: 0..<text.count, using: &generator)
                    let replacement = alphabet.randomElement(using: &generator) ?? " "
                    switch Int.random(in: 0..<3, using: &generator) {
                    case 0: text.insert(replacement, at: index)
                    case 1: text.remove(at: index)
                    default: text[index] = replacement
                    }
                }
            }
            let value = String(text)
            let digests = ServerDigests.parse(reprDigest: value, digest: value, contentMD5: value)
            for digest in digests {
                #expect(digest.bytes.count == digest.algorithm.digestLength)
            }
            found += digests.count
        }
        // The mutations leave many fields valid, so the parser must still be finding digests.
        #expect(found > 100)
    }
}

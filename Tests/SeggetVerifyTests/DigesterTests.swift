import Testing

@testable import SeggetVerify

@Suite struct DigesterTests {
    /// FIPS 180-2 / RFC 1321 known answers: (algorithm, input, expected hex).
    static let knownAnswers: [(DigestAlgorithm, String, String)] = [
        (.sha256, "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (.sha256, "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (.md5, "", "d41d8cd98f00b204e9800998ecf8427e"),
        (.md5, "abc", "900150983cd24fb0d6963f7d28e17f72"),
    ]

    @Test(arguments: 0..<4)
    func shortKnownAnswers(index: Int) {
        let (algorithm, input, expected) = Self.knownAnswers[index]
        let digester = Digester(algorithm)
        digester.update(Array(input.utf8))
        let digest = digester.finalize()
        #expect(digest.count == algorithm.digestLength)
        #expect(hexString(digest) == expected)
    }

    @Test(arguments: [
        (DigestAlgorithm.sha256, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
        (DigestAlgorithm.md5, "7707d6ae4e027c70eea2a935c2296f21"),
    ])
    func oneMillionAs(algorithm: DigestAlgorithm, expected: String) {
        let input = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        let oneShot = Digester(algorithm)
        oneShot.update(input)
        #expect(hexString(oneShot.finalize()) == expected)

        // The same input a byte, then 999 bytes, at a time.
        let pieces = Digester(algorithm)
        var offset = 0
        var size = 1
        while offset < input.count {
            let end = min(offset + size, input.count)
            input[offset..<end].withUnsafeBytes { pieces.update($0) }
            offset = end
            size = size == 1 ? 999 : 1
        }
        #expect(hexString(pieces.finalize()) == expected)
    }

    @Test func finalizeStartsOver() {
        let digester = Digester(.sha256)
        digester.update(Array("abc".utf8))
        _ = digester.finalize()
        #expect(hexString(digester.finalize()) == Self.knownAnswers[0].2)
        digester.update(Array("abc".utf8))
        #expect(hexString(digester.finalize()) == Self.knownAnswers[1].2)
    }

    @Test func emptyBufferIsHarmless() {
        let digester = Digester(.md5)
        digester.update(UnsafeRawBufferPointer(start: nil, count: 0))
        digester.update([])
        #expect(hexString(digester.finalize()) == "d41d8cd98f00b204e9800998ecf8427e")
    }

    @Test func algorithmProperties() {
        #expect(DigestAlgorithm.sha256.digestLength == 32)
        #expect(DigestAlgorithm.md5.digestLength == 16)
        #expect(DigestAlgorithm.sha256.displayName == "SHA-256")
        #expect(DigestAlgorithm.md5.displayName == "MD5")
        #expect(DigestAlgorithm(rawValue: "sha256") == .sha256)
        #expect(hexString([0x00, 0x0F, 0xA0, 0xFF]) == "000fa0ff")
        #expect(hexString([]) == "")
    }

    /// 64 MiB of a pseudo-random pattern fed in odd-sized pieces must match the one-shot digest, `digestFile`,
    /// and coreutils run on the same bytes.
    @Test func largeStreamedInputMatchesOneShotAndCoreutils() throws {
        let data = patternBytes(count: 64 << 20, seed: 0x5E66E7)
        let directory = try TemporaryDirectory()
        let path = try directory.write(data, named: "pattern.bin")
        let fromFile = try digestFile(path: path, algorithms: [.sha256, .md5])

        for (algorithm, tool) in [(DigestAlgorithm.sha256, "sha256sum"), (.md5, "md5sum")] {
            let oneShot = Digester(algorithm)
            oneShot.update(data)
            let expected = oneShot.finalize()

            let streamed = Digester(algorithm)
            let sizes = [1, 7, 4093, 65537, 3, 1 << 20 | 5, 131_071]
            var offset = 0
            var turn = 0
            data.withUnsafeBytes { all in
                while offset < all.count {
                    let end = min(offset + sizes[turn % sizes.count], all.count)
                    streamed.update(UnsafeRawBufferPointer(rebasing: all[offset..<end]))
                    offset = end
                    turn += 1
                }
            }
            #expect(streamed.finalize() == expected)
            #expect(fromFile[algorithm] == expected)
            #expect(try coreutilsDigest(tool: tool, path: path) == hexString(expected))
        }
    }

    @Test func digestFileOfEmptyAndMissingFiles() throws {
        let directory = try TemporaryDirectory()
        let empty = try directory.write([], named: "empty")
        let digests = try digestFile(path: empty, algorithms: [.md5, .sha256, .md5])
        #expect(digests.count == 2)
        #expect(digests[.sha256].map(hexString) == Self.knownAnswers[0].2)
        #expect(digests[.md5].map(hexString) == Self.knownAnswers[2].2)

        let missing = directory.path("missing")
        #expect {
            try digestFile(path: missing, algorithms: [.sha256])
        } throws: { error in
            guard let error = error as? HashingError, case .openFailed = error.code else { return false }
            return error.description.contains("missing") && error.description.contains("No such file")
        }
    }
}

import Testing

@testable import segget

/// Arguments that are not UTF-8 are refused before Swift turns their odd bytes into U+FFFD (which
/// saved `-o $'caf\xe9.bin'` as `caf�.bin`).
@Suite struct RawArgumentsTests {
    @Test func theFirstArgumentThatIsNotUTF8IsNamed() {
        let ok: [[UInt8]] = [Array("-o".utf8), Array("café.bin".utf8), Array("http://h/€".utf8), []]
        #expect(RawArguments.firstNotUTF8(ok) == nil)
        let latin1: [[UInt8]] = [Array("-o".utf8), [0x63, 0x61, 0x66, 0xE9, 0x2E, 0x62, 0x69, 0x6E], Array("x".utf8)]
        let bad = RawArguments.firstNotUTF8(latin1)
        #expect(bad?.position == 2 && bad?.shown == "caf\\xe9.bin")
    }

    /// The daemon's token on the command line is found in both forms, and only before a `--`.
    @Test func theSecretValuesAreFound() {
        func find(_ args: [String]) -> [Int] {
            RawArguments.secretValues(args.map { Array($0.utf8) }).map { $0.index * 100 + $0.offset }
        }
        #expect(find(["daemon", "--rpc-secret", "s3"]) == [200])
        #expect(find(["ls", "--rpc-secret=s3", "--rpc-port", "1"]) == [113])
        #expect(find(["daemon", "--rpc-secret"]) == [])
        #expect(find(["daemon", "--rpc-secret-file", "/p", "--rpc-secret="]) == [])
        #expect(find(["daemon", "--rpc-secret=", "--rpc-secret", "x"]) == [300])
        #expect(find(["x", "--", "--rpc-secret", "s"]) == [])
        #expect(find(["--rpc-secret", "--rpc-secret", "--rpc-secret=t"]) == [100, 213])
    }

    @Test(arguments: [
        ([0xFF], "\\xff"),
        ([0xC3], "\\xc3"),  // a character cut short
        ([0xC3, 0xA9, 0xE9], "é\\xe9"),
        ([0xC0, 0xAF], "\\xc0\\xaf"),  // an overlong slash
        ([0xED, 0xA0, 0x80], "\\xed\\xa0\\x80"),  // a surrogate
        ([0x61, 0x1B, 0x62], "a\\x1bb"),  // a control character among others
        ([0xF0, 0x9F, 0x98, 0x80, 0x80], "😀\\x80"),
    ] as [([UInt8], String)])
    func oddBytesAreShownAsEscapes(_ bytes: [UInt8], _ shown: String) {
        #expect(RawArguments.shown(bytes) == shown)
    }
}

import Testing

@testable import SeggetRPC

/// A generator that replays bytes, for reproducible tokens.
struct ReplayGenerator: RandomNumberGenerator {
    var state: UInt64 = 0
    mutating func next() -> UInt64 {
        defer { state &+= 0x0101_0101_0101_0101 }
        return state
    }
}

/// The token file's rules: new tokens, default place, accepted contents and permissions, and the text
/// `segget token` prints.
@Suite struct RPCTokenTests {
    @Test func newTokensAre128BitsOfHex() {
        let token = RPCToken.generate()
        #expect(token.count == 32)
        #expect(token.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(RPCToken.generate() != token)
        var g = ReplayGenerator()
        let fixed = RPCToken.generate(using: &g)
        #expect(fixed.count == 32)
        var h = ReplayGenerator()
        #expect(RPCToken.generate(using: &h) == fixed)
    }

    @Test func defaultPathIsInTheStateDirectory() {
        #expect(RPCToken.defaultPath(xdgStateHome: "/s", home: "/h") == "/s/segget/rpc-secret")
        #expect(RPCToken.defaultPath(xdgStateHome: "relative", home: "/h") == "/h/.local/state/segget/rpc-secret")
        #expect(RPCToken.defaultPath(xdgStateHome: nil, home: "/h") == "/h/.local/state/segget/rpc-secret")
    }

    @Test func parsingTakesOneTokenWithoutSurroundingSpace() throws {
        #expect(try RPCToken.parse(Array("abc\n".utf8)).get() == "abc")
        #expect(try RPCToken.parse(Array("  abc \r\n\n".utf8)).get() == "abc")
        #expect(try RPCToken.parse(Array("s3cret!-_~".utf8)).get() == "s3cret!-_~")
        #expect(RPCToken.parse([]) == .failure(.empty))
        #expect(RPCToken.parse(Array(" \n\n".utf8)) == .failure(.empty))
        #expect(RPCToken.parse(Array("a b".utf8)) == .failure(.notPrintable))
        #expect(RPCToken.parse(Array("a\nb".utf8)) == .failure(.notPrintable))
        #expect(RPCToken.parse([0x61, 0x00]) == .failure(.notPrintable))
        #expect(RPCToken.parse(Array("é".utf8)) == .failure(.notPrintable))
        #expect(RPCToken.parse(Array(repeating: 0x61, count: 1025)) == .failure(.tooLong))
        #expect(try RPCToken.parse(Array(repeating: 0x61, count: 1024) + [10]).get().count == 1024)
        #expect(RPCToken.parse(Array(repeating: 0x61, count: 5000)) == .failure(.tooLong))
    }

    @Test func onlyTheOwnerMayReadTheFile() {
        #expect(RPCToken.check(permissions: 0o600) == nil)
        #expect(RPCToken.check(permissions: 0o400) == nil)
        #expect(RPCToken.check(permissions: 0o700) == nil)
        #expect(RPCToken.check(permissions: 0o640) == .readableByOthers(permissions: 0o640))
        #expect(RPCToken.check(permissions: 0o604) == .readableByOthers(permissions: 0o604))
        #expect(RPCToken.check(permissions: 0o602) == .readableByOthers(permissions: 0o602))
        let text = RPCToken.Problem.readableByOthers(permissions: 0o644).describe(path: "/s/rpc-secret")
        #expect(text.contains("mode 644") && text.contains("chmod 600 /s/rpc-secret"))
    }

    @Test func connectionTextNamesWhatToPaste() {
        let text = RPCToken.connectionText(token: "abc", host: "127.0.0.1", port: 6801, source: "from /s")
        #expect(text.contains("token:       abc"))
        #expect(text.contains("ws://127.0.0.1:6801/jsonrpc"))
        #expect(text.contains("http://127.0.0.1:6801/jsonrpc"))
        #expect(text.contains("aria2p --host http://127.0.0.1 --port 6801 --secret abc show"))
        #expect(text.contains("index.html?host=127.0.0.1&port=6801&token=abc"))
        #expect(text.contains("secret token abc"))
        let v6 = RPCToken.connectionText(token: nil, host: "::1", port: 6800, source: "none")
        #expect(v6.contains("ws://[::1]:6800/jsonrpc"))
        #expect(v6.contains("token:       none"))
        #expect(!v6.contains("--secret"))
    }
}

import Foundation
import Testing

@testable import SeggetRPC

/// aria2's JSON-RPC over GET as a value: the query and the POST body it stands for.
@Suite struct RPCGetRequestTests {
    /// `text` in base64 (the target's `base64`, from Aria2MetalinkTests).
    static func base64(_ text: String) -> String { SeggetRPCTests.base64(Array(text.utf8)) }

    static func body(_ query: String) -> JSON? {
        guard case .success(let r) = RPCGetRequest.parse(query: Substring(query)) else { return nil }
        return try? JSON.parse(r.body)
    }

    @Test func aCallWithItsIdAsAString() throws {
        let p = Self.base64(#"["token:t",["http://a/b"],{"dir":"/x"}]"#)
        let json = try #require(Self.body("method=aria2.addUri&id=42&params=\(p)"))
        #expect(json["method"] == .string("aria2.addUri"))
        #expect(json["id"] == .string("42"))
        #expect(json["jsonrpc"] == .string("2.0"))
        #expect(json["params"] == .array([.string("token:t"), .array([.string("http://a/b")]), .object([("dir", .string("/x"))])]))
        // No params: an empty list, as aria2 takes it.
        #expect(Self.body("method=system.listMethods&id=1")?["params"] == .array([]))
    }

    @Test func escapesAndPlusSigns() throws {
        // `>>>` encodes to "Pj4+": its `+` sent bare arrives as a space and must still decode.
        let p = Self.base64(#"[">>>?"]"#)
        #expect(p.contains("+") || p.contains("/"))
        for sent in [p, p.replacingOccurrences(of: "+", with: "%2B").replacingOccurrences(of: "/", with: "%2F").replacingOccurrences(of: "=", with: "%3D")] {
            #expect(Self.body("method=m&id=%41%20b&params=\(sent)")?["params"] == .array([.string(">>>?")]), "\(sent)")
            #expect(Self.body("method=m&id=%41%20b&params=\(sent)")?["id"] == .string("A b"))
        }
        #expect(RPCGetRequest.percentDecoded("%4g%%41%") == "%4g%A%")
        #expect(RPCGetRequest.percentDecoded("a+b%2Bc") == "a b+c")
    }

    @Test func aBatchIsTheParamsThemselves() throws {
        let batch = #"[{"method":"a","id":1},{"method":"b","id":"2","params":[]}]"#
        let json = try #require(Self.body("params=\(Self.base64(batch))"))
        #expect(json == (try JSON.parse(Array(batch.utf8))))
        // The first of a repeated field counts.
        #expect(Self.body("method=first&method=second&id=1")?["method"] == .string("first"))
    }

    @Test(arguments: [
        ("", RPCError.invalidRequest), ("id=1", .invalidRequest), ("method=m", .invalidRequest),
        ("method=m&id=1&params=!!", .invalidRequest), ("method=m&id=1&params=YQ", .parse),
        ("jsoncallback=f", .invalidRequest),
    ])
    func invalidRequests(_ query: String, _ error: RPCError) {
        let callback: String? = query.hasPrefix("jsoncallback") ? "f" : nil
        #expect(RPCGetRequest.parse(query: Substring(query)) == .failure(.reply(error, callback: callback)), "\(query)")
    }

    @Test func jsonpCallbacksAreJavaScriptNames() throws {
        let p = Self.base64("[]")
        guard case .success(let r) = RPCGetRequest.parse(query: Substring("method=m&id=1&params=\(p)&jsoncallback=$.ui_2.cb")) else {
            Issue.record("a name was refused")
            return
        }
        #expect(r.callback == "$.ui_2.cb")
        #expect(RPCGetRequest.wrap(Array("{}".utf8), callback: r.callback) == Array("$.ui_2.cb({})".utf8))
        #expect(RPCGetRequest.wrap(Array("{}".utf8), callback: nil) == Array("{}".utf8))
        for bad in ["a%3Balert(1)", "", "1a", ".a", "a(b)", "a%20b", "a%0A", "%E2%80%A8", String(repeating: "a", count: 129), "a-b", "a/b"] {
            #expect(RPCGetRequest.parse(query: Substring("method=m&id=1&params=\(p)&jsoncallback=\(bad)")) == .failure(.badCallback), "\(bad)")
        }
        #expect(RPCGetRequest.isJavaScriptName(String(repeating: "a", count: 128)))
    }
}

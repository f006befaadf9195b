import Testing

@testable import SeggetRPC

/// Answers `echo` with its parameters and `fail` with a code-1 error: enough to see what the
/// envelope hands through and how it wraps results.
struct EchoHandler: RPCMethodHandler {
    func handle(_ call: RPCCall) throws(RPCError) -> JSON {
        switch call.method {
        case "echo", "system.listMethods": return .array(call.params)
        case "fail": throw .failed("it failed")
        default: throw .methodNotFound(call.method)
        }
    }
}

@Suite struct RPCProcessorTests {
    let open = RPCProcessor(secret: nil, handler: EchoHandler())
    let locked = RPCProcessor(secret: "s3cret", handler: EchoHandler())

    func reply(_ p: RPCProcessor, _ text: String) -> JSON { p.respond(to: Array(text.utf8)) }

    @Test func singleCallResult() {
        #expect(
            reply(open, #"{"jsonrpc":"2.0","id":7,"method":"echo","params":[1,"a"]}"#).serialized
                == #"{"id":7,"jsonrpc":"2.0","result":[1,"a"]}"#)
    }

    @Test func missingParamsIsEmpty() {
        #expect(reply(open, #"{"id":"q","method":"echo"}"#)["result"] == .array([]))
    }

    @Test func parseError() {
        #expect(
            reply(open, "{nope").serialized
                == #"{"id":null,"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error."}}"#)
        #expect(reply(open, "")["error"]?["code"] == .int(-32700))
    }

    @Test(arguments: ["[]", "5", "\"x\"", "[5]", #"{"id":1}"#, #"{"id":1,"method":3}"#])
    func invalidRequest(_ text: String) {
        let r = reply(open, text)
        let error = r.arrayValue?.first?["error"] ?? r["error"]
        #expect(error?["code"] == .int(-32600))
    }

    @Test func paramsMustBeAnArray() {
        #expect(reply(open, #"{"id":1,"method":"echo","params":{"a":1}}"#)["error"]?["code"] == .int(-32602))
    }

    @Test func unknownMethod() {
        let e = reply(open, #"{"id":1,"method":"aria2.nothing"}"#)["error"]
        #expect(e?["code"] == .int(-32601))
        #expect(e?["message"] == .string("No such method: aria2.nothing"))
    }

    @Test func batchAnswersEachInOrder() {
        let r = reply(
            open, #"[{"id":1,"method":"echo","params":[1]},{"id":2,"method":"fail"},7,{"id":3,"method":"echo"}]"#)
        let items = r.arrayValue ?? []
        #expect(items.count == 4)
        #expect(items[0]["result"] == .array([.int(1)]))
        #expect(items[1]["error"]?["code"] == .int(1))
        #expect(items[1]["id"] == .int(2))
        #expect(items[2]["error"]?["code"] == .int(-32600))
        #expect(items[3]["id"] == .int(3))
    }

    @Test func tokenIsCheckedAndStripped() {
        #expect(reply(locked, #"{"id":1,"method":"echo","params":["token:s3cret",5]}"#)["result"] == .array([.int(5)]))
        for bad in [#"["token:s3cre",5]"#, #"["token:s3cretX",5]"#, #"["token:",5]"#, #"[5]"#, "[]", #"["s3cret"]"#] {
            let e = reply(locked, #"{"id":1,"method":"echo","params":"# + bad + "}")["error"]
            #expect(e == .object([("code", .int(1)), ("message", .string("Unauthorized"))]), "params \(bad)")
        }
    }

    @Test func tokenWithoutSecretIsIgnored() {
        #expect(reply(open, #"{"id":1,"method":"echo","params":["token:anything",5]}"#)["result"] == .array([.int(5)]))
    }

    @Test func listMethodsNeedsNoToken() {
        #expect(reply(locked, #"{"id":1,"method":"system.listMethods"}"#)["result"] == .array([]))
    }

    @Test func multicallWrapsResultsAndChecksEachToken() {
        let r = reply(
            locked,
            #"""
            {"id":1,"method":"system.multicall","params":[[
              {"methodName":"echo","params":["token:s3cret",1]},
              {"methodName":"echo","params":["token:wrong",2]},
              {"methodName":"fail","params":["token:s3cret"]},
              {"methodName":"system.multicall","params":[[]]},
              {"params":[]}
            ]]}
            """#)
        let items = r["result"]?.arrayValue ?? []
        #expect(items.count == 5)
        #expect(items[0] == .array([.array([.int(1)])]))
        #expect(items[1] == .object([("code", .int(1)), ("message", .string("Unauthorized"))]))
        #expect(items[2]["code"] == .int(1))
        #expect(items[3]["code"] == .int(1))
        #expect(items[4]["code"] == .int(-32600))
    }

    @Test func multicallNeedsAnArray() {
        #expect(reply(open, #"{"id":1,"method":"system.multicall","params":[5]}"#)["error"]?["code"] == .int(-32602))
    }

    @Test func constantTimeCompare() {
        func eq(_ a: String, _ b: String?) -> Bool {
            RPCProcessor.constantTimeEqual(Array(a.utf8), b.map { Array($0.utf8) })
        }
        #expect(eq("abc", "abc"))
        #expect(!eq("abd", "abc"))
        #expect(!eq("ab", "abc"))
        #expect(!eq("abcd", "abc"))
        #expect(!eq("", "abc"))
        #expect(eq("anything", nil))
    }

    @Test func emptySecretMeansNone() {
        let p = RPCProcessor(secret: "", handler: EchoHandler())
        #expect(reply(p, #"{"id":1,"method":"echo","params":[5]}"#)["result"] == .array([.int(5)]))
    }
}

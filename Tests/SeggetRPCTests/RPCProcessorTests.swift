import Synchronization
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

/// Echoes as `EchoHandler` does and counts the calls that reached it.
final class CountingHandler: RPCMethodHandler {
    let calls = Atomic<Int>(0)
    func handle(_ call: RPCCall) throws(RPCError) -> JSON {
        calls.add(1, ordering: .relaxed)
        return .array(call.params)
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

    @Test(arguments: ["5", "\"x\"", "[5]", #"{"id":1}"#, #"{"id":1,"method":3}"#, #"{"method":"echo"}"#])
    func invalidRequest(_ text: String) {
        let r = reply(open, text)
        let error = r.arrayValue?.first?["error"] ?? r["error"]
        #expect(error?["code"] == .int(-32600))
    }

    /// The HTTP status of each reply, as aria2 1.36 sends it (measured against aria2c by
    /// scripts/tests/daemon-aria2-fields.sh): a result or any batch 200, one call's error 400, a
    /// body that is not JSON or `params` that are not an array 500.
    @Test(arguments: [
        (#"{"id":1,"method":"echo"}"#, 200), (#"{"id":1,"method":"fail"}"#, 400), (#"{"id":1,"method":"nope"}"#, 400),
        (#"{"id":1,"method":"echo","params":{}}"#, 500),
        (#"{"id":1}"#, 400), ("[]", 200), ("5", 400), ("{nope", 500), ("", 500), (#"{"method":"echo"}"#, 400),
        (#"[{"id":1,"method":"fail"},{"id":2,"method":"echo"}]"#, 200), (#"[{"id":1,"method":"fail"}]"#, 200),
    ])
    func httpStatusIsAria2s(_ text: String, _ status: Int) {
        #expect(open.reply(to: Array(text.utf8)).httpStatus == status, "\(text)")
        if status == 200, !text.hasPrefix("[") {
            #expect(locked.reply(to: Array(text.utf8)).httpStatus == 400, "unauthorized: \(text)")
        }
    }

    /// As aria2c 1.36 answers them (tried by hand): an empty batch is `[]` with 200; a call without
    /// an `id` is refused with -32600 and a null id, and is not run; `"id": null` is an id.
    @Test func emptyBatchesAndCallsWithoutAnID() {
        #expect(reply(open, "[]").serialized == "[]")
        #expect(reply(open, " [ ] ").serialized == "[]")
        let counting = CountingHandler()
        let p = RPCProcessor(secret: nil, handler: counting)
        let refused = p.respond(to: Array(#"{"jsonrpc":"2.0","method":"echo","params":[1]}"#.utf8))
        #expect(refused.serialized == #"{"id":null,"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request."}}"#)
        #expect(counting.calls.load(ordering: .relaxed) == 0)
        let batch = p.respond(to: Array(#"[{"method":"echo"},{"id":2,"method":"echo"}]"#.utf8)).arrayValue ?? []
        #expect(batch.count == 2 && batch[0]["error"]?["code"] == .int(-32600) && batch[1]["result"] == .array([]))
        #expect(counting.calls.load(ordering: .relaxed) == 1)
        #expect(p.respond(to: Array(#"{"id":null,"method":"echo"}"#.utf8))["result"] == .array([]))
        #expect(counting.calls.load(ordering: .relaxed) == 2)
    }

    @Test func paramsMustBeAnArray() {
        #expect(reply(open, #"{"id":1,"method":"echo","params":{"a":1}}"#)["error"]?["code"] == .int(-32602))
    }

    @Test func unknownMethod() {
        let e = reply(open, #"{"id":1,"method":"aria2.nothing"}"#)["error"]
        #expect(e?["code"] == .int(1))
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
        #expect(items[4] == .object([("code", .int(1)), ("message", .string("Missing methodName."))]))
    }

    @Test func wrongTokensAreCountedForTheThrottle() {
        func failures(_ text: String) -> Int { locked.reply(to: Array(text.utf8)).unauthorized }
        #expect(failures(#"{"id":1,"method":"echo","params":["token:s3cret"]}"#) == 0)
        #expect(failures(#"{"id":1,"method":"echo","params":["token:nope"]}"#) == 1)
        #expect(failures(#"{"id":1,"method":"echo"}"#) == 1)
        #expect(failures(#"{"id":1,"method":"system.listMethods"}"#) == 0)
        #expect(failures(#"{"id":1,"method":"nosuch","params":["token:s3cret"]}"#) == 0)
        #expect(failures("garbage") == 0)
        #expect(
            failures(
                #"[{"id":1,"method":"echo","params":["token:a"]},{"id":2,"method":"echo","params":["token:s3cret"]},{"id":3,"method":"echo"}]"#
            )
                == 2)
        #expect(
            failures(
                #"{"id":1,"method":"system.multicall","params":[[{"methodName":"echo","params":["token:a"]},{"methodName":"echo","params":["token:b"]},{"methodName":"echo","params":["token:s3cret"]}]]}"#
            ) == 2)
        #expect(open.reply(to: Array(#"{"id":1,"method":"echo"}"#.utf8)).unauthorized == 0)
    }

    @Test func multicallNeedsAnArray() {
        #expect(reply(open, #"{"id":1,"method":"system.multicall","params":[5]}"#)["error"]?["code"] == .int(1))
    }

    /// Each entry of a multicall that is not a call fails alone, with code 1 and aria2c's words.
    @Test func multicallEntriesThatAreNotCalls() {
        let r = reply(open, #"{"id":1,"method":"system.multicall","params":[[5,{"params":[]},{"methodName":"echo","params":[2]}]]}"#)
        let items = r["result"]?.arrayValue ?? []
        #expect(items.count == 3)
        #expect(items.first?["code"] == .int(1))
        #expect(items.first?["message"] == .string("system.multicall expected struct."))
        #expect(items.dropFirst().first?["code"] == .int(1))
        #expect(items.dropFirst().first?["message"] == .string("Missing methodName."))
        #expect(items.last == .array([.array([.int(2)])]))
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

/// A small deterministic generator, so that a failing input can be reproduced from the seed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct RPCProcessorFuzzTests {
    /// Mutated and truncated requests never crash the processor, and every reply is a JSON-RPC
    /// object (or a batch of them) that parses back.
    @Test func mutatedRequestsAlwaysGetAReply() throws {
        let processor = RPCProcessor(secret: "s", handler: EchoHandler())
        let seeds = [
            #"{"jsonrpc":"2.0","id":1,"method":"echo","params":["token:s",[1,2,{"a":"b"}],"x\u00e9"]}"#,
            #"[{"id":1,"method":"echo"},{"id":"2","method":"system.multicall","params":[[{"methodName":"echo","params":["token:s"]}]]}]"#,
            #"{"id":null,"method":"fail","params":["token:s",1.5e3,-7,true,false,null]}"#,
        ].map { Array($0.utf8) }
        var rng = SplitMix(state: 14)
        let alphabet = Array(#"{}[]",:\"0123456789.eE-+tfnul abc\u"#.utf8) + [0, 0xFF, 0xC3, 0x0A]
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let i = Int.random(in: 0...bytes.count, using: &rng)
                switch Int.random(in: 0..<4, using: &rng) {
                case 0 where i < bytes.count: bytes.remove(at: i)
                case 1: bytes.insert(alphabet.randomElement(using: &rng) ?? 0, at: i)
                case 2 where i < bytes.count: bytes[i] = alphabet.randomElement(using: &rng) ?? 0
                default: bytes = Array(bytes.prefix(i))
                }
            }
            let reply = processor.respond(to: bytes)
            let replies = reply.arrayValue ?? [reply]
            for r in replies {
                #expect(r["jsonrpc"] == .string("2.0"), "round \(round)")
                #expect((r["result"] == nil) != (r["error"] == nil), "round \(round)")
            }
            #expect(try JSON.parse(reply.serializedBytes) == reply, "round \(round)")
        }
    }
}

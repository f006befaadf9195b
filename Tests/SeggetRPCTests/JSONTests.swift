import Testing

@testable import SeggetRPC

@Suite struct JSONTests {
    @Test func parsesEveryKindOfValue() throws {
        let v = try JSON.parse(#" { "a" : [1, -2, 3.5, true, false, null, "x"], "b": {}, "c": [] } "#)
        #expect(
            v
                == .object([
                    ("a", .array([.int(1), .int(-2), .double(3.5), .bool(true), .bool(false), .null, .string("x")])),
                    ("b", .object([])), ("c", .array([])),
                ]))
    }

    @Test func numbersKeepIntegersExact() throws {
        #expect(try JSON.parse("9007199254740993") == .int(9_007_199_254_740_993))
        #expect(try JSON.parse("-0") == .int(0))
        #expect(try JSON.parse("1e3") == .double(1000))
        #expect(try JSON.parse("2.5E-1") == .double(0.25))
        #expect(try JSON.parse("99999999999999999999") == .double(1e20))
    }

    @Test func stringEscapesAndUnicode() throws {
        #expect(try JSON.parse(#""a\"b\\c\/d\n\r\t\b\f""#) == .string("a\"b\\c/d\n\r\t\u{8}\u{C}"))
        #expect(try JSON.parse(#""\u00e9\u4e2d""#) == .string("é中"))
        #expect(try JSON.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSON.parse("\"caf\u{e9}\"") == .string("café"))
    }

    @Test(arguments: [
        "", "{", "[1,", "[1 2]", "{\"a\" 1}", "{\"a\":}", "{a:1}", "\"abc", "\"\u{1}\"", "tru", "nul",
        "01x", "-", "1 2", "[1]]", "\"\\x\"", "\"\\u12\"", "{\"a\":1,}", "@",
    ])
    func rejectsMalformed(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSON.parse(text) }
    }

    @Test func refusesDeepNesting() throws {
        let ok = String(repeating: "[", count: JSON.maxDepth) + String(repeating: "]", count: JSON.maxDepth)
        _ = try JSON.parse(ok)
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSON.parse(deep) }
    }

    @Test func serialisesCompactlyWithEscapes() {
        let v = JSON.object([
            ("s", .string("q\"\\\n\u{1}é")), ("n", .int(-5)), ("d", .double(0.5)), ("b", .bool(true)), ("z", .null),
            ("a", .array([.int(1), .string("")])),
        ])
        #expect(v.serialized == #"{"s":"q\"\\\n\u0001é","n":-5,"d":0.5,"b":true,"z":null,"a":[1,""]}"#)
    }

    @Test func roundTrips() throws {
        let text = #"{"id":"x","params":["token:a",["http://h/f?q=1&r=\"2\""],{"header":["A: b"]}],"n":[1,2.25,null]}"#
        #expect(try JSON.parse(text).serialized == text)
    }

    @Test func accessors() throws {
        let v = try JSON.parse(#"{"a":"7","b":7,"c":7.0,"d":7.5,"e":[1]}"#)
        #expect(v["a"]?.intValue == 7)
        #expect(v["b"]?.intValue == 7)
        #expect(v["c"]?.intValue == 7)
        #expect(v["d"]?.intValue == nil)
        #expect(v["e"]?.arrayValue == [.int(1)])
        #expect(v["missing"] == nil)
        #expect(JSON.int(1)["a"] == nil)
    }
}

import Foundation
import SeggetTestServer
import Testing

// Issue 23: text a server chooses (a redirect's Location, a reason phrase, header values, a file name,
// the body of an error answer) reaches stderr and `--json` only escaped, as the built binary prints it.

/// What must never reach a terminal raw: C0 controls but newline, DEL, C1 controls, bidi controls.
func rawControls(in text: String) -> [String] {
    text.unicodeScalars.filter { u in
        switch u.value {
        case 0x0A: false
        case 0..<0x20, 0x7F, 0x80..<0xA0, 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }.map { "U+" + String($0.value, radix: 16) }
}

/// Every string in a JSON value, decoded (a `\u001b` in the JSON text is an ESC to its consumer).
func jsonStrings(_ value: Any) -> [String] {
    switch value {
    case let s as String: [s]
    case let a as [Any]: a.flatMap(jsonStrings)
    case let d as [String: Any]: d.keys.map { $0 } + d.values.flatMap(jsonStrings)
    default: []
    }
}

/// Percent-encodes everything but unreserved characters, for a test server parameter.
func queryValue(_ text: String) -> String {
    var out = ""
    for b in text.utf8 {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            out.unicodeScalars.append(Unicode.Scalar(b))
        default:
            out += "%" + (b < 0x10 ? "0" : "") + String(b, radix: 16, uppercase: true)
        }
    }
    return out
}

@Suite struct ServerTextCLITests {
    /// OSC 52 (write "hello" to the clipboard) and a screen clear.
    static let clipboardAndClear = "\u{1B}]52;c;aGVsbG8=\u{07}\u{1B}[2J"
    static let clipboardAndClearShown = "\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J"

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        /// The resource URL on the server at `base`.
        var url: @Sendable (TestServer) -> String
        var exitCode: Int32
        /// What the output must show of the server's text, escaped; nil where segget does not quote it.
        var shown: String?
        var testDescription: String { name }
    }

    static let body = cliTestBytes(300_000, seed: 23)

    static let cases: [Case] = [
        // The regression of issue 23: a 302 whose Location is not a URL is quoted in the message.
        Case(
            name: "redirect Location with OSC 52 and ESC[2J",
            url: { s in
                s.url(
                    "f", mode: .redirect,
                    query: "to=" + queryValue(s.baseURL + "/x" + clipboardAndClear) + "&body="
                        + queryValue(clipboardAndClear))
            },
            exitCode: 7, shown: clipboardAndClearShown),
        // A Location of C1 and bidi bytes that libcurl may accept: the URL it leads to is quoted.
        Case(
            name: "redirect Location with C1 and bidi bytes",
            url: { s in s.url("f", mode: .redirect, query: "to=" + queryValue("/missing\u{9B}31m\u{202E}gpj.exe")) },
            exitCode: 4, shown: nil),
        Case(
            name: "404 with a hostile reason phrase and body",
            url: { s in
                s.url(
                    "f", mode: .status,
                    query: "code=404&reason=" + queryValue("Not Found" + clipboardAndClear) + "&body="
                        + queryValue(clipboardAndClear + "\u{202E}"))
            },
            exitCode: 4, shown: nil),
        Case(
            name: "Content-Encoding with ESC[2J and a C1 CSI",
            url: { s in s.url("f", query: "header=" + queryValue("Content-Encoding: x\u{1B}[2J\u{9B}31m")) },
            exitCode: 0, shown: "x\\x1b[2J"),
        Case(
            name: "Content-Length with ESC[2J",
            url: { s in s.url("f", mode: .badlength, query: "value=" + queryValue("1\u{1B}[2J")) },
            exitCode: 7, shown: "\\x1b[2J"),
        Case(
            name: "Content-Disposition file name with ESC and a bidi override",
            url: { s in
                s.url(
                    "f", mode: .disposition,
                    query: "cd=" + queryValue("attachment; filename*=UTF-8''a%1B%5B2Jb%E2%80%AEgpj.exe"))
            },
            exitCode: 0, shown: nil),
    ]

    @Test(arguments: cases)
    func humanOutputShowsServerTextEscaped(_ c: Case) throws {
        let server = try startCLITestServer(["f": Self.body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let r = try SeggetCLI.run(["-n", "2", "--retries", "0", "-d", dir.path("out"), c.url(server)], timeout: 30)
        #expect(r.exitCode == c.exitCode, "\(r.stderr)")
        #expect(!r.stderr.isEmpty, "segget printed nothing (or not UTF-8)")
        #expect(
            rawControls(in: r.stderr).isEmpty,
            "raw \(rawControls(in: r.stderr)) on stderr: \(r.stderr.debugDescription)")
        if let shown = c.shown { #expect(r.stderr.contains(shown), "\(r.stderr)") }
    }

    @Test(arguments: cases)
    func jsonShowsServerTextEscaped(_ c: Case) throws {
        let server = try startCLITestServer(["f": Self.body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let r = try SeggetCLI.run(
            ["--json", "-n", "2", "--retries", "0", "-d", dir.path("out"), c.url(server)], timeout: 30)
        #expect(r.exitCode == c.exitCode, "\(r.stdout)")
        #expect(rawControls(in: r.stdout).isEmpty && rawControls(in: r.stderr).isEmpty)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(!lines.isEmpty)
        var decoded: [String] = []
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
            decoded += jsonStrings(object)
        }
        let bad = decoded.filter { !rawControls(in: $0).isEmpty || $0.contains("\n") }
        #expect(bad.isEmpty, "JSON strings that decode to control characters: \(bad.map(\.debugDescription))")
        if let shown = c.shown { #expect(decoded.contains { $0.contains(shown) }, "\(r.stdout)") }
    }
}

import SeggetCurl
import Testing

@testable import Segget

/// Server text reaches a message, a log or JSON only escaped (`ServerText`, `DisplayText`).
@Suite struct ServerTextTests {
    /// The OSC 52 clipboard write and the screen clear of issue 23's redirect.
    static let hostileLocation = "http://evil.example/\u{1B}]52;c;aGVsbG8=\u{07}\u{1B}[2J"

    /// A header line that is not UTF-8 is read as Latin-1 (`decodingLatin1`) and shown as the
    /// README says: each byte as the character it names, C1 controls escaped, so that a bidi
    /// control's UTF-8 bytes in such a line leave no bidi control.
    @Test func aHeaderLineThatIsNotUTF8ShowsAsTheREADMESays() {
        let bytes: [UInt8] = [0x78, 0xFF, 0x1B, 0xE2, 0x80, 0xAE, 0x61]
        let line = bytes.withUnsafeBytes { decodingLatin1($0) }
        let shown = "\(ServerText(line))"
        #expect(shown == "xÿ\\x1bâ\\u{80}®a")
        #expect(!shown.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x202E })
    }

    @Test func interpolationEscapesTerminalSequences() {
        let t = ServerText(Self.hostileLocation)
        let message = "redirected to '\(t)'"
        #expect(message == "redirected to 'http://evil.example/\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J'")
        #expect(!message.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        #expect("\(t)" == t.escaped)
        #expect(String(describing: t) == t.escaped)
        #expect(String(reflecting: t) == "ServerText(\(t.escaped))")
        #expect(t.unsafeRawValue == Self.hostileLocation)
    }

    @Test func dumpShowsOnlyTheEscapedText() {
        var out = ""
        dump(ServerText("a\u{1B}[2Jb"), to: &out)
        #expect(!out.contains("\u{1B}"))
        #expect(out.contains("a\\x1b[2Jb"))
    }

    @Test(arguments: [
        ("\u{0}", "\\x00"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r"), ("\u{7F}", "\\x7f"),
        ("\u{80}", "\\u{80}"), ("\u{9B}", "\\u{9b}"), ("\u{9F}", "\\u{9f}"),
        ("\u{202A}", "\\u{202a}"), ("\u{202E}", "\\u{202e}"), ("\u{2066}", "\\u{2066}"), ("\u{2069}", "\\u{2069}"),
        ("\u{200F}", "\\u{200f}"), ("\u{2028}", "\\u{2028}"), ("\\", "\\\\"),
        ("é ü 中 🙂 ~ a-z", "é ü 中 🙂 ~ a-z"),
    ])
    func eachControlIsShownVisibly(_ raw: String, _ shown: String) {
        #expect(ServerText(raw).escaped == shown)
    }

    @Test func invalidUTF8IsShownAsBytes() {
        let t = ServerText(bytes: [0x61, 0xFF, 0xC3, 0x28, 0xE2, 0x80, 0xAE, 0x62])
        #expect(t.escaped == "a\\xff\\xc3(\\u{202e}b")
    }

    @Test func aForgedEscapeStaysDistinguishable() {
        // A server that sends the text `\x1b` cannot pass it off as an escaped ESC.
        #expect(ServerText("\\x1b").escaped == "\\\\x1b")
        #expect(ServerText("\u{1B}").escaped == "\\x1b")
    }

    @Test func lengthIsBounded() {
        let long = ServerText(String(repeating: "\u{1B}", count: 10_000))
        #expect(long.escaped.unicodeScalars.count <= ServerText.displayLimit)
        #expect(long.escaped.hasSuffix("…"))
        #expect(
            ServerText(String(repeating: "a", count: ServerText.displayLimit - 1)).escaped.count == ServerText
                .displayLimit - 1)
        #expect(!ServerText(String(repeating: "a", count: ServerText.displayLimit - 1)).escaped.hasSuffix("…"))
    }

    /// The columns a batch's table pads by (exploratory run 4: `文件.bin` counted 6 and took 8).
    @Test func displayColumns() {
        #expect(DisplayText.columns("f6.bin") == 6)
        #expect(DisplayText.columns("文件.bin") == 8)
        #expect(DisplayText.columns("ファイル") == 8)
        #expect(DisplayText.columns("파일") == 4)
        #expect(DisplayText.columns("ＡＢ") == 4)  // fullwidth
        #expect(DisplayText.columns("e\u{301}te\u{301}") == 3)  // combining acute accents take none
        #expect(DisplayText.columns("a\u{200D}b") == 2)  // zero-width joiner
        #expect(DisplayText.columns("🎉") == 2)
        #expect(DisplayText.columns("🚀🫠") == 4)  // transport and later emoji blocks
        #expect(DisplayText.columns("café") == 4)
        #expect(DisplayText.columns(DisplayText.escaping("x\u{1B}y", keepingLineBreaks: false)) == 6)  // x\x1by
        #expect(DisplayText.columns("") == 0)
    }

    /// A live line is cut by the columns it takes as shown, escaped, never past `limit`.
    @Test func fittedCutsByColumnsAfterEscaping() {
        #expect(DisplayText.fitted("abcdef", columns: 4) == "abcd")
        #expect(DisplayText.fitted("abc", columns: 10) == "abc")
        #expect(DisplayText.fitted("文件名称.bin", columns: 5) == "文件")  // a third wide one would take 6
        #expect(DisplayText.fitted("文件名称.bin", columns: 6) == "文件名")
        #expect(DisplayText.fitted("a\u{1B}[2Jb", columns: 5) == "a\\x1b")  // escaped first: a\x1b[2Jb
        #expect(DisplayText.fitted("e\u{301}\u{301}x", columns: 1) == "e\u{301}\u{301}")
        #expect(DisplayText.fitted("🎉🎉", columns: 3) == "🎉")
        #expect(DisplayText.fitted("x", columns: 0) == "")
        // Every cut of a mixed line stays within its limit and is a prefix of the escaped line.
        let line = "segget: 3/9 done · 下载测试文件名称.bin 42% · \u{1B}]0;t 🎉 é"
        let escaped = DisplayText.escaping(line, keepingLineBreaks: false)
        for limit in 0...DisplayText.columns(escaped) + 2 {
            let cut = DisplayText.fitted(line, columns: limit)
            #expect(DisplayText.columns(cut) <= limit)
            #expect(escaped.hasPrefix(cut))
            #expect(DisplayText.columns(cut) >= min(limit, DisplayText.columns(escaped)) - 1)
        }
    }

    @Test func displayTextEscapesAgainWithoutChange() {
        let once = DisplayText.escaping("x \(ServerText("\u{1B}[2J\\")) \u{1B}]0;t\u{07} \u{202E}")
        #expect(once == "x \\x1b[2J\\\\ \\x1b]0;t\\x07 \\u{202e}")
        #expect(DisplayText.escaping(once) == once)
        #expect(DisplayText.escaping("two\nlines\tand a tab") == "two\nlines\tand a tab")
        #expect(DisplayText.escaping("two\nlines", keepingLineBreaks: false) == "two\\nlines")
        #expect(DisplayText.isSafe("plain text, 中文, C:\\path"))
    }

    @Test func errorMessagesAreOneSafeLine() {
        let e = SeggetError(.network, "could not reach http://x/\u{1B}[2J\nforged line \u{9B}31m")
        #expect(e.message == "could not reach http://x/\\x1b[2J\\nforged line \\u{9b}31m")
    }

    @Test func headerValuesAreServerText() {
        var h = ResponseHead()
        for line in ["HTTP/1.1 302 Found\u{1B}[2J", "Location: /a\u{1B}]52;c;eA==\u{07}", "ETag: \"\u{9B}x\"", ""] {
            h.append(line: Substring(line + "\r\n"))
        }
        let location: ServerText? = h.value("location")
        #expect(location?.unsafeRawValue == "/a\u{1B}]52;c;eA==\u{07}")
        #expect("\(location ?? "")" == "/a\\x1b]52;c;eA==\\x07")
        #expect("\(h.etag ?? "")" == "\"\\u{9b}x\"")
    }

    @Test func framingProblemsQuoteHeadersEscaped() {
        var h = ResponseHead()
        for line in ["HTTP/1.1 200 OK", "Content-Length: 1\u{1B}[2J", ""] { h.append(line: Substring(line + "\r\n")) }
        let problem = h.framingProblem
        #expect(problem == .invalidContentLength(ServerText("1\u{1B}[2J")))
        #expect(problem.map { "\($0)" } == "it carries an invalid Content-Length ('1\\x1b[2J')")
    }

    @Test func aHostileRedirectIsReportedEscaped() {
        let q = ResponseQuestion(
            range: 0..<10, ranged: true, totalLength: 10, etag: "\"a\"", lastModified: nil, url: "http://x/f")
        var h = ResponseHead()
        for line in ["HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-9/10", "ETag: \"b\u{1B}[2J\"", ""] {
            h.append(line: Substring(line + "\r\n"))
        }
        guard case .resourceChanged(let why) = ResponseVerdict(for: q, head: h) else {
            Issue.record("expected resourceChanged")
            return
        }
        #expect(why == "its ETag changed from \"a\" to \"b\\x1b[2J\"")
    }
}

/// Text that came from a server: a header value (`Location`, `Content-Type`, `ETag`…), a reason
/// phrase, the body of an error answer. The server chose every byte of it; printed as it came it could
/// drive the user's terminal (`ESC ] 52 ; c ; … BEL` writes the clipboard, `ESC [ 2 J` clears the
/// screen), turn a line around with bidi overrides or forge a line of a log.
///
/// Its only ways to a person are escaped: interpolated into a message (`description`), `escaped`,
/// a debugger's or `dump`'s view. Each control character, DEL, C1 control, bidi control and line
/// separator becomes a visible escape (`\x1b`, `\u{9b}`, `\u{202e}`), a byte that is not UTF-8
/// becomes `\xff`, a backslash becomes `\\` (so that a server cannot forge an escape), and the result
/// is at most `displayLimit` characters. A decision that needs the text as it came (a `Location` to
/// follow, a validator to compare) calls `unsafeRawValue`, which `scripts/check-architecture` allows
/// only in the files that make decisions, never inside a string interpolation.
public struct ServerText: Sendable, Hashable, ExpressibleByStringLiteral {
    private let bytes: [UInt8]

    public init(_ text: some StringProtocol) { bytes = Array(text.utf8) }
    /// Bytes as received; any that are not UTF-8 are shown as `\xNN`.
    public init(bytes: some Sequence<UInt8>) { self.bytes = Array(bytes) }
    public init(stringLiteral text: String) { self.init(text) }

    /// The most characters `escaped` shows; longer text ends in `…`.
    public static let displayLimit = 300

    /// The text as it came, for decisions only (following a redirect, parsing a field, comparing
    /// validators). Never put it in a message: interpolate the `ServerText` itself.
    public var unsafeRawValue: String { String(decoding: bytes, as: UTF8.self) }

    public var isEmpty: Bool { bytes.isEmpty }

    /// The text for a terminal, a log or JSON: escaped and bounded (see the type's comment).
    public var escaped: String {
        DisplayText.render(bytes, quotingBackslash: true, keepingLineBreaks: false, limit: Self.displayLimit)
    }
}

extension ServerText: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The escaped text: `"… \(serverText) …"` is safe to print.
    public var description: String { escaped }
    public var debugDescription: String { "ServerText(\(escaped))" }
    /// `dump` and debuggers see the escaped text only.
    public var customMirror: Mirror { Mirror(self, children: ["escaped": escaped], displayStyle: .struct) }
}

/// Making any text safe to print: the last step before stderr, a log or a JSON string, for text whose
/// origin is not known (a message that quotes a URL after redirects, a path). `ServerText` is the
/// first step, where the text is received.
public enum DisplayText {
    /// `text` with control characters (tab and, unless `keepingLineBreaks`, newline excepted), DEL, C1
    /// controls, bidi controls and line separators made visible as in `ServerText`. Backslashes are
    /// kept, so escaping text again (or text with a `ServerText` in it) changes nothing.
    public static func escaping(_ text: String, keepingLineBreaks: Bool = true) -> String {
        guard text.utf8.contains(where: { $0 < 0x20 || $0 >= 0x7F }) else { return text }
        return render(Array(text.utf8), quotingBackslash: false, keepingLineBreaks: keepingLineBreaks, limit: nil)
    }

    /// The terminal columns `text` takes (for text already escaped: no control characters): two for
    /// an East Asian wide or fullwidth character or an emoji, none for a combining mark or a
    /// zero-width joiner, one for anything else. What a table pads by; a count of `Character`s
    /// misaligned a batch's table at a name such as `文件.bin`.
    public static func columns(_ text: String) -> Int {
        text.unicodeScalars.reduce(0) { n, u in
            switch u.properties.generalCategory {
            case .nonspacingMark, .enclosingMark, .format: return n
            default: break
            }
            switch u.value {
            case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
                0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x1F300...0x1F64F,
                0x1F680...0x1F6FF, 0x1F7E0...0x1F7EB, 0x1F900...0x1F9FF, 0x1FA70...0x1FAFF, 0x20000...0x3FFFD:
                return n + 2
            default: return n + 1
            }
        }
    }

    /// `text` escaped as `escaping` does (line breaks too), then cut by whole characters to at most
    /// `limit` terminal columns as `columns(_:)` counts them. What a live line is fitted with: a cut by
    /// characters let a line of wide characters (`文件`) run past the terminal's edge, where it wraps
    /// and the next redraw clears only its last row, and it was made before the escaping that
    /// lengthens a name holding control characters.
    public static func fitted(_ text: String, columns limit: Int) -> String {
        let shown = escaping(text, keepingLineBreaks: false)
        guard columns(shown) > limit else { return shown }
        var out = ""
        var used = 0
        for ch in shown {
            let w = columns(String(ch))
            if used + w > limit { break }
            out.append(ch)
            used += w
        }
        return out
    }

    /// True when `text` holds nothing that `escaping(_:keepingLineBreaks:)` would change.
    public static func isSafe(_ text: String, keepingLineBreaks: Bool = true) -> Bool {
        escaping(text, keepingLineBreaks: keepingLineBreaks) == text
    }

    static func render(_ bytes: [UInt8], quotingBackslash: Bool, keepingLineBreaks: Bool, limit: Int?) -> String {
        var out = ""
        out.reserveCapacity(bytes.count)
        var shown = 0
        var parser = Unicode.UTF8.ForwardParser()
        var input = bytes.makeIterator()
        var offset = 0
        func add(_ piece: String) -> Bool {
            let n = piece.unicodeScalars.count
            if let limit, shown + n > limit - 1 {
                out += "…"
                return false
            }
            out += piece
            shown += n
            return true
        }
        while true {
            switch parser.parseScalar(from: &input) {
            case .valid(let encoded):
                offset += encoded.count
                let u = Unicode.UTF8.decode(encoded)
                let piece: String
                switch u.value {
                case 0x5C where quotingBackslash: piece = "\\\\"
                case 0x0A where keepingLineBreaks: piece = "\n"
                case 0x09 where keepingLineBreaks: piece = "\t"
                case 0x09: piece = "\\t"
                case 0x0A: piece = "\\n"
                case 0x0D: piece = "\\r"
                case 0..<0x20, 0x7F: piece = "\\x" + hex2(u.value)
                case 0x80..<0xA0, 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069:
                    piece = "\\u{" + String(u.value, radix: 16) + "}"
                default: piece = String(u)
                }
                guard add(piece) else { return out }
            case .error(let length):
                for b in bytes[offset..<offset + length] {
                    guard add("\\x" + hex2(UInt32(b))) else { return out }
                }
                offset += length
            case .emptyInput:
                return out
            }
        }
    }

    private static func hex2(_ v: UInt32) -> String {
        let s = String(v, radix: 16)
        return s.count < 2 ? "0" + s : s
    }
}

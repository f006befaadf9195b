/// Extracts the file name from a `Content-Disposition` header value (RFC 6266).
///
/// `filename*` (RFC 8187, `UTF-8''percent%20encoded`) wins over `filename`; quoted strings may
/// contain backslash escapes. The result is the raw suggestion: pass it through `FileName.sanitize`.
public enum ContentDisposition {
    public static func fileName(from value: String) -> String? {
        var plain: String?
        var extended: String?
        for param in splitParameters(value).dropFirst() {
            guard let eq = param.firstIndex(of: "=") else { continue }
            let key = param[..<eq].trimmingASCIIWhitespace().lowercased()
            let raw = param[param.index(after: eq)...].trimmingASCIIWhitespace()
            switch key {
            case "filename":
                plain = unquote(raw)
            case "filename*":
                extended = decodeExtValue(unquote(raw))
            default:
                continue
            }
        }
        return extended ?? plain
    }

    /// Splits on `;` outside quoted strings.
    static func splitParameters(_ value: String) -> [Substring] {
        var parts: [Substring] = []
        var start = value.startIndex
        var inQuotes = false
        var escaped = false
        var i = value.startIndex
        while i < value.endIndex {
            let c = value[i]
            if escaped {
                escaped = false
            } else if c == "\\" && inQuotes {
                escaped = true
            } else if c == "\"" {
                inQuotes.toggle()
            } else if c == ";" && !inQuotes {
                parts.append(value[start..<i])
                start = value.index(after: i)
            }
            i = value.index(after: i)
        }
        parts.append(value[start...])
        return parts
    }

    static func unquote(_ s: Substring) -> String {
        guard s.count >= 2, s.first == "\"", s.last == "\"" else { return String(s) }
        var out = ""
        var escaped = false
        for c in s.dropFirst().dropLast() {
            if escaped {
                out.append(c)
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// `charset'lang'pct-encoded` → decoded text; only UTF-8 and ISO-8859-1 charsets are accepted.
    static func decodeExtValue(_ s: String) -> String? {
        let parts = s.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        guard let bytes = percentDecode(parts[2]) else { return nil }
        switch charset {
        case "utf-8":
            return String(validating: bytes, as: UTF8.self)
        case "iso-8859-1":
            return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
        default:
            return nil
        }
    }
}

/// Percent-decodes bytes; nil on a malformed escape.
func percentDecode(_ s: some StringProtocol) -> [UInt8]? {
    percentDecode(bytes: s.utf8)
}

/// `percentDecode` of UTF-8 bytes.
func percentDecode(bytes: some Collection<UInt8>) -> [UInt8]? {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var it = bytes.makeIterator()
    while let c = it.next() {
        if c == UInt8(ascii: "%") {
            guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else {
                return nil
            }
            out.append(hv << 4 | lv)
        } else {
            out.append(c)
        }
    }
    return out
}

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case 48...57: c - 48
    case 65...70: c - 55
    case 97...102: c - 87
    default: nil
    }
}

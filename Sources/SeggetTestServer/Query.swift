/// Query-string and URL helpers. `+` is kept literally (not a space) so that header values passed
/// through `?cd=` arrive exactly as the test percent-encoded them.
enum URLText {
    static func percentDecode(_ text: Substring) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        var bytes = Array(text.utf8)[...]
        while let b = bytes.popFirst() {
            if b == UInt8(ascii: "%"), bytes.count >= 2,
                let hi = hexValue(bytes[bytes.startIndex]),
                let lo = hexValue(bytes[bytes.startIndex + 1])
            {
                out.append(hi << 4 | lo)
                bytes.removeFirst(2)
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Parses `a=1&b=x%20y`; the last occurrence of a name wins.
    static func parseQuery(_ query: String) -> [String: String] {
        var result: [String: String] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            if let eq = pair.firstIndex(of: "=") {
                result[percentDecode(pair[..<eq])] = percentDecode(pair[pair.index(after: eq)...])
            } else {
                result[percentDecode(pair)] = ""
            }
        }
        return result
    }

    /// Parses a byte rate such as `16m`, `512k`, `1.5m` or `1000` (k = 1024, m = 1024², g = 1024³).
    static func parseRate(_ text: String) -> Int64? {
        var digits = Substring(text.lowercased())
        var multiplier: Double = 1
        switch digits.last {
        case "k": multiplier = 1024
        case "m": multiplier = 1024 * 1024
        case "g": multiplier = 1024 * 1024 * 1024
        default: break
        }
        if multiplier != 1 { digits = digits.dropLast() }
        guard let value = Double(digits), value > 0, value.isFinite else { return nil }
        return max(1, Int64(value * multiplier))
    }

    /// Parses a byte count or offset as `parseRate` does, but also accepts 0.
    static func parseSize(_ text: String) -> Int64? {
        if let zero = Double(text), zero == 0 { return 0 }
        return parseRate(text)
    }
}

extension URLText {
    /// Percent-encodes everything but unreserved characters and `/`, for building `Location` paths.
    static func percentEncodePath(_ text: String) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.append(b)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(digits[Int(b >> 4)])
                out.append(digits[Int(b & 0x0f)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

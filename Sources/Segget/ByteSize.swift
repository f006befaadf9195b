/// Parses sizes and rates such as `1M`, `512k`, `20MiB`, `1.5G`, `4096` (binary multiples: k = 1024).
/// Nil when malformed, negative, or over 2^62.
public func parseByteSize(_ text: String) -> Int64? {
    var s = Substring(text).trimmingASCIIWhitespace()
    for suffix in ["/s", "B", "b"] where s.hasSuffix(suffix) && s.count > suffix.count {
        s = s.dropLast(suffix.count)
    }
    if s.hasSuffix("i") { s = s.dropLast() }
    var multiplier: Double = 1
    if let last = s.last, last.isLetter {
        switch last.lowercased() {
        case "k": multiplier = 1024
        case "m": multiplier = 1024 * 1024
        case "g": multiplier = 1024 * 1024 * 1024
        case "t": multiplier = 1024 * 1024 * 1024 * 1024
        default: return nil
        }
        s = s.dropLast()
    }
    guard !s.isEmpty, s.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), s.filter({ $0 == "." }).count <= 1,
        let v = Double(String(s)), v >= 0
    else { return nil }
    let bytes = v * multiplier
    guard bytes < 4.6e18 else { return nil }
    return Int64(bytes.rounded())
}

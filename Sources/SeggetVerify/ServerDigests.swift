/// Digests a server publishes: RFC 9530 Repr-Digest (structured-field dictionary, `sha-256=:BASE64:`, `md5` too;
/// ignore unknown algorithms like sha-512 gracefully), RFC 3230 `Digest: SHA-256=BASE64, MD5=BASE64`, and
/// `Content-MD5: BASE64`. Malformed values are ignored (return nothing for them), never crash.
///
/// Which response to take the headers from matters: `Repr-Digest` and `Digest` describe the whole
/// representation, so they may come from a ranged (206) response such as the probe, while `Content-MD5`
/// (RFC 1864) describes the message body only — pass it only from a 200 response carrying the whole file.
public enum ServerDigests {
    /// Collects the digests from the three headers' values (nil for an absent header).
    ///
    /// The result is ordered Repr-Digest, Digest, Content-MD5, with exact duplicates removed. Two different
    /// values for one algorithm are both returned: the caller checks each, and a server that contradicts
    /// itself fails verification rather than having one value silently chosen.
    ///
    /// Leniency: in `Repr-Digest` a member whose byte sequence is not valid base64 or has the wrong length is
    /// skipped while the other members are kept, and upper-case keys are accepted; a field that is not a
    /// structured dictionary at all yields nothing. In `Digest`, a value that is not base64 of the right length
    /// but is hex of the right length is accepted, as some servers send hex there.
    public static func parse(reprDigest: String?, digest: String?, contentMD5: String?) -> [ExpectedDigest] {
        var found: [ExpectedDigest] = []
        if let reprDigest {
            found += parseReprDigest(reprDigest)
        }
        if let digest {
            found += parseInstanceDigest(digest)
        }
        if let contentMD5, let bytes = Base64.decode(contentMD5.trimmingASCIIWhitespace()),
            let md5 = ExpectedDigest(algorithm: .md5, bytes: bytes)
        {
            found.append(md5)
        }
        var unique: [ExpectedDigest] = []
        for candidate in found where !unique.contains(candidate) {
            unique.append(candidate)
        }
        return unique
    }

    /// RFC 9530 section 3: a dictionary whose keys are algorithm names and whose values are byte sequences.
    static func parseReprDigest(_ field: String) -> [ExpectedDigest] {
        var parser = StructuredDictionaryParser(field)
        guard let members = parser.parse() else { return [] }
        // A dictionary keeps the last value of a repeated key (RFC 8941 section 4.2.2).
        var lastValue: [DigestAlgorithm: [UInt8]?] = [:]
        var order: [DigestAlgorithm] = []
        for member in members {
            guard let algorithm = algorithm(named: member.key) else { continue }
            if lastValue[algorithm] == nil { order.append(algorithm) }
            let bytes = member.byteSequence.flatMap { Base64.decode($0[...]) }
            lastValue[algorithm] = .some(bytes)
        }
        return order.compactMap { algorithm in
            guard let bytes = lastValue[algorithm] ?? nil else { return nil }
            return ExpectedDigest(algorithm: algorithm, bytes: bytes)
        }
    }

    /// RFC 3230 section 4.3.2: `algorithm=value` pairs separated by commas; algorithm names are case-insensitive.
    static func parseInstanceDigest(_ field: String) -> [ExpectedDigest] {
        var result: [ExpectedDigest] = []
        for pair in field.split(separator: ",") {
            guard let equals = pair.firstIndex(of: "=") else { continue }
            guard let algorithm = algorithm(named: pair[..<equals].trimmingASCIIWhitespace().lowercased()) else {
                continue
            }
            var value = pair[pair.index(after: equals)...].trimmingASCIIWhitespace()
            if value.count >= 2, value.first == "\"", value.last == "\"" {
                value = value.dropFirst().dropLast()
            }
            if let bytes = Base64.decode(value), let digest = ExpectedDigest(algorithm: algorithm, bytes: bytes) {
                result.append(digest)
            } else if let bytes = decodeHex(value), let digest = ExpectedDigest(algorithm: algorithm, bytes: bytes) {
                result.append(digest)
            }
        }
        return result
    }

    /// Maps an algorithm name from either registry ("sha-256", "md5"); nil for the ones segget does not check.
    private static func algorithm(named name: String) -> DigestAlgorithm? {
        switch name {
        case "sha-256", "sha256": .sha256
        case "md5": .md5
        default: nil
        }
    }
}

/// A parser for RFC 8941 structured-field dictionaries, keeping only what digest fields need.
///
/// Each member's key is returned with its value's byte-sequence text (between the colons, not yet decoded),
/// or nil when the value is of another type. Parameters and inner lists are parsed and discarded. Returns nil
/// for text that is not a dictionary, as RFC 8941 requires; the one liberty taken is accepting upper-case keys
/// (folded to lower case) and leaving byte-sequence contents to the caller to validate.
struct StructuredDictionaryParser {
    struct Member {
        let key: String
        let byteSequence: String?
    }

    private let input: [UInt8]
    private var position = 0

    init(_ text: String) {
        input = Array(text.utf8)
    }

    mutating func parse() -> [Member]? {
        var members: [Member] = []
        skip(while: { $0 == space })
        if position == input.count { return [] }
        while true {
            guard let key = parseKey() else { return nil }
            var byteSequence: String?
            if peek() == UInt8(ascii: "=") {
                position += 1
                if peek() == UInt8(ascii: "(") {
                    guard parseInnerList() else { return nil }
                } else {
                    guard let item = parseBareItem() else { return nil }
                    byteSequence = item
                }
            }
            guard parseParameters() else { return nil }
            members.append(Member(key: key, byteSequence: byteSequence))
            skip(while: { $0 == space || $0 == tab })
            if position == input.count { return members }
            guard peek() == UInt8(ascii: ",") else { return nil }
            position += 1
            skip(while: { $0 == space || $0 == tab })
            // A trailing comma is an error.
            if position == input.count { return nil }
        }
    }

    private func peek() -> UInt8? {
        position < input.count ? input[position] : nil
    }

    private mutating func skip(while predicate: (UInt8) -> Bool) {
        while let byte = peek(), predicate(byte) {
            position += 1
        }
    }

    /// key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ), upper case folded.
    private mutating func parseKey() -> String? {
        guard let first = peek(), isAlpha(first) || first == UInt8(ascii: "*") else { return nil }
        let start = position
        skip(while: { isAlpha($0) || isDigit($0) || "_-.*".utf8.contains($0) })
        return String(decoding: input[start..<position], as: UTF8.self).lowercased()
    }

    /// Parses one bare item: `.some(text)` for a byte sequence, `.some(nil)` for any other valid item,
    /// nil when the text is not a bare item.
    private mutating func parseBareItem() -> String?? {
        guard let first = peek() else { return nil }
        switch first {
        case UInt8(ascii: ":"):
            position += 1
            let start = position
            skip(while: { $0 != UInt8(ascii: ":") && $0 >= 0x20 && $0 < 0x7F })
            guard peek() == UInt8(ascii: ":") else { return nil }
            let text = String(decoding: input[start..<position], as: UTF8.self)
            position += 1
            return .some(text)
        case UInt8(ascii: "\""):
            return parseString() ? .some(nil) : nil
        case UInt8(ascii: "?"):
            position += 1
            guard let value = peek(), value == UInt8(ascii: "0") || value == UInt8(ascii: "1") else { return nil }
            position += 1
            return .some(nil)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return parseNumber() ? .some(nil) : nil
        case UInt8(ascii: "@"):
            // A date (RFC 9651): "@" then an integer.
            position += 1
            return parseNumber() ? .some(nil) : nil
        case UInt8(ascii: "%"):
            // A display string (RFC 9651): "%" then a quoted string.
            position += 1
            return peek() == UInt8(ascii: "\"") && parseString() ? .some(nil) : nil
        default:
            guard first == UInt8(ascii: "*") || isAlpha(first) else { return nil }
            // A token: tchar, plus ":" and "/" after the first character.
            skip(while: { isAlpha($0) || isDigit($0) || "!#$%&'*+-.^_`|~:/".utf8.contains($0) })
            return .some(nil)
        }
    }

    /// sf-string = DQUOTE *( unescaped / "%" / bs-escaped ) DQUOTE, with printable ASCII only.
    private mutating func parseString() -> Bool {
        position += 1  // the opening quote
        while let byte = peek() {
            position += 1
            if byte == UInt8(ascii: "\\") {
                guard let escaped = peek(), escaped == UInt8(ascii: "\"") || escaped == UInt8(ascii: "\\") else {
                    return false
                }
                position += 1
            } else if byte == UInt8(ascii: "\"") {
                return true
            } else if byte < 0x20 || byte >= 0x7F {
                return false
            }
        }
        return false  // unterminated
    }

    /// An integer or decimal: optional "-", then digits with at most one ".", at most 20 characters.
    private mutating func parseNumber() -> Bool {
        if peek() == UInt8(ascii: "-") { position += 1 }
        let start = position
        skip(while: { isDigit($0) || $0 == UInt8(ascii: ".") })
        let number = input[start..<position]
        guard let firstDigit = number.first, isDigit(firstDigit), number.count <= 20,
            number.filter({ $0 == UInt8(ascii: ".") }).count <= 1, number.last != UInt8(ascii: ".")
        else { return false }
        return true
    }

    /// inner-list = "(" *SP [ sf-item *( 1*SP sf-item ) *SP ] ")" parameters
    private mutating func parseInnerList() -> Bool {
        position += 1  // "("
        while true {
            skip(while: { $0 == space })
            guard let byte = peek() else { return false }
            if byte == UInt8(ascii: ")") {
                position += 1
                return parseParameters()
            }
            guard parseBareItem() != nil, parseParameters() else { return false }
            guard let next = peek(), next == space || next == UInt8(ascii: ")") else { return false }
        }
    }

    /// parameters = *( ";" *SP key [ "=" bare-item ] )
    private mutating func parseParameters() -> Bool {
        while peek() == UInt8(ascii: ";") {
            position += 1
            skip(while: { $0 == space })
            guard parseKey() != nil else { return false }
            if peek() == UInt8(ascii: "=") {
                position += 1
                guard parseBareItem() != nil else { return false }
            }
        }
        return true
    }

}

// Free rather than members, so that the parser's closures do not capture (and overlap access to) `self`.
private let space = UInt8(ascii: " ")
private let tab = UInt8(ascii: "\t")

private func isAlpha(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
}

private func isDigit(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
}

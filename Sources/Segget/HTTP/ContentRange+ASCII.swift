extension ContentRange {
    enum ASCIIScan: Equatable {
        case parsed(ContentRange)
        case invalid
        case notASCII
    }

    /// What `init(referenceParsing:)` reads in `b`, found on bytes (it runs for every answer, several
    /// times, and the `Character` walk cost thousands of instructions each time). In ASCII the
    /// delimiters (space, `/`, `-`, `*`) are never part of a larger `Character`, and the six
    /// characters of "bytes " are six bytes.
    static func scanASCII(_ b: UnsafeBufferPointer<UInt8>) -> ASCIIScan {
        guard ASCIIBytes.isASCII(b) else { return .notASCII }
        var s = ASCIIBytes.trimmingWhitespace(b, 0..<b.count)
        guard s.count > 6, ASCIIBytes.lowercased(b, s.lowerBound..<s.lowerBound + 6) == "bytes " else {
            return .invalid
        }
        s = ASCIIBytes.trimmingWhitespace(b, s.lowerBound + 6..<s.upperBound)
        guard let slash = ASCIIBytes.firstIndex(of: UInt8(ascii: "/"), in: b, s) else { return .invalid }
        let rangePart = s.lowerBound..<slash
        let lengthPart = slash + 1..<s.upperBound
        func isStar(_ r: Range<Int>) -> Bool { r.count == 1 && b[r.lowerBound] == UInt8(ascii: "*") }
        let length: Int64?
        if isStar(lengthPart) {
            length = nil
        } else {
            guard let n = ASCIIBytes.decimal(b, lengthPart) else { return .invalid }
            length = n
        }
        if isStar(rangePart) {
            guard length != nil else { return .invalid }
            return .parsed(ContentRange(first: nil, last: nil, completeLength: length))
        }
        guard let dash = ASCIIBytes.firstIndex(of: UInt8(ascii: "-"), in: b, rangePart),
            let first = ASCIIBytes.decimal(b, rangePart.lowerBound..<dash),
            let last = ASCIIBytes.decimal(b, dash + 1..<rangePart.upperBound),
            first <= last, last < Int64.max
        else { return .invalid }
        if let length, last >= length { return .invalid }
        return .parsed(ContentRange(first: first, last: last, completeLength: length))
    }
}

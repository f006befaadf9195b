extension InputFile {
    /// A line of an input file that holds a URL or an option, found on bytes.
    struct ASCIILine: Equatable {
        enum Kind: Equatable {
            /// A URL line: the byte ranges of its tab-separated fields, trimmed of spaces and tabs, none
            /// empty (the first is the URL, the others its mirrors).
            case urls([Range<Int>])
            /// An indented line: the byte range of its content, trimmed of spaces and tabs.
            case option(Range<Int>)
        }
        /// 1-based.
        var number: Int
        var kind: Kind
    }

    private static let lf = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r")
    private static let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")

    /// What `init(referenceParsing:)` reads in each line of `text`, found on its bytes; nil when the
    /// text is not pure ASCII. Blank and comment lines are left out (their numbers still count).
    ///
    /// In ASCII "\r\n" is the one `Character` of two bytes, and no other `Character` contains an LF, so
    /// a line ends at each LF. Not part of the line: the CR of a "\r\n" separator, and one more CR
    /// before it (the reference's `dropLast`).
    static func asciiLines(_ b: UnsafeBufferPointer<UInt8>) -> [ASCIILine]? {
        guard ASCIIBytes.isASCII(b) else { return nil }
        var lines: [ASCIILine] = []
        var number = 0
        var start = 0
        // Every LF ends a line and starts another, so there is one line more than LFs.
        while start <= b.count {
            var end = start
            while end < b.count, b[end] != lf { end += 1 }
            defer { start = end + 1 }
            number += 1
            var last = end
            if last < b.count, last > start, b[last - 1] == cr { last -= 1 }
            if last > start, b[last - 1] == cr { last -= 1 }
            let indented = last > start && (b[start] == space || b[start] == tab)
            let content = trimmed(b, start..<last)
            if content.isEmpty || b[content.lowerBound] == UInt8(ascii: "#") { continue }
            if indented {
                lines.append(ASCIILine(number: number, kind: .option(content)))
                continue
            }
            var fields: [Range<Int>] = []
            var fieldStart = content.lowerBound
            for i in content.lowerBound...content.upperBound where i == content.upperBound || b[i] == tab {
                let field = trimmed(b, fieldStart..<i)
                if !field.isEmpty { fields.append(field) }
                fieldStart = i + 1
            }
            lines.append(ASCIILine(number: number, kind: .urls(fields)))
        }
        return lines
    }

    private static func trimmed(_ b: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) -> Range<Int> {
        var lower = r.lowerBound
        var upper = r.upperBound
        while lower < upper, b[lower] == space || b[lower] == tab { lower += 1 }
        while upper > lower, b[upper - 1] == space || b[upper - 1] == tab { upper -= 1 }
        return lower..<upper
    }
}

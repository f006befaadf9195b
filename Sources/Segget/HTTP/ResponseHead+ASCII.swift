extension ResponseHead {
    /// What one header line does to the head, read by `scanASCII`.
    enum ASCIILine: Equatable {
        /// A status line: it starts a new head.
        case status(version: ServerText, code: Int)
        /// The empty line after the fields.
        case end
        /// A continuation (obs-fold) of the last field: the line, trimmed.
        case folded(String)
        /// A field: its name lowercased, its value trimmed, and whether blanks came before the colon.
        case field(name: String, value: String, spaced: Bool)
        /// Neither (no colon): only counted.
        case ignored
    }

    private static let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")

    /// What `append(referenceLine:)` reads in `b`, found on bytes; nil when the line is not pure ASCII.
    /// `foldable`: a field came before, which a line starting with a blank continues.
    ///
    /// A header callback runs for every line of every answer, and the `Character` walk (grapheme
    /// breaking, `lowercased()`, scalar trimming) cost thousands of instructions per line. In ASCII
    /// the delimiters (space, colon) are never part of a larger `Character`, so bytes say the same.
    static func scanASCII(_ b: UnsafeBufferPointer<UInt8>, foldable: Bool) -> ASCIILine? {
        guard ASCIIBytes.isASCII(b) else { return nil }
        let line = ASCIIBytes.trimmingWhitespace(b, 0..<b.count)
        if line.count >= 5, b[line.lowerBound..<line.lowerBound + 5].elementsEqual("HTTP/".utf8) {
            // `split(separator: " ", maxSplits: 2)`: the version, then the code.
            let versionEnd = ASCIIBytes.firstIndex(of: space, in: b, line) ?? line.upperBound
            var codeStart = versionEnd
            while codeStart < line.upperBound, b[codeStart] == space { codeStart += 1 }
            let codeEnd = ASCIIBytes.firstIndex(of: space, in: b, codeStart..<line.upperBound) ?? line.upperBound
            var code = 0
            if codeStart < line.upperBound, let n = ASCIIBytes.int(b, codeStart..<codeEnd), (100...999).contains(n) {
                code = n
            }
            return .status(version: ServerText(bytes: b[line.lowerBound..<versionEnd]), code: code)
        }
        if line.isEmpty { return .end }
        if foldable, let first = b.first, first == space || first == tab {
            return .folded(ASCIIBytes.string(b, line))
        }
        guard let colon = ASCIIBytes.firstIndex(of: UInt8(ascii: ":"), in: b, line) else { return .ignored }
        let name = ASCIIBytes.lowercased(b, ASCIIBytes.trimmingWhitespace(b, line.lowerBound..<colon))
        let spaced = colon > line.lowerBound && (b[colon - 1] == space || b[colon - 1] == tab)
        let value = ASCIIBytes.string(b, ASCIIBytes.trimmingWhitespace(b, colon + 1..<line.upperBound))
        return .field(name: name, value: value, spaced: spaced)
    }
}

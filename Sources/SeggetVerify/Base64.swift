/// Strict decoding of standard base64 (RFC 4648 section 4), for digests in HTTP headers.
public enum Base64 {
    /// Decodes `text`, or returns nil if it is not canonical base64.
    ///
    /// Rejects characters outside the standard alphabet (including white space and the URL-safe `-_`),
    /// misplaced or excess `=`, and non-zero bits left over in the last character. Missing `=` padding is
    /// accepted, because RFC 8941 asks parsers of byte sequences not to fail on it.
    public static func decode(_ text: Substring) -> [UInt8]? {
        var symbols = Array(text.utf8)
        var padding = 0
        while symbols.last == UInt8(ascii: "=") {
            symbols.removeLast()
            padding += 1
        }
        // Padding, when present, must bring the length to a multiple of four, and one leftover symbol
        // can never encode a whole byte.
        guard padding <= 2, symbols.count % 4 != 1 else { return nil }
        if padding > 0, (symbols.count + padding) % 4 != 0 { return nil }

        var output: [UInt8] = []
        output.reserveCapacity(symbols.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bitCount = 0
        for symbol in symbols {
            guard let value = sextet(symbol) else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bitCount += 6
            if bitCount >= 8 {
                bitCount -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bitCount)))
                accumulator &= (1 << UInt32(bitCount)) - 1
            }
        }
        // What is left are the low bits of the last symbol, which canonical encoders set to zero.
        guard accumulator == 0 else { return nil }
        return output
    }

    private static func sextet(_ symbol: UInt8) -> UInt8? {
        switch symbol {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): symbol - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): symbol - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): symbol - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}

/// Byte-level helpers for the ASCII fast paths of the parsers that run for every file of a batch
/// (`ASCIIURL`, `ResponseHead.append(line:)`, `InputFile`). Each one stands in for a `Character`
/// operation, and agrees with it on ASCII text only.
enum ASCIIBytes {
    /// True when every byte is ASCII: where the fast paths agree with the `Character` code.
    static func isASCII(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        !b.contains { $0 >= 0x80 }
    }

    /// Where the first "://" in `b` starts.
    static func schemeSeparator(in b: UnsafeBufferPointer<UInt8>) -> Int? {
        var i = 0
        while i + 2 < b.count {
            if b[i] == UInt8(ascii: ":"), b[i + 1] == UInt8(ascii: "/"), b[i + 2] == UInt8(ascii: "/") { return i }
            i += 1
        }
        return nil
    }

    static func firstIndex(of byte: UInt8, in b: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) -> Int? {
        var i = r.lowerBound
        while i < r.upperBound {
            if b[i] == byte { return i }
            i += 1
        }
        return nil
    }

    static func lastIndex(of byte: UInt8, in b: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) -> Int? {
        var i = r.upperBound
        while i > r.lowerBound {
            i -= 1
            if b[i] == byte { return i }
        }
        return nil
    }

    /// `b[r]` as a string.
    static func string(_ b: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) -> String {
        String(unsafeUninitializedCapacity: r.count) { out in
            _ = out.initialize(from: b[r])
            return r.count
        }
    }

    /// `b[r]` as a string, lowercased (ASCII letters only: the bytes are ASCII).
    static func lowercased(_ b: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) -> String {
        String(unsafeUninitializedCapacity: r.count) { out in
            for (k, c) in b[r].enumerated() {
                out[k] = c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c | 0x20 : c
            }
            return r.count
        }
    }

    /// `r` without spaces, tabs, CRs and LFs at either end (`trimmingASCIIWhitespace`).
    static func trimmingWhitespace(_ b: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) -> Range<Int> {
        func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0D || c == 0x0A }
        var lower = r.lowerBound
        var upper = r.upperBound
        while lower < upper, isSpace(b[lower]) { lower += 1 }
        while upper > lower, isSpace(b[upper - 1]) { upper -= 1 }
        return lower..<upper
    }

    /// `Int(_:)` of the ASCII text `b[r]`: an optional sign, then at least one digit; nil on overflow.
    static func int(_ b: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) -> Int? {
        var i = r.lowerBound
        guard i < r.upperBound else { return nil }
        let negative = b[i] == UInt8(ascii: "-")
        if negative || b[i] == UInt8(ascii: "+") {
            i += 1
            guard i < r.upperBound else { return nil }
        }
        var value = 0
        while i < r.upperBound {
            let d = b[i] &- UInt8(ascii: "0")
            guard d < 10 else { return nil }
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (v, o2) = negative ? m.subtractingReportingOverflow(Int(d)) : m.addingReportingOverflow(Int(d))
            guard !o1, !o2 else { return nil }
            value = v
            i += 1
        }
        return value
    }

    /// `parseDecimal` of `b[r]`: a non-empty run of ASCII digits that fits in Int64.
    static func decimal(_ b: UnsafeBufferPointer<UInt8>, _ r: Range<Int>) -> Int64? {
        guard !r.isEmpty, r.count <= 19 else { return nil }
        var n: Int64 = 0
        for c in b[r] {
            guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
            let (m, o1) = n.multipliedReportingOverflow(by: 10)
            let (v, o2) = m.addingReportingOverflow(Int64(c - UInt8(ascii: "0")))
            guard !o1, !o2 else { return nil }
            n = v
        }
        return n
    }
}

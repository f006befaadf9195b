/// A number of bytes written the way people type it: `1M`, `512k`, `20MiB`, `1.5G`, `4096`.
///
/// Units are binary multiples (k = 1024, M = 1024², G, T), upper or lower case, with an optional
/// `i`, `B` and `/s` after them, so that `20MiB/s` reads as 20 MiB. The command line, input files
/// and the daemon's aria2 options all parse sizes through this one type, so that `--chunk-size 1M`,
/// `--max-speed 1M` and aria2's `max-download-limit=1M` mean the same number.
public struct ByteSize: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var bytes: Int64

    public init(_ bytes: Int64) { self.bytes = bytes }

    public static func kibibytes(_ n: Int64) -> ByteSize { ByteSize(n << 10) }
    public static func mebibytes(_ n: Int64) -> ByteSize { ByteSize(n << 20) }
    public static func gibibytes(_ n: Int64) -> ByteSize { ByteSize(n << 30) }

    /// Parses `text`; the error says what was wrong with it and what is accepted.
    public init(parsing text: String) throws(ArgumentValueError) {
        guard let bytes = Self.bytes(in: text) else {
            throw ArgumentValueError(
                value: text, problem: "not a size",
                accepted: "a number of bytes with an optional unit k, M, G or T (powers of 1024), such as 512k, 1M or 1.5G")
        }
        self.bytes = bytes
    }

    /// The size, or an error naming `range` when it lies outside it.
    public func checked(in range: ClosedRange<ByteSize>, _ what: String = "a size") throws(ArgumentValueError) -> ByteSize {
        guard range.contains(self) else {
            throw ArgumentValueError(
                value: description, problem: self < range.lowerBound ? "too small" : "too large",
                accepted: "\(what) from \(range.lowerBound) to \(range.upperBound)")
        }
        return self
    }

    /// The shortest exact form: `1M`, `512k`, `1536k`, `4095`.
    public var description: String {
        for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("k", 10)] where bytes != 0 && bytes % (1 << shift) == 0 {
            return "\(bytes >> shift)\(unit)"
        }
        return String(bytes)
    }

    public static func < (a: ByteSize, b: ByteSize) -> Bool { a.bytes < b.bytes }

    /// Nil when malformed, negative, or over 2^62.
    static func bytes(in text: String) -> Int64? {
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
        guard !s.isEmpty, s.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            s.filter({ $0 == "." }).count <= 1,
            let v = Double(String(s)), v >= 0
        else { return nil }
        let bytes = v * multiplier
        guard bytes < 4.6e18 else { return nil }
        return Int64(bytes.rounded())
    }
}

/// A transfer rate in bytes per second, written as a size (`20M`, `512k`, `1.5M/s`).
public struct ByteRate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var bytesPerSecond: Int64

    public init(bytesPerSecond: Int64) { self.bytesPerSecond = bytesPerSecond }

    /// Parses `text` as a size per second; the error says what was wrong and what is accepted.
    public init(parsing text: String) throws(ArgumentValueError) {
        guard let bytes = ByteSize.bytes(in: text) else {
            throw ArgumentValueError(
                value: text, problem: "not a rate",
                accepted: "bytes per second with an optional unit k, M or G (powers of 1024), such as 512k, 20M or 1.5G")
        }
        bytesPerSecond = bytes
    }

    /// The rate, or an error when it is below `minimum`.
    public func checked(atLeast minimum: ByteRate) throws(ArgumentValueError) -> ByteRate {
        guard self >= minimum else {
            throw ArgumentValueError(
                value: description, problem: "too slow", accepted: "a rate of at least \(minimum), such as 20M")
        }
        return self
    }

    /// `20M`, `512k`, `1000`: the form ``init(parsing:)`` reads back.
    public var description: String { ByteSize(bytesPerSecond).description }

    public static func < (a: ByteRate, b: ByteRate) -> Bool { a.bytesPerSecond < b.bytesPerSecond }
}

/// How many parallel connections a download uses: a fixed number, or `auto` (start with a few and
/// add more while the throughput still rises).
public enum ConnectionCount: Sendable, Hashable, CustomStringConvertible {
    case fixed(Int)
    case auto

    /// The counts a download accepts.
    public static let allowed = 1...128
    /// The most connections `auto` grows to (before a batch's or a queue's connection budget).
    public static let autoCap = 16

    /// Parses `auto` (any case) or a number in ``allowed``.
    public init(parsing text: String) throws(ArgumentValueError) {
        if text.lowercased() == "auto" {
            self = .auto
            return
        }
        self = .fixed(try Self.parseFixed(text, orAuto: true))
    }

    /// A number in ``allowed``, for places that cannot grow connections by themselves (the daemon).
    public static func parseFixed(_ text: String, orAuto: Bool = false) throws(ArgumentValueError) -> Int {
        let accepted = "a number from \(allowed.lowerBound) to \(allowed.upperBound)\(orAuto ? " or 'auto'" : "")"
        guard let n = Int(text) else {
            throw ArgumentValueError(value: text, problem: "not a number of connections", accepted: accepted)
        }
        guard allowed.contains(n) else {
            throw ArgumentValueError(
                value: text, problem: n < allowed.lowerBound ? "too few connections" : "too many connections",
                accepted: accepted)
        }
        return n
    }

    /// The connections a download may open: the fixed count, or the cap `auto` grows to.
    public var most: Int {
        switch self {
        case .fixed(let n): return n
        case .auto: return Self.autoCap
        }
    }

    public var isAuto: Bool { self == .auto }

    public var description: String {
        switch self {
        case .fixed(let n): return String(n)
        case .auto: return "auto"
        }
    }
}

/// A value that could not be read: which value, what is wrong with it, and what is accepted.
///
/// The description is one sentence meant to follow the option's name, as in
/// "'3X' is not a size; give a number of bytes with an optional unit …".
public struct ArgumentValueError: Error, Sendable, Equatable, CustomStringConvertible {
    public var value: String
    /// What is wrong with the value: "not a size", "too large".
    public var problem: String
    /// What would be accepted, as an object of "give": "a size from 16k to 1G".
    public var accepted: String

    public init(value: String, problem: String, accepted: String) {
        self.value = value
        self.problem = problem
        self.accepted = accepted
    }

    public var description: String { "'\(value)' is \(reason)" }

    /// The sentence without the value, for messages that name the value already: "not a size; give …".
    public var reason: String { "\(problem); give \(accepted)." }
}

/// Parses sizes and rates such as `1M`, `512k`, `20MiB`, `1.5G`, `4096` (binary multiples: k = 1024).
/// Nil when malformed, negative, or over 2^62. See ``ByteSize`` for a value with an explaining error.
public func parseByteSize(_ text: String) -> Int64? {
    ByteSize.bytes(in: text)
}

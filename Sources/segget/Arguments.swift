import ArgumentParser
import Glibc
import Segget

// The library's value types (Sources/Segget/ByteSize.swift) as command-line arguments.
//
// `init?(argument:)` is what ArgumentParser calls when an option names the type alone; segget's
// options pass a `transform` from `ArgumentValue` instead, because only a thrown error lets the
// message say what was wrong and what is accepted ("'abc' is not a number of connections; give a
// number from 1 to 128 or 'auto'.") where a nil gives a bare "invalid value".

extension ByteSize: ExpressibleByArgument {
    public init?(argument: String) { try? self.init(parsing: argument) }
    public var defaultValueDescription: String { description }
}

extension ByteRate: ExpressibleByArgument {
    public init?(argument: String) { try? self.init(parsing: argument) }
    public var defaultValueDescription: String { description }
}

extension ConnectionCount: ExpressibleByArgument {
    public init?(argument: String) { try? self.init(parsing: argument) }
    public var defaultValueDescription: String { description }
}

/// Transforms for `@Option(transform:)`: parse, check the range the option allows, and explain a
/// refusal. ArgumentParser puts "The value 'X' is invalid for '--option <size>': " before the reason.
enum ArgumentValue {
    /// Refuses a TCP port outside 1...65535, naming the option that gave it.
    static func checkPort(_ port: Int, option: String) throws {
        guard (1...65535).contains(port) else {
            throw ValidationError("\(option) takes a port from 1 to 65535 (got \(port)).")
        }
    }

    static func size(in range: ClosedRange<ByteSize>) -> @Sendable (String) throws -> ByteSize {
        { text in try explained { () throws(ArgumentValueError) in try ByteSize(parsing: text).checked(in: range) } }
    }

    static func rate(atLeast minimum: ByteRate) -> @Sendable (String) throws -> ByteRate {
        { text in
            try explained { () throws(ArgumentValueError) in try ByteRate(parsing: text).checked(atLeast: minimum) }
        }
    }

    /// `auto` or 1…128.
    static let connections: @Sendable (String) throws -> ConnectionCount = { text in
        try explained { () throws(ArgumentValueError) in try ConnectionCount(parsing: text) }
    }

    /// 1…128 without `auto`, for the daemon, which sets its own counts.
    static let fixedConnections: @Sendable (String) throws -> Int = { text in
        try explained { () throws(ArgumentValueError) in try ConnectionCount.parseFixed(text) }
    }

    /// A number of seconds, fractions allowed (what `Double(argument:)` reads). Given as a transform
    /// so that help shows the default once, as the option's sentence words it ("(default 15)"),
    /// not a second time as ArgumentParser's "(default: 15.0)".
    /// Infinity, NaN and more than ``mostSeconds`` are refused here: libcurl and the clocks take
    /// whole milliseconds, and a larger number does not fit (it stopped the program with SIGILL).
    static let seconds: @Sendable (String) throws -> Double = { text in
        guard let v = Double(text), v.isFinite else {
            throw ValidationError("not a number of seconds; give a number such as 5 or 0.5.")
        }
        guard v <= mostSeconds else {
            throw ValidationError("too long; give at most \(Int(mostSeconds)) seconds (about 31 years).")
        }
        return v
    }
    /// The longest wait any option takes: about 31 years.
    static let mostSeconds = 1e9

    /// A whole number, as a transform for the same reason as ``seconds``.
    static let wholeNumber: @Sendable (String) throws -> Int = { text in
        guard let v = Int(text) else { throw ValidationError("not a whole number; give one such as 1 or 8.") }
        return v
    }

    /// `--write-path`: one of the library's write paths by its name.
    static let writePath: @Sendable (String) throws -> WritePath = { text in
        guard let v = WritePath(rawValue: text) else {
            throw ValidationError("give adaptive, direct or page-cache.")
        }
        return v
    }

    /// Runs `parse`; its error becomes a ValidationError whose message is the reason alone (the
    /// value and the option are already in ArgumentParser's part of the message).
    static func explained<T>(_ parse: () throws(ArgumentValueError) -> T) throws -> T {
        do {
            return try parse()
        } catch {
            throw ValidationError(error.reason)
        }
    }
}

/// A per-file option of ``OptionSchema`` as an `@Option`: its help sentence, and its check as the
/// `transform:` (so that the command line refuses a value with the sentence an input file's line,
/// `segget add` and the daemon's RPC give). The option keeps the text; ``FileOptions`` is built from
/// it through the same schema.
extension OptionSpec {
    var argumentHelp: ArgumentHelp { ArgumentHelp(help, valueName: valueName) }

    var argument: @Sendable (String) throws -> String {
        { [self] text in
            do throws(OptionError) {
                return try check(text)
            } catch {
                // ArgumentParser's part of the message names the value already.
                throw ValidationError(error.reason)
            }
        }
    }
}

extension FileOptions {
    /// Lays the command line's texts of `spec` over these options (each was checked by `argument`).
    mutating func set(_ spec: OptionSpec, _ values: [String]) throws {
        for v in values {
            do {
                try spec.apply(v, &self)
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    mutating func set(_ spec: OptionSpec, _ value: String?) throws {
        try set(spec, value.map { [$0] } ?? [])
    }
}

/// The command line as the kernel gave it, checked for bytes that are not UTF-8 before Swift reads it:
/// `CommandLine.arguments` turns such bytes into U+FFFD, so `-o $'caf\xe9.bin'` saved into a file
/// named `caf�.bin`, not the one asked for. segget's paths and URLs are UTF-8; an argument that is not
/// is refused, naming it with its odd bytes as `\xNN`.
enum RawArguments {
    /// The first argument (1-based, the program's name not counted) that is not UTF-8, and how it
    /// reads with each byte that is not UTF-8 written `\xNN`; nil when every one is UTF-8.
    static func firstNotUTF8(_ arguments: [[UInt8]]) -> (position: Int, shown: String)? {
        for (i, bytes) in arguments.enumerated() where String(validating: bytes, as: UTF8.self) == nil {
            return (i + 1, shown(bytes))
        }
        return nil
    }

    /// `bytes` with each byte that is not part of a valid UTF-8 character, and each control character,
    /// as `\xNN`.
    static func shown(_ bytes: [UInt8]) -> String {
        var out = ""
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            let length = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0
            if length > 1, i + length <= bytes.count, let text = String(validating: bytes[i..<(i + length)], as: UTF8.self) {
                out += text
                i += length
            } else if length == 1 && b >= 0x20 && b != 0x7F {
                out.unicodeScalars.append(Unicode.Scalar(b))
                i += 1
            } else {
                out += "\\x" + (b < 0x10 ? "0" : "") + String(b, radix: 16)
                i += 1
            }
        }
        return out
    }

    /// The process's arguments after its name, as bytes.
    static var current: [[UInt8]] {
        (1..<Int(CommandLine.argc)).map { i in
            guard let p = CommandLine.unsafeArgv[i] else { return [] }
            return Array(UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: strlen(p)))
        }
    }
}

extension RawArguments {
    /// The options whose value is a secret: the daemon's RPC token.
    static let secretOptions = ["--rpc-secret"]

    /// Where the values of `secretOptions` lie in `arguments` (those after the program's name): the
    /// argument's index and the byte its value starts at (`--rpc-secret S`: S from 0;
    /// `--rpc-secret=S`: from after the `=`). None after a `--`.
    static func secretValues(_ arguments: [[UInt8]]) -> [(index: Int, offset: Int)] {
        var found: [(index: Int, offset: Int)] = []
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            if a == Array("--".utf8) { break }
            for option in secretOptions.map({ Array($0.utf8) }) {
                if a == option, i + 1 < arguments.count {
                    found.append((i + 1, 0))
                    i += 1
                } else if a.count > option.count + 1, Array(a[..<option.count]) == option, a[option.count] == UInt8(ascii: "=") {
                    found.append((i, option.count + 1))
                }
            }
            i += 1
        }
        return found
    }

    /// Overwrites the secret values in the process's own command line with `*`, as aria2c does, so that
    /// `ps` and `/proc/PID/cmdline`, which every local user can read, do not show the daemon's token
    /// (a client command's either). Swift's `CommandLine.arguments` must have been read before: it
    /// keeps its own copy, which the options are parsed from.
    static func hideSecrets() {
        for (index, offset) in secretValues(current) {
            guard let p = CommandLine.unsafeArgv[index + 1] else { continue }
            let length = strlen(p)
            for k in offset..<length { p[k] = CChar(UInt8(ascii: "*")) }
        }
    }
}

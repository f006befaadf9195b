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
    /// How much of an option's value is secret (see `secretSpans`).
    enum SecretPart {
        /// All of it: the daemon's RPC token.
        case whole
        /// What follows the first `:`: the password of `-u USER:PASSWORD` (the user stays readable).
        case afterColon
        /// The field's value where the header is `Authorization`, `Proxy-Authorization` or `Cookie`.
        case credentialHeader
        /// All of it where it holds a `=`: inline cookies, not the name of a cookie file.
        case inlineCookies
        /// A proxy given without a scheme (`USER:PASSWORD@HOST:PORT`, taken as http://): its password.
        /// One with a scheme is a URL, whose password every argument has hidden.
        case proxyWithoutScheme
    }

    /// The options whose values hold secrets, by every name they are given with.
    static let secretOptions: [(names: [String], part: SecretPart)] = [
        (["--rpc-secret"], .whole),
        (["-u", "--user"], .afterColon),
        (["-H", "--header"], .credentialHeader),
        (["-b", "--cookie"], .inlineCookies),
        (["--proxy"], .proxyWithoutScheme),
    ]

    /// segget's one-letter options that take a value (`-n 8`), in any of its commands: in a pack
    /// (`-qu USER:PASS`, `-nu 8 USER:PASS`) each takes the next argument in turn, as
    /// swift-argument-parser reads them. RawArgumentsTests checks it against every command's help.
    static let valueShorts: Set<UInt8> = Set("AHbdeijnou".utf8)

    /// The byte ranges of `arguments` (those after the program's name) that hold secrets: the values
    /// of `secretOptions` (`--opt V`, `--opt=V`, `-o V`, `-o=V`, and within a pack of one-letter
    /// options; none after a `--`), and in any argument, after a `--` too, the password of a URL's
    /// `user:password@` (a download's URL, a `--mirror`, a `--proxy`). A span never covers the
    /// option's name, the user, or a URL's host.
    static func secretSpans(_ arguments: [[UInt8]]) -> [(index: Int, range: Range<Int>)] {
        var found: [(index: Int, range: Range<Int>)] = []
        func add(_ index: Int, _ offset: Int, _ part: SecretPart?) {
            let value = Array(arguments[index][offset...])
            if let part, let r = secretRange(value, part) { found.append((index, (r.lowerBound + offset)..<(r.upperBound + offset))) }
            if offset == 0, let r = urlPassword(value), !found.contains(where: { $0.index == index && $0.range == r }) {
                found.append((index, r))
            }
        }
        func partOf(_ name: [UInt8]) -> SecretPart? {
            secretOptions.first { $0.names.contains { Array($0.utf8) == name } }?.part
        }
        let dash = UInt8(ascii: "-"), equals = UInt8(ascii: "=")
        var optionsEnded = false
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            if let r = urlPassword(a) { found.append((i, r)) }
            i += 1
            if optionsEnded || a.count < 2 || a[0] != dash { continue }
            if a == [dash, dash] { optionsEnded = true; continue }
            if a[1] == dash {
                // A long option: `--opt=V`, or `--opt V` for one whose value is a secret.
                if let eq = a.firstIndex(of: equals) {
                    if let part = partOf(Array(a[..<eq])) { add(i - 1, eq + 1, part) }
                } else if let part = partOf(a), i < arguments.count {
                    add(i, 0, part)
                    i += 1
                }
                continue
            }
            // One-letter options: `-u V`, `-u=V`, or a pack (`-qu V`) whose value-taking letters take
            // the next arguments in turn.
            if a.count > 2, a[2] == equals {
                add(i - 1, 3, partOf(Array(a[..<2])))
                continue
            }
            for letter in a.dropFirst() where valueShorts.contains(letter) {
                guard i < arguments.count else { break }
                add(i, 0, partOf([dash, letter]))
                i += 1
            }
        }
        return found
    }

    /// The secret part of one option's value, nil where it holds none.
    static func secretRange(_ value: [UInt8], _ part: SecretPart) -> Range<Int>? {
        let colon = value.firstIndex(of: UInt8(ascii: ":"))
        switch part {
        case .whole:
            return value.isEmpty ? nil : 0..<value.count
        case .afterColon:
            guard let colon, colon + 1 < value.count else { return nil }
            return (colon + 1)..<value.count
        case .credentialHeader:
            guard let colon else { return nil }
            let name = String(decoding: value[..<colon].filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }, as: UTF8.self).lowercased()
            guard ["authorization", "proxy-authorization", "cookie"].contains(name) else { return nil }
            var start = colon + 1
            while start < value.count, value[start] == UInt8(ascii: " ") || value[start] == UInt8(ascii: "\t") { start += 1 }
            return start < value.count ? start..<value.count : nil
        case .inlineCookies:
            return value.contains(UInt8(ascii: "=")) ? 0..<value.count : nil
        case .proxyWithoutScheme:
            return urlPassword(Array("http://".utf8) + value).map { ($0.lowerBound - 7)..<($0.upperBound - 7) }
        }
    }

    /// The password of a URL's `user:password@` in `argument` (the bytes between the userinfo's
    /// first `:` and the authority's last `@`), wherever a `scheme://` starts in it.
    static func urlPassword(_ argument: [UInt8]) -> Range<Int>? {
        let marker = Array("://".utf8)
        guard argument.count > marker.count,
              let at = (0...(argument.count - marker.count)).first(where: { Array(argument[$0..<($0 + marker.count)]) == marker })
        else { return nil }
        let start = at + marker.count
        let end = argument[start...].firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) ?? argument.count
        guard let sign = argument[start..<end].lastIndex(of: UInt8(ascii: "@")),
              let colon = argument[start..<sign].firstIndex(of: UInt8(ascii: ":")),
              colon + 1 < sign
        else { return nil }
        return (colon + 1)..<sign
    }

    /// Overwrites the secrets in the process's own command line with `*` (`secretSpans`: the daemon's
    /// token, passwords, credential headers and cookies), as aria2c does with its passwords, so that
    /// `ps` and `/proc/PID/cmdline`, which every local user can read, do not show them. Swift's
    /// `CommandLine.arguments` must have been read before: it keeps its own copy, which the options
    /// are parsed from.
    static func hideSecrets() {
        for (index, range) in secretSpans(current) {
            guard let p = CommandLine.unsafeArgv[index + 1] else { continue }
            let length = strlen(p)
            for k in range where k < length { p[k] = CChar(UInt8(ascii: "*")) }
        }
    }
}

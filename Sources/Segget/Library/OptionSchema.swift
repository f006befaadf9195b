import SeggetVerify

/// The options one file may have of its own, whichever way they were given: the command line
/// (`segget URL`, `segget add`), an input file's indented lines (`segget -i`), aria2's RPC options
/// (`addUri`, `changeOption`), or a daemon task's stored options. Every one of them is read, checked
/// and written back through ``OptionSchema``, so a value means the same and is refused with the same
/// sentence wherever it was given. Nil (or empty) means "not given".
public struct FileOptions: Sendable, Equatable {
    /// `dir`: the directory to save into.
    public var directory: String?
    /// `out`: the file name to save as, one path component; nil: the server's name.
    public var outputName: String?
    /// `header`: extra request header lines, `Name: value`.
    public var headers: [String] = []
    /// `user-agent`.
    public var userAgent: String?
    /// `referer`.
    public var referer: String?
    /// `all-proxy`: the proxy URL.
    public var proxy: String?
    /// `split`: connections wanted (1…128).
    public var connections: Int?
    /// `max-download-limit`: receive rate cap, bytes per second.
    public var maxSpeed: Int64?
    /// `checksum`: digests the file must match.
    public var checksums: [ExpectedDigest] = []
    /// `max-connection-per-server` (1…16): at most this many of the file's own connections.
    public var maxConnectionsPerServer: Int?
    /// `max-tries`: tries of each range, the first included (0: no limit).
    public var maxTries: Int?
    /// `retry-wait`: seconds before the first retry.
    public var retryWait: Double?
    /// `timeout`: seconds a connection may deliver nothing (segget's stall timeout).
    public var stallTimeout: Double?
    /// `connect-timeout`: seconds to wait for a connection.
    public var connectTimeout: Double?

    public init(
        directory: String? = nil, outputName: String? = nil, headers: [String] = [], userAgent: String? = nil,
        referer: String? = nil, proxy: String? = nil, connections: Int? = nil, maxSpeed: Int64? = nil,
        checksums: [ExpectedDigest] = [], maxConnectionsPerServer: Int? = nil
    ) {
        self.directory = directory
        self.outputName = outputName
        self.headers = headers
        self.userAgent = userAgent
        self.referer = referer
        self.proxy = proxy
        self.connections = connections
        self.maxSpeed = maxSpeed
        self.checksums = checksums
        self.maxConnectionsPerServer = maxConnectionsPerServer
    }
}

/// A per-file option's value refused: the option's key and one sentence that says what is wrong and
/// what to give instead. Every entry point shows the same sentence (after its own prefix: the command
/// line's option, the input file's line number, the RPC option's name).
public struct OptionError: Error, CustomStringConvertible, Sendable, Equatable {
    public let key: String
    public let message: String
    /// The sentence without the value it starts with, for a message that names the value already
    /// (the command line's "The value 'x' is invalid for '--max-speed <max-speed>': …").
    public let reason: String

    public init(key: String, message: String, reason: String? = nil) {
        self.key = key
        self.message = message
        self.reason = reason ?? message
    }

    /// `'VALUE' is REASON`, from an ``ArgumentValueError`` or a sentence of the same shape.
    init(key: String, value: String, reason: String) {
        self.init(key: key, message: "'\(value)' is \(reason)", reason: reason)
    }

    public var description: String { message }
}

/// Where a per-file option can be given.
public enum OptionEntryPoint: String, Sendable, CaseIterable {
    /// `segget URL…` (the download command).
    case commandLine
    /// An input file's indented `key=value` lines (`segget -i`).
    case inputFile
    /// `segget add` (which sends aria2's option to the daemon).
    case add
    /// aria2's RPC options (`addUri`, `changeOption`, `getOption`).
    case rpc
}

/// One per-file option: its names, its help sentence, its parser and check (one error sentence), and
/// how it reads and writes ``FileOptions``.
public struct OptionSpec: Sendable {
    /// aria2's name, which is also the input file's key and the key in the daemon's stored JSON.
    public let key: String
    /// The command line's long name (without `--`), for `segget URL` and `segget add` alike.
    public let long: String?
    public let short: Character?
    /// The placeholder in help (`<referer>`).
    public let valueName: String
    /// One sentence for `--help` and the docs.
    public let help: String
    /// Given several times, every value counts (`header`, `checksum`); otherwise the last one wins.
    public let repeatable: Bool
    /// The entry points that do not take it, each with the reason.
    public let absent: [OptionEntryPoint: String]
    /// Checks one value and lays it onto the options (a repeatable option appends).
    public let apply: @Sendable (String, inout FileOptions) throws(OptionError) -> Void
    /// The values set, as text `apply` reads back; empty when unset.
    public let values: @Sendable (FileOptions) -> [String]
    /// Unsets it (before a repeatable option's values are replaced as a whole).
    public let clear: @Sendable (inout FileOptions) -> Void

    /// The long name, or the key for an option without one.
    public var longName: String { long ?? key }

    /// Whether `entry` takes it.
    public func isGiven(at entry: OptionEntryPoint) -> Bool { absent[entry] == nil }

    /// `value` checked alone, for a parser that keeps the text (the command line's `transform:`).
    public func check(_ value: String) throws(OptionError) -> String {
        var scratch = FileOptions()
        try apply(value, &scratch)
        return value
    }
}

extension FileOptions {
    /// Every option given, as text, in ``OptionSchema/all`` order: what the daemon stores and
    /// `segget add` sends.
    public var fields: [(key: String, values: [String])] {
        OptionSchema.all.compactMap { spec in
            let v = spec.values(self)
            return v.isEmpty ? nil : (spec.key, v)
        }
    }

    /// Options read back from ``fields``; a value that no longer passes its check is refused.
    public init(fields: [(key: String, values: [String])]) throws(OptionError) {
        self.init()
        for (key, values) in fields {
            guard let spec = OptionSchema.spec(key) else {
                throw OptionError(key: key, message: "'\(key)' is not a per-file option segget knows.")
            }
            for v in values { try spec.apply(v, &self) }
        }
    }

    /// The same options after every value went through its check: throws the first refusal. For
    /// options built as values (a library caller's), so that they meet the rules text meets.
    public func validated() throws(OptionError) -> FileOptions {
        try FileOptions(fields: fields)
    }
}

/// The one description of every per-file option: the command line, the input file, `segget add` and
/// aria2's RPC options all map through ``all``; README's and docs/daemon.md's tables are checked against
/// it by the tests.
public enum OptionSchema {
    public static let all: [OptionSpec] = [
        directory, outputName, checksum, header, userAgent, referer, proxy, split, maxSpeed, perServer,
        maxTries, retryWait, timeout, connectTimeout,
    ]

    public static func spec(_ key: String) -> OptionSpec? { all.first { $0.key == key } }

    /// The keys an input file's indented lines may use.
    public static var inputFileKeys: [String] { all.filter { $0.isGiven(at: .inputFile) }.map(\.key) }

    static let perServerReason =
        "segget's --max-connections-per-host caps a run's requests to one host across all its files."

    public static let directory = OptionSpec(
        key: "dir", long: "dir", short: "d", valueName: "dir", help: "Save into this directory (created if missing); a relative one is taken from the current directory (an input file's dir= too, not from -d), a daemon task's from the daemon's --dir.",
        repeatable: false, absent: [:],
        apply: { v, o throws(OptionError) in
            guard !v.isEmpty else { throw OptionError(key: "dir", message: "The directory is empty; name one.") }
            try noLineBreak(v, key: "dir", what: "The directory")
            o.directory = v
        }, values: { $0.directory.map { [$0] } ?? [] }, clear: { $0.directory = nil })

    public static let outputName = OptionSpec(
        key: "out", long: "output", short: "o", valueName: "name",
        help: "Save as this file name, without a directory (one URL only).", repeatable: false,
        absent: [.commandLine: "the download command's -o takes a path (or - for standard output)."],
        apply: { v, o throws(OptionError) in
            guard !v.isEmpty, v != ".", v != "..", !v.contains("/"), !v.utf8.contains(0) else {
                throw OptionError(
                    key: "out",
                    message:
                        "The output name '\(shown(v))' must be one file name, without '/', and not '.' or '..'; choose the directory with dir.")
            }
            try noLineBreak(v, key: "out", what: "The output name")
            // Refused here, as '..' is, rather than when the task starts (a daemon task failed
            // then with the command line's advice to use -o).
            if let suffix = PartialDownload.Paths.sideFileSuffix(of: v) {
                throw OptionError(
                    key: "out",
                    message: "The output name '\(shown(v))' ends in \(suffix), the name segget gives an unfinished download's side file; choose another name.")
            }
            o.outputName = v
        }, values: { $0.outputName.map { [$0] } ?? [] }, clear: { $0.outputName = nil })

    public static let checksum = OptionSpec(
        key: "checksum", long: "checksum", short: nil, valueName: "checksum",
        help: "Expected digest ALGO=HEX, with ALGO sha256 (or sha-256) or md5 (repeatable; one URL only).",
        repeatable: true,
        absent: [:],
        apply: { v, o throws(OptionError) in
            let digest: ExpectedDigest
            do {
                digest = try ExpectedDigest(parsing: v)
            } catch {
                throw OptionError(key: "checksum", message: "\(error)")
            }
            // Two different digests of one algorithm cannot both hold: refused before anything is
            // fetched (it used to download the whole file and end in a mismatch). The same one twice is one.
            if let other = o.checksums.first(where: { $0.algorithm == digest.algorithm }) {
                guard other == digest else {
                    throw OptionError(
                        key: "checksum",
                        message: "Two different \(digest.algorithm.displayName) checksums were given (\(other.hex) and \(digest.hex)); "
                            + "no file can match both, so give the one that is right.")
                }
                return
            }
            o.checksums.append(digest)
        },
        values: { $0.checksums.map { "\($0.algorithm.textualName)=" + $0.hex } },
        clear: { $0.checksums = [] })

    /// Request headers segget writes on every request itself: one given with `-H` replaced them (a
    /// `Range` of the user's made every connection ask for the same bytes).
    static let ownHeaders: Set<String> = ["range", "if-range"]

    public static let header = OptionSpec(
        key: "header", long: "header", short: "H", valueName: "header",
        help: "Extra request header 'Name: value' (repeatable).", repeatable: true, absent: [:],
        apply: { v, o throws(OptionError) in
            try noLineBreak(v, key: "header", what: "The header")
            guard let colon = v.firstIndex(of: ":"), colon != v.startIndex,
                !v[..<colon].contains(where: { $0 == " " || $0 == "\t" })
            else {
                throw OptionError(key: "header", message: "The header '\(shown(v))' is not of the form 'Name: value'.")
            }
            let name = v[..<colon].lowercased()
            if ownHeaders.contains(name) {
                throw OptionError(
                    key: "header",
                    message: "segget sends \(shown(String(v[..<colon]))) itself: it asks each connection for its own bytes and resumes only the same file; drop that header.")
            }
            // A request names one host: a server must refuse two Host fields (RFC 9112 §3.2), and
            // libcurl sent only the first, the second dropped without a word.
            if name == "host", o.headers.contains(where: { $0.prefix { $0 != ":" }.lowercased() == "host" }) {
                throw OptionError(key: "header", message: "Host is given twice ('\(shown(v))'); a request names one host: give Host once.")
            }
            o.headers.append(v)
        }, values: { $0.headers }, clear: { $0.headers = [] })

    public static let userAgent = text(
        "user-agent", long: "user-agent", short: "A", what: "The user agent", help: "The User-Agent header to send.",
        \.userAgent)
    public static let referer = text(
        "referer", long: "referer", short: "e", what: "The referer", help: "The Referer header to send.", \.referer)
    public static let proxy = OptionSpec(
        key: "all-proxy", long: "proxy", short: nil, valueName: "proxy",
        help: "Proxy URL: http://, https://, socks4://, socks4a://, socks5:// or socks5h:// (default: the http_proxy / https_proxy / no_proxy variables; '' is no proxy at all, but over RPC not set).",
        repeatable: false, absent: [:],
        apply: { v, o throws(OptionError) in
            try noLineBreak(v, key: "all-proxy", what: "The proxy")
            // Shown without its credentials: the refusal may be of them (an @ inside a password).
            if let problem = ProxyRoute.problem(v) {
                throw OptionError(key: "all-proxy", message: "The proxy '\(shown(URLParts.shown(ProxyRoute.withScheme(v)).description))' is unusable: \(problem)")
            }
            // An empty proxy is none, the environment's included, as curl's --proxy "" is.
            o.proxy = v
        }, values: { $0.proxy.map { [$0] } ?? [] }, clear: { $0.proxy = nil })

    public static let split = OptionSpec(
        key: "split", long: "connections", short: "n", valueName: "n",
        help: "Parallel connections for the file, 1 to 128.", repeatable: false, absent: [:],
        apply: { v, o throws(OptionError) in
            do throws(ArgumentValueError) {
                o.connections = try ConnectionCount.parseFixed(v)
            } catch {
                throw OptionError(key: "split", value: v, reason: error.reason)
            }
        }, values: { $0.connections.map { [String($0)] } ?? [] }, clear: { $0.connections = nil })

    /// A cap below 1k/s would make every connection stall-time out.
    public static let slowestSpeed = ByteRate(bytesPerSecond: 1024)

    public static let maxSpeed = OptionSpec(
        key: "max-download-limit", long: "max-speed", short: nil, valueName: "max-speed",
        help: "Cap the file's download rate, all its connections together, e.g. 20M (bytes per second; 0: no cap).",
        repeatable: false, absent: [:],
        apply: { v, o throws(OptionError) in
            let rate: ByteRate
            do throws(ArgumentValueError) {
                rate = try ByteRate(parsing: v)
            } catch {
                throw OptionError(key: "max-download-limit", value: v, reason: error.reason + " 0 means no cap.")
            }
            guard rate.bytesPerSecond == 0 || rate >= slowestSpeed else {
                throw OptionError(
                    key: "max-download-limit", value: v,
                    reason: "too slow; give a rate of at least \(slowestSpeed), such as 20M, or 0 for no cap.")
            }
            o.maxSpeed = rate.bytesPerSecond == 0 ? nil : rate.bytesPerSecond
        }, values: { $0.maxSpeed.map { [String($0)] } ?? [] }, clear: { $0.maxSpeed = nil })

    public static let perServer = OptionSpec(
        key: "max-connection-per-server", long: nil, short: nil, valueName: "n",
        help: "At most this many of the file's connections, 1 to 16, as in aria2.", repeatable: false,
        absent: [.commandLine: perServerReason, .inputFile: perServerReason, .add: "segget add sends min(-n, 16)."],
        apply: { v, o throws(OptionError) in
            guard let n = Int(v), (1...16).contains(n) else {
                throw OptionError(
                    key: "max-connection-per-server", value: shown(v),
                    reason: "not a number of connections per server; give a number from 1 to 16, as in aria2.")
            }
            o.maxConnectionsPerServer = n
        }, values: { $0.maxConnectionsPerServer.map { [String($0)] } ?? [] },
        clear: { $0.maxConnectionsPerServer = nil })

    /// A header value: any text without CR, LF or NUL. An empty value unsets it (aria2's `all-proxy=`).
    static func text(
        _ key: String, long: String, short: Character?, what: String, help: String,
        _ path: WritableKeyPath<FileOptions, String?> & Sendable
    ) -> OptionSpec {
        OptionSpec(
            key: key, long: long, short: short, valueName: long, help: help, repeatable: false, absent: [:],
            apply: { v, o throws(OptionError) in
                try noLineBreak(v, key: key, what: what)
                o[keyPath: path] = v.isEmpty ? nil : v
            }, values: { $0[keyPath: path].map { [$0] } ?? [] }, clear: { $0[keyPath: path] = nil })
    }

    static func noLineBreak(_ value: String, key: String, what: String) throws(OptionError) {
        if value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) {
            throw OptionError(
                key: key,
                message: "\(what) contains a line break or NUL character, which could forge extra header lines; remove it.")
        }
    }

    /// Long or odd values are cut for messages.
    static func shown(_ s: String) -> String {
        let clean = String(s.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
        return clean.count > 80 ? String(clean.prefix(77)) + "..." : clean
    }
}

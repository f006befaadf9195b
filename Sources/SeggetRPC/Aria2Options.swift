import Glibc
import Segget
import SeggetQueue

/// What the daemon allows an RPC client to ask for; fixed when the daemon starts.
public struct RPCPolicy: Sendable {
    /// The resolved download root; a `dir` must lie inside it unless `allowAnyDirectory`.
    public var root: String
    public var allowAnyDirectory: Bool

    public init(root: String, allowAnyDirectory: Bool) {
        self.root = root
        self.allowAnyDirectory = allowAnyDirectory
    }
}

/// aria2's per-download options (`aria2.addUri`, `changeOption`) turned into segget task options.
public struct Aria2TaskOptions: Sendable, Equatable {
    public var options = TaskOptions()
    /// `pause=true`: add the task paused.
    public var paused = false

    public init(options: TaskOptions = TaskOptions(), paused: Bool = false) {
        self.options = options
        self.paused = paused
    }

    /// Options segget knows but ignores because they make no sense for it (BitTorrent, FTP, …)
    /// are accepted silently, as aria2 does for options that do not apply to a download.
    public static func parse(_ value: JSON?, onto base: TaskOptions = TaskOptions(), policy: RPCPolicy)
        throws(RPCError) -> Aria2TaskOptions
    {
        var result = Aria2TaskOptions(options: base)
        guard let value, value != .null else { return result }
        guard case .object(let members) = value else { throw .invalidParams("options must be an object.") }
        for (key, raw) in members {
            switch key {
            case "dir":
                result.options.directory = try confineDirectory(try string(raw, key), policy: policy)
            case "out":
                result.options.outputName = try outputName(try string(raw, key))
            case "header":
                result.options.headers = try headers(raw)
            case "user-agent":
                result.options.userAgent = try headerValue(try string(raw, key), key)
            case "referer":
                result.options.referer = try headerValue(try string(raw, key), key)
            case "all-proxy":
                let proxy = try headerValue(try string(raw, key), key)
                result.options.proxy = proxy.isEmpty ? nil : proxy
            case "split":
                result.options.connections = try count(raw, key)
            case "max-connection-per-server":
                // Separate from split, as in aria2; see Aria2OptionTable.Mapping.maxConnectionPerServer.
                result.options.maxConnectionsPerServer = try perServer(raw, key)
            case "max-download-limit":
                result.options.maxSpeed = try speed(raw, key)
            case "checksum":
                result.options.checksum = try checksum(try string(raw, key))
            case "pause":
                result.paused = try bool(raw, key)
            default:
                continue
            }
        }
        return result
    }

    // MARK: Single values

    static func string(_ raw: JSON, _ key: String) throws(RPCError) -> String {
        switch raw {
        case .string(let s): return s
        case .int(let v): return String(v)
        case .bool(let b): return b ? "true" : "false"
        default: throw .invalidParams("option \(key) must be a string.")
        }
    }

    /// A connection count, as a JSON number or a string: the command line's `-n` rule and message.
    static func count(_ raw: JSON, _ key: String) throws(RPCError) -> Int {
        let text = raw.intValue.map { String($0) } ?? raw.stringValue ?? raw.serialized
        do {
            return try ConnectionCount.parseFixed(text)
        } catch {
            throw .invalidParams("option \(key): \(error)")
        }
    }

    /// aria2's `max-connection-per-server`: 1 to 16.
    static func perServer(_ raw: JSON, _ key: String) throws(RPCError) -> Int {
        let text = try string(raw, key)
        guard let n = Int(text), (1...16).contains(n) else {
            throw .invalidParams("option \(key) must be a number from 1 to 16, as in aria2 (got '\(text)').")
        }
        return n
    }

    static func bool(_ raw: JSON, _ key: String) throws(RPCError) -> Bool {
        switch raw {
        case .bool(let b): return b
        case .string("true"): return true
        case .string("false"): return false
        default: throw .invalidParams("option \(key) must be true or false.")
        }
    }

    /// aria2's size syntax (`0`, `500K`, `1M`), read as the command line reads `--max-speed`; 0 means
    /// no limit.
    static func speed(_ raw: JSON, _ key: String) throws(RPCError) -> Int64? {
        let text = try string(raw, key)
        let rate: ByteRate
        do {
            rate = try ByteRate(parsing: text)
        } catch {
            throw .invalidParams("option \(key): \(error) 0 means no limit.")
        }
        return rate.bytesPerSecond == 0 ? nil : rate.bytesPerSecond
    }

    /// `out` is one file name: no directory part, nothing that walks out of `dir`.
    static func outputName(_ name: String) throws(RPCError) -> String {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.utf8.contains(0),
            !name.contains(where: { $0 == "\r" || $0 == "\n" })
        else {
            throw .invalidParams(
                "option out must be a file name without '/' (got '\(name)'); use dir for the directory.")
        }
        return name
    }

    /// A header value cannot carry CR or LF: they would start a header of the sender's choosing.
    static func headerValue(_ value: String, _ key: String) throws(RPCError) -> String {
        guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw .invalidParams("option \(key) must not contain CR, LF or NUL characters.")
        }
        return value
    }

    /// `header`: one "Name: value" string or an array of them.
    static func headers(_ raw: JSON) throws(RPCError) -> [String] {
        let items: [JSON]
        switch raw {
        case .string: items = [raw]
        case .array(let a): items = a
        default: throw .invalidParams("option header must be a string or an array of strings.")
        }
        var out: [String] = []
        for item in items {
            guard case .string(let line) = item else {
                throw .invalidParams("option header must be a string or an array of strings.")
            }
            let checked = try headerValue(line, "header")
            guard let colon = checked.firstIndex(of: ":"), colon != checked.startIndex,
                !checked[..<colon].contains(where: { $0 == " " || $0 == "\t" })
            else {
                throw .invalidParams("option header must look like 'Name: value' (got '\(line)').")
            }
            out.append(checked)
        }
        return out
    }

    /// aria2's `checksum=TYPE=DIGEST`; segget verifies sha-256 and md5.
    static func checksum(_ spec: String) throws(RPCError) -> String {
        guard let eq = spec.firstIndex(of: "=") else {
            throw .invalidParams("option checksum must look like sha-256=HEX or md5=HEX (got '\(spec)').")
        }
        let algorithm = spec[..<eq].lowercased()
        let hex = spec[spec.index(after: eq)...].lowercased()
        let length: Int
        switch algorithm {
        case "sha-256", "sha256": length = 64
        case "md5": length = 32
        default:
            throw .invalidParams("checksum type '\(algorithm)' is not supported; use sha-256 or md5.")
        }
        guard hex.count == length, hex.allSatisfy(\.isHexDigit) else {
            throw .invalidParams("the \(algorithm) checksum must be \(length) hex digits.")
        }
        return (length == 64 ? "sha-256=" : "md5=") + hex
    }

    // MARK: Directories

    /// The absolute directory `dir` names, symlinks resolved as far as it exists; refused unless it
    /// lies inside the root (or the daemon allows any directory). A relative `dir` is under the root.
    public static func confineDirectory(_ requested: String, policy: RPCPolicy) throws(RPCError) -> String {
        guard !requested.isEmpty, !requested.utf8.contains(0) else {
            throw .invalidParams("option dir must name a directory.")
        }
        let absolute = requested.hasPrefix("/") ? requested : policy.root + "/" + requested
        let resolved = resolvePath(absolute)
        if policy.allowAnyDirectory { return resolved }
        let root = resolvePath(policy.root)
        guard resolved == root || resolved.hasPrefix(root == "/" ? "/" : root + "/") else {
            throw .failed(
                "dir '\(requested)' is outside the download root \(root); the daemon only writes under its --dir (start it with --allow-any-dir to lift this)."
            )
        }
        return resolved
    }

    /// `realpath` of the longest existing prefix, then the rest with `.` and `..` applied lexically.
    /// A `..` in the part that does not exist yet cannot climb through a symlink, since there is none.
    public static func resolvePath(_ path: String) -> String {
        var components = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        var rest: [String] = []
        while true {
            let prefix = "/" + components.joined(separator: "/")
            if let real = realpath(prefix, nil) {
                defer { free(real) }
                var parts = String(cString: real).split(separator: "/").map(String.init)
                for part in rest {
                    if part == "." { continue }
                    if part == ".." {
                        if !parts.isEmpty { parts.removeLast() }
                        continue
                    }
                    parts.append(part)
                }
                return "/" + parts.joined(separator: "/")
            }
            guard let last = components.popLast() else { return "/" }
            rest.insert(last, at: 0)
        }
    }
}

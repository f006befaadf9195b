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
    /// `gid`: the GID the new task is to have (aria2's option: 16 hex digits, not all zero, not a
    /// task's already); nil: one is drawn.
    public var gid: TaskID?

    public init(options: TaskOptions = TaskOptions(), paused: Bool = false) {
        self.options = options
        self.paused = paused
    }

    /// Every per-download option is read through ``OptionSchema`` (the command line's and the input
    /// file's rules and sentences); `pause` is the one RPC-only option that is not a download setting.
    /// Options segget knows but ignores because they make no sense for it (BitTorrent, FTP, …) are
    /// accepted silently, as aria2 does for options that do not apply to a download.
    public static func parse(_ value: JSON?, onto base: TaskOptions = TaskOptions(), policy: RPCPolicy)
        throws(RPCError) -> Aria2TaskOptions
    {
        var result = Aria2TaskOptions(options: base)
        guard let value, value != .null else { return result }
        guard case .object(let members) = value else { throw .invalidParams("options must be an object.") }
        for (key, raw) in members {
            if let spec = OptionSchema.spec(key) {
                // An empty out or dir is not set, as aria2 takes it (front-ends send a form's empty
                // fields): the name from the URL, the root directory (or, changed, the default again).
                // An empty all-proxy too: the proxies of the daemon's environment apply, as aria2's
                // own (on the command line `--proxy ''` is no proxy at all, as in curl).
                if raw == .string(""), [OptionSchema.outputName.key, OptionSchema.directory.key, OptionSchema.proxy.key].contains(spec.key) {
                    spec.clear(&result.options)
                    continue
                }
                // A repeatable option given over RPC replaces the task's values as a whole, as in aria2.
                if spec.repeatable { spec.clear(&result.options) }
                try apply(spec, raw, to: &result.options)
                if spec.key == OptionSchema.directory.key, let dir = result.options.directory {
                    result.options.directory = try confineDirectory(dir, policy: policy)
                }
            } else if key == "pause" {
                result.paused = try bool(raw, key)
            } else if key == "gid" {
                let text = try string(raw, key)
                guard let id = TaskID(gid: text) else {
                    throw .failed("'\(text)' is not a GID: give 16 hex digits, not all zero (or no gid, and one is drawn). Nothing was added.")
                }
                result.gid = id
            }
        }
        return result
    }

    /// One option's JSON (a string, a number, or for a repeatable option an array of strings; `header`
    /// also as one string of lines) through the schema; a refusal is `option KEY: SENTENCE`.
    static func apply(_ spec: OptionSpec, _ raw: JSON, to options: inout FileOptions) throws(RPCError) {
        let texts: [String]
        if spec.repeatable, case .array(let items) = raw {
            texts = try items.map { (item) throws(RPCError) -> String in
                guard case .string(let s) = item else {
                    throw .invalidParams("option \(spec.key) must be a string or an array of strings.")
                }
                return s
            }
        } else if spec.key == OptionSchema.header.key, case .string(let s) = raw {
            // getOption answers `header` as aria2 does, one string with a line per header; sent back
            // (aria2p's retry adds a task again with the options it read) it is read the same way. A
            // carriage return is still refused, and an array's items may hold no line break at all.
            texts = s.split(separator: "\n").map(String.init)
        } else {
            texts = [try string(raw, spec.key)]
        }
        for text in texts {
            do {
                try spec.apply(text, &options)
            } catch {
                throw .invalidParams("option \(spec.key): \(error.message)")
            }
        }
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

    /// A connection count (the global `split`), read as a download's.
    static func count(_ raw: JSON, _ key: String) throws(RPCError) -> Int {
        var o = FileOptions()
        try apply(OptionSchema.split, raw, to: &o)
        return o.connections ?? 0
    }

    /// aria2's `max-connection-per-server`: 1 to 16, read as a download's.
    static func perServer(_ raw: JSON, _ key: String) throws(RPCError) -> Int {
        var o = FileOptions()
        try apply(OptionSchema.perServer, raw, to: &o)
        return o.maxConnectionsPerServer ?? 16
    }

    /// A queue-wide `max-tries`, `retry-wait`, `timeout` or `connect-timeout` (the default of every
    /// task that sets none): read as a download's, in whole seconds, as aria2 takes them.
    static func taskRetry(_ key: String, _ raw: JSON, into r: inout TaskRetries) throws(RPCError) {
        guard let spec = OptionSchema.spec(key) else { return }
        var o = FileOptions()
        try apply(spec, raw, to: &o)
        if let n = o.maxTries { r.maxTries = n }
        for (seconds, path) in [(o.retryWait, \TaskRetries.retryWait), (o.stallTimeout, \.timeout), (o.connectTimeout, \.connectTimeout)] {
            guard let seconds else { continue }
            guard seconds == seconds.rounded() else {
                throw .invalidParams("option \(key): '\(OptionSchema.secondsText(seconds))' is not a whole number of seconds; the queue-wide value is whole seconds, as in aria2 (a task's own may have a fraction).")
            }
            r[keyPath: path] = Int(seconds)
        }
    }

    static func bool(_ raw: JSON, _ key: String) throws(RPCError) -> Bool {
        switch raw {
        case .bool(let b): return b
        case .string("true"): return true
        case .string("false"): return false
        default: throw .invalidParams("option \(key) must be true or false.")
        }
    }

    /// The overall limit (`max-overall-download-limit`) in aria2's size syntax (`0`, `500K`, `1M`); 0
    /// means no limit.
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

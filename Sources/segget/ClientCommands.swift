import ArgumentParser
import Glibc
import Segget
import SeggetRPC

/// Where the daemon listens, shared by the client verbs.
struct DaemonAddress: ParsableArguments {
    @Option(name: .customLong("rpc-port"), parsing: .unconditional, help: "The daemon's JSON-RPC port (default 6800, or $SEGGET_RPC_PORT).")
    var port: Int?

    @Option(
        name: .customLong("rpc-secret"),
        help: "The daemon's token (default $SEGGET_RPC_SECRET, else the daemon's token file).")
    var secret: String?

    @Option(
        name: .customLong("rpc-secret-file"),
        help: "The daemon's token file (default $XDG_STATE_HOME/segget/rpc-secret or ~/.local/state/segget/rpc-secret)."
    )
    var secretFile: String?

    @Option(name: .customLong("rpc-host"), help: "The daemon's host.")
    var host: String = "127.0.0.1"

    func validate() throws {
        if let port { try ArgumentValue.checkPort(port, option: "--rpc-port") }
    }

    var resolvedPort: Int {
        port ?? getenv("SEGGET_RPC_PORT").flatMap { Int(String(cString: $0)) } ?? 6800
    }

    /// The token to send and where it came from: --rpc-secret, $SEGGET_RPC_SECRET, else the token file
    /// (only for a daemon on loopback: this machine's token is not sent elsewhere). Nil when none is found.
    func token() throws -> (token: String?, source: String) {
        if let secret, !secret.isEmpty { return (secret, "from --rpc-secret") }
        if let env = getenv("SEGGET_RPC_SECRET").map({ String(cString: $0) }), !env.isEmpty {
            return (env, "from $SEGGET_RPC_SECRET")
        }
        let path = secretFile ?? TokenFile.defaultPath()
        guard TokenFile.isLoopback(host) else {
            return (nil, "not read from \(path): \(host) is not this machine; give --rpc-secret")
        }
        if let token = try TokenFile.load(path) { return (token, "from \(path)") }
        return (nil, "\(path) does not exist; the daemon makes it on its first start, unless it was given --rpc-secret or $SEGGET_RPC_SECRET")
    }

    /// Runs one call; a failure becomes a sentence and segget's exit code (3 unreachable, 2 refused).
    func call(_ method: String, _ params: [JSON] = []) throws -> JSON {
        let (token, source) = try token()
        do {
            return try RPCClient(host: host, port: resolvedPort, secret: token).call(method, params)
        } catch .remote(let e) {
            if e == .unauthorized {
                throw SeggetError.refused(
                    "The daemon refused \(method): Unauthorized (the token \(token == nil ? "is missing" : "is wrong"); \(source)). A daemon started with --rpc-secret needs the same --rpc-secret or $SEGGET_RPC_SECRET here."
                )
            }
            throw SeggetError.refused(Self.refusal(method, e.message))
        } catch {
            throw SeggetError(.network, error.description)
        }
    }

    /// What to say of the daemon's refusal `message` of `method`: a GID it does not know (segget's and
    /// aria2's "GID … is not found", aria2's "No such download for GID#…" once a result is purged) or
    /// a prefix of several (segget's "GID … is ambiguous: …") is said as such, with where to find the
    /// GIDs, not as a refusal of a method the user never named; other refusals keep the method's name.
    static func refusal(_ method: String, _ message: String) -> String {
        let lookup = "'segget ls' lists its tasks."
        if message.hasPrefix("GID "), message.hasSuffix(" is not found") {
            return "The daemon has no task with GID \(message.dropFirst(4).dropLast(13)); \(lookup)"
        }
        if message.hasPrefix("No such download for GID#") {
            return "The daemon has no task with GID \(message.dropFirst(25)); \(lookup)"
        }
        if message.hasPrefix("GID "), let cut = message.firstRange(of: " is ambiguous: ") {
            let gid = message[message.index(message.startIndex, offsetBy: 4)..<cut.lowerBound]
            return "\(gid) is the start of more than one GID (\(message[cut.upperBound...])); give more of it. \(lookup)"
        }
        return "The daemon refused \(method): \(message)"
    }

    /// Runs `body` for each of `items` (GIDs, URLs), all of them even after one fails: a command
    /// given several stopped at the first refusal, silent about those done before and those never
    /// tried. With one item its error is thrown as it is; with several, one error says how many were
    /// `done` and each refusal (exit code: the first failure's).
    static func forEach(_ items: [String], done: String, _ body: (String) throws -> Void) throws {
        var failures: [SeggetError] = []
        for item in items {
            do { try body(item) } catch let e as SeggetError { failures.append(e) } catch {
                failures.append(SeggetError(.usage, "\(error)"))
            }
        }
        guard let first = failures.first else { return }
        guard items.count > 1 else { throw first }
        // The daemon's words, on one line each: a line break in them could pass for segget's own output.
        let reasons = failures.map { e -> String in
            let line = DisplayText.escaping(e.message, keepingLineBreaks: false)
            return line.hasSuffix(".") ? line : line + "."
        }.joined(separator: " ")
        let message = "\(done) \(items.count - failures.count) of \(items.count); \(failures.count) failed. \(reasons)"
        throw first.kind == .usage && !first.pointsToHelp ? SeggetError.refused(message) : SeggetError(first.kind, message)
    }
}

/// `segget add URL…`: queue downloads in the running daemon.
struct Add: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Queue downloads in the running daemon (see 'segget daemon'); prints each task's GID.")

    @Argument(help: "The http:// or https:// URLs to queue, one task each.")
    var urls: [String]

    @Option(
        name: [.short, .customLong("dir")], help: "Save into this directory, which must lie inside the daemon's --dir; a relative one is taken from the current directory, as for a download.",
        transform: OptionSchema.directory.argument)
    var directory: String?

    @Option(
        name: [.short, .customLong(OptionSchema.outputName.longName)], help: OptionSchema.outputName.argumentHelp,
        transform: OptionSchema.outputName.argument)
    var output: String?

    @Option(
        name: [.customShort("n"), .customLong(OptionSchema.split.longName)], help: OptionSchema.split.argumentHelp,
        transform: OptionSchema.split.argument)
    var connections: String?

    @OptionGroup(title: "HTTP requests") var request: RequestOptions

    @Option(
        name: .customLong(OptionSchema.maxSpeed.longName), help: OptionSchema.maxSpeed.argumentHelp,
        transform: OptionSchema.maxSpeed.argument)
    var maxSpeed: String?

    @Option(help: OptionSchema.checksum.argumentHelp, transform: OptionSchema.checksum.argument)
    var checksum: [String] = []

    @OptionGroup(title: "Retries and time limits (the daemon's defaults where not given)") var retries: AddRetryOptions

    @Flag(help: "Add the tasks paused.")
    var paused = false

    @OptionGroup var daemon: DaemonAddress

    func validate() throws {
        guard !urls.isEmpty else { throw ValidationError("give at least one URL to add.") }
        if urls.count > 1 && output != nil { throw ValidationError("-o names one file; with several URLs use -d DIR.") }
        if urls.count > 1 && !checksum.isEmpty { throw ValidationError("--checksum applies to one URL.") }
    }

    /// The task's options, read through ``OptionSchema`` as the daemon will read them again.
    func fileOptions() throws -> FileOptions {
        var o = try request.fileOptions()
        if let d = directory {
            // A relative -d means relative to here, as for a download; the daemon checks it against its root.
            try o.set(OptionSchema.directory, absolutePath(d))
        }
        try o.set(OptionSchema.outputName, output)
        try o.set(OptionSchema.split, connections)
        // aria2c opens min(split, this) connections to one server and takes at most 16 here;
        // segget reads split alone.
        if let n = o.connections { o.maxConnectionsPerServer = min(n, 16) }
        try o.set(OptionSchema.maxSpeed, maxSpeed)
        try o.set(OptionSchema.checksum, checksum)
        try retries.set(&o)
        return o
    }

    /// The options object of aria2.addUri: every option given, by its aria2 name, as the schema writes it.
    func aria2Options() throws -> JSON {
        var members: [(String, JSON)] = try fileOptions().fields.map { field in
            let repeatable = OptionSchema.spec(field.key)?.repeatable ?? false
            return (field.key, repeatable ? .array(field.values.map(JSON.string)) : .string(field.values[0]))
        }
        if paused { members.append(("pause", .string("true"))) }
        return .object(members)
    }

    func run() throws {
        // Checked before any is added, as the daemon checks them: a list with one bad URL added
        // those before it and then failed.
        for url in urls where !["http://", "https://"].contains(where: { url.lowercased().hasPrefix($0) }) {
            throw SeggetError(
                .usage, "'\(DisplayText.escaping(url, keepingLineBreaks: false))' is not an http:// or https:// URL; nothing was added.")
        }
        let options = try aria2Options()
        try DaemonAddress.forEach(urls, done: "Added") { url in
            let gid = try daemon.call("aria2.addUri", [.array([.string(url)]), options])
            StdoutLines.write(DisplayText.escaping(gid.stringValue ?? gid.serialized, keepingLineBreaks: false))
        }
    }
}

/// `segget token`: the daemon's token and what to paste into other front-ends.
struct ShowToken: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Show the daemon's RPC token and the addresses to give aria2p, AriaNg or webui-aria2.",
        discussion: """
            The daemon makes its token on its first start, in its state directory with mode 0600; \
            segget's own client commands read it from there. Other front-ends need it pasted in.
            """)
    @OptionGroup var daemon: DaemonAddress
    func run() throws {
        let (token, source) = try daemon.token()
        StdoutLines.write(
            RPCToken.connectionText(token: token, host: daemon.host, port: daemon.resolvedPort, source: source))
        if token == nil { throw SeggetError(.usage, "No token found: \(source).") }
    }
}

/// `segget pause|resume|rm GID…`.
struct Pause: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause tasks in the running daemon (their progress is kept).")
    @Argument(help: "The GIDs of the tasks ('all' for every task).") var gids: [String]
    @OptionGroup var daemon: DaemonAddress
    func run() throws {
        if gids == ["all"] { _ = try daemon.call("aria2.forcePauseAll"); return }
        try DaemonAddress.forEach(gids, done: "Paused") { gid in _ = try daemon.call("aria2.forcePause", [.string(gid)]) }
    }
}

struct Resume: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume", abstract: "Resume paused tasks in the running daemon.")
    @Argument(help: "The GIDs of the tasks ('all' for every task).") var gids: [String]
    @OptionGroup var daemon: DaemonAddress
    func run() throws {
        if gids == ["all"] { _ = try daemon.call("aria2.unpauseAll"); return }
        try DaemonAddress.forEach(gids, done: "Resumed") { gid in _ = try daemon.call("aria2.unpause", [.string(gid)]) }
    }
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove tasks from the running daemon: a queued or running one stops and stays in the history as removed; one that has stopped is dropped from the history.")
    @Argument(help: "The GIDs of the tasks.") var gids: [String]
    @OptionGroup var daemon: DaemonAddress
    func validate() throws {
        // pause and resume take 'all'; rm does not (it would drop every task and its history), so
        // the word is refused here rather than looked up as a GID.
        if gids.contains("all") {
            throw ValidationError(
                "rm takes GIDs, not 'all' ('segget ls' lists the tasks; 'segget pause all' stops every task and keeps its progress)")
        }
    }
    func run() throws {
        try DaemonAddress.forEach(gids, done: "Removed") { gid in
            let status = try daemon.call("aria2.tellStatus", [.string(gid), .array([.string("status")])])["status"]?
                .stringValue
            if status == "active" || status == "waiting" || status == "paused" {
                _ = try daemon.call("aria2.forceRemove", [.string(gid)])
            } else {
                _ = try daemon.call("aria2.removeDownloadResult", [.string(gid)])
            }
        }
    }
}

/// `segget ls`: the daemon's tasks as a table, as JSON, or live.
struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List the running daemon's tasks: active, waiting, paused and finished.")

    @Flag(help: "Print the aria2 status objects as one JSON array.")
    var json = false

    @Flag(name: .shortAndLong, help: "Redraw the table every second until interrupted.")
    var watch = false

    @OptionGroup var daemon: DaemonAddress

    static let keys: JSON = .array(
        [
            "gid", "status", "totalLength", "completedLength", "downloadSpeed", "connections", "dir", "files",
            "errorMessage",
        ]
        .map(JSON.string))

    func fetch() throws -> [JSON] {
        let active = try daemon.call("aria2.tellActive", [Self.keys]).arrayValue ?? []
        return active + (try pages("aria2.tellWaiting")) + (try pages("aria2.tellStopped"))
    }

    /// Every task `method` lists, 1,000 a call (it showed the first 1,000 waiting tasks alone).
    func pages(_ method: String) throws -> [JSON] {
        var all: [JSON] = []
        while true {
            let page = try daemon.call(method, [.int(Int64(all.count)), .int(1000), Self.keys]).arrayValue ?? []
            all += page
            if page.count < 1000 { return all }
        }
    }

    func run() throws {
        if json {
            StdoutLines.write(JSON.array(try fetch()).serialized)
            return
        }
        guard watch else {
            StdoutLines.write(Self.table(try fetch()))
            return
        }
        while true {
            let stat = try daemon.call("aria2.getGlobalStat")
            func n(_ key: String) -> String { stat[key]?.stringValue ?? "?" }
            let speed = Format.rate(Double(stat["downloadSpeed"]?.stringValue ?? "") ?? 0)
            let summary =
                "\(n("numActive")) active, \(n("numWaiting")) waiting, \(n("numStopped")) stopped; \(speed) in all (Ctrl-C to quit)\n\n"
            let text = summary + Self.table(try fetch())
            // Home, draw, clear what is left of the previous frame.
            StdoutLines.write("\u{1B}[H\u{1B}[2J" + text)
            usleep(1_000_000)
        }
    }

    /// One line per task: GID, status, progress, size, speed, name.
    static func table(_ tasks: [JSON]) -> String {
        var lines = [
            pad("GID", 16) + "  " + pad("STATUS", 8) + "  " + pad("DONE", 6, right: true) + "  "
                + pad("SIZE", 10, right: true) + "  " + pad("SPEED", 12, right: true) + "  NAME"
        ]
        for t in tasks {
            let total = Int64(t["totalLength"]?.stringValue ?? "") ?? 0
            let done = Int64(t["completedLength"]?.stringValue ?? "") ?? 0
            let speed = Int64(t["downloadSpeed"]?.stringValue ?? "") ?? 0
            let status = t["status"]?.stringValue ?? "?"
            let percent = total > 0 ? String(done * 100 / total) + "%" : "-"
            var name = t["files"]?.arrayValue?.first?["path"]?.stringValue ?? ""
            if name.isEmpty {
                name = t["files"]?.arrayValue?.first?["uris"]?.arrayValue?.first?["uri"]?.stringValue ?? ""
            } else if let slash = name.lastIndex(of: "/") {
                name = String(name[name.index(after: slash)...])
            }
            if status == "error", let message = t["errorMessage"]?.stringValue, !message.isEmpty {
                name += "  (\(message))"
            }
            // A daemon's answer quotes servers (names, messages): shown escaped, one line per task.
            name = DisplayText.escaping(name, keepingLineBreaks: false)
            lines.append(
                pad(t["gid"]?.stringValue ?? "", 16) + "  " + pad(status, 8) + "  " + pad(percent, 6, right: true)
                    + "  "
                    + pad(total > 0 ? Format.bytes(total) : "-", 10, right: true) + "  "
                    + pad(status == "active" ? Format.rate(Double(speed)) : "", 12, right: true) + "  " + name)
        }
        if tasks.isEmpty { lines.append("(no tasks)") }
        return lines.joined(separator: "\n")
    }

    static func pad(_ s: String, _ width: Int, right: Bool = false) -> String {
        let fill = String(repeating: " ", count: max(0, width - s.count))
        return right ? fill + s : s + fill
    }
}

/// `segget add`'s `--max-tries`, `--retry-wait`, `--stall-timeout` and `--connect-timeout`: aria2's per-task
/// options, sent with the task (the download command's own flags set them for a whole run).
struct AddRetryOptions: ParsableArguments {
    @Option(
        name: .customLong(OptionSchema.maxTries.longName), help: OptionSchema.maxTries.argumentHelp,
        transform: OptionSchema.maxTries.argument)
    var maxTries: String?

    @Option(
        name: .customLong(OptionSchema.retryWait.longName), help: OptionSchema.retryWait.argumentHelp,
        transform: OptionSchema.retryWait.argument)
    var retryWait: String?

    @Option(
        name: .customLong(OptionSchema.timeout.longName), help: OptionSchema.timeout.argumentHelp,
        transform: OptionSchema.timeout.argument)
    var timeout: String?

    @Option(
        name: .customLong(OptionSchema.connectTimeout.longName), help: OptionSchema.connectTimeout.argumentHelp,
        transform: OptionSchema.connectTimeout.argument)
    var connectTimeout: String?

    func set(_ o: inout FileOptions) throws {
        try o.set(OptionSchema.maxTries, maxTries)
        try o.set(OptionSchema.retryWait, retryWait)
        try o.set(OptionSchema.timeout, timeout)
        try o.set(OptionSchema.connectTimeout, connectTimeout)
    }
}

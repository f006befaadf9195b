import ArgumentParser
import Dispatch
import Glibc
import Segget
import SeggetQueue
import SeggetRPC
import SeggetSystem
import Synchronization

/// `segget daemon`: the download queue in the foreground, served over aria2's JSON-RPC.
struct Daemon: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run the download manager in the foreground, controlled over aria2's JSON-RPC.",
        discussion: """
            The daemon keeps its queue in an SQLite database: every task is stored before the call \
            that adds it returns, and after a crash, kill -9 or reboot the next start picks every \
            task up where it was (active downloads resume from their journals). It serves aria2's \
            JSON-RPC 2.0 at http://127.0.0.1:PORT/jsonrpc and ws://127.0.0.1:PORT/jsonrpc (and on \
            [::1]), so \
            aria2p, AriaNg, webui-aria2 and segget's own add/ls/pause/resume/rm commands can drive \
            it. Every call must carry the daemon's token: on its first start it makes a random one in \
            its state directory (mode 0600), which segget's client commands read from there and \
            'segget token' shows for other front-ends. On loopback it answers only requests addressed \
            to 127.0.0.1, [::1] or localhost. SIGINT or SIGTERM stop it cleanly.
            """
    )

    @Option(
        name: .customLong("rpc-listen-port"), parsing: .unconditional, help: "The TCP port for JSON-RPC (default 6800).",
        transform: ArgumentValue.wholeNumber)
    var port: Int = 6800

    @Option(
        name: .customLong("rpc-secret"),
        help:
            "Require this token ('token:SECRET') on every call instead of the token file's (default $SEGGET_RPC_SECRET; empty: the token file). Hidden from the process list as the daemon starts; $SEGGET_RPC_SECRET is not shown there at all."
    )
    var secret: String?

    @Option(
        name: .customLong("rpc-secret-file"),
        help:
            "The token file, made with a random token on first start (default $XDG_STATE_HOME/segget/rpc-secret or ~/.local/state/segget/rpc-secret)."
    )
    var secretFile: String?

    @Flag(
        name: .customLong("rpc-insecure-no-secret"),
        help:
            "Answer calls without any token (loopback only): every web page open in your browser can then drive the daemon."
    )
    var noSecret = false

    @Flag(
        name: .customLong("rpc-listen-all"),
        help: "Listen on every interface instead of loopback only (the token is then all that protects it).")
    var listenAll = false

    @Option(
        name: [.short, .customLong("dir")],
        help:
            "The download root: files go here, and a 'dir' sent over RPC must lie inside it (default: the current directory)."
    )
    var directory: String?

    @Flag(
        name: .customLong("allow-any-dir"),
        help: "Let RPC clients save into any directory the daemon can write, not only under --dir.")
    var allowAnyDirectory = false

    @Option(
        name: .customLong("max-concurrent-downloads"), parsing: .unconditional, help: "Downloads running at once (default 5, or what a client last set).",
        transform: ArgumentValue.wholeNumber)
    var maxConcurrent: Int?

    @Option(
        name: .customLong("total-connections"), parsing: .unconditional, help: "Connections across all running downloads (default 16).",
        transform: ArgumentValue.wholeNumber)
    var totalConnections: Int = 16

    @Option(
        name: .customLong("max-connections-per-host"), parsing: .unconditional,
        help: "Requests at once to one host (scheme, name and port) across all downloads, 1 to 16: aria2's max-connection-per-server (default 16, or what a client last set).",
        transform: ArgumentValue.wholeNumber)
    var maxConnectionsPerHost: Int?

    @Option(
        name: .customLong("max-overall-download-limit"), parsing: .unconditional,
        help: "Cap the download rate of all downloads together, e.g. 20M (default: no cap, or what a client last set).",
        transform: ArgumentValue.rate(atLeast: ByteRate(bytesPerSecond: 0)))
    var maxOverall: ByteRate?

    @Option(
        name: .customLong("link-renewal-wait"), parsing: .unconditional,
        help: "Seconds a task whose link expired waits for a new URI (segget.onLinkExpired, answered with aria2.changeUri) before it fails (default 120).",
        transform: ArgumentValue.seconds)
    var linkRenewalWait: Double = 120

    @Option(
        name: .customLong("speed-schedule"),
        help: ArgumentHelp(
            "Overall limits by local time of day, e.g. '08:00-18:00=2M,18:00-08:00=0' (0: no limit; outside the windows --max-overall-download-limit applies; 'none' clears; default: the schedule stored in the database).",
            valueName: "windows"))
    var speedSchedule: String?

    @Option(
        name: [.customLong("ca-certificate"), .customLong("cacert")],
        help: ArgumentHelp(
            "Verify every task's servers against the authorities in this PEM file instead of the system's.", valueName: "file"))
    var caCertificate: String?

    @Option(help: ArgumentHelp("Show this PEM client certificate to every task's servers that ask for one (its unencrypted key in the same file, or in --private-key).", valueName: "file"))
    var certificate: String?

    @Option(name: .customLong("private-key"), help: ArgumentHelp("The unencrypted PEM private key of --certificate.", valueName: "file"))
    var privateKey: String?

    /// For an https proxy a task goes through (its `all-proxy`, or the environment's).
    @OptionGroup var proxyTLS: ProxyTLSOptions

    @Option(
        help:
            "The queue's SQLite database (default $XDG_STATE_HOME/segget/queue.sqlite or ~/.local/state/segget/queue.sqlite)."
    )
    var database: String?

    func validate() throws {
        try ArgumentValue.checkPort(port, option: "--rpc-listen-port")
        guard linkRenewalWait > 0 && linkRenewalWait <= 86400 else {
            throw ValidationError("--link-renewal-wait takes more than 0 and at most 86400 seconds (got \(linkRenewalWait)).")
        }
        if noSecret && listenAll {
            throw ValidationError(
                "--rpc-insecure-no-secret is for loopback only; --rpc-listen-all exposes the daemon to the network, so it needs the token."
            )
        }
        if noSecret && !(secret ?? "").isEmpty {
            throw ValidationError("--rpc-insecure-no-secret and --rpc-secret contradict each other; give one.")
        }
        if let n = maxConcurrent, !(1...64).contains(n) {
            throw ValidationError("--max-concurrent-downloads takes a number from 1 to 64 (got \(n)).")
        }
        guard (1...512).contains(totalConnections) else {
            throw ValidationError("--total-connections takes a number from 1 to 512 (got \(totalConnections)).")
        }
        if let text = speedSchedule {
            do {
                _ = try SpeedSchedule(parsing: text)
            } catch {
                throw ValidationError("--speed-schedule: \(error)")
            }
        }
        if let n = maxConnectionsPerHost, !(1...16).contains(n) {
            throw ValidationError("--max-connections-per-host takes a number from 1 to 16 (got \(n)).")
        }
    }

    /// `$XDG_STATE_HOME/segget/queue.sqlite`, else `~/.local/state/segget/queue.sqlite`.
    static func defaultDatabasePath() -> String {
        if let state = getenv("XDG_STATE_HOME").map({ String(cString: $0) }), state.hasPrefix("/") {
            return state + "/segget/queue.sqlite"
        }
        let home = getenv("HOME").map { String(cString: $0) } ?? "."
        return home + "/.local/state/segget/queue.sqlite"
    }

    /// Creates a directory and its parents (mode 0700 for state, which may hold header secrets).
    static func makeDirectories(_ path: String, mode: mode_t) {
        try? FileSystem.makeDirectories(path, permissions: UInt32(mode))
    }

    func run() throws {
        let given = absolutePath(directory ?? currentDirectory())
        Self.makeDirectories(given, mode: 0o755)
        let root = Aria2TaskOptions.resolvePath(given)
        let dbPath = database ?? Self.defaultDatabasePath()
        if let slash = dbPath.lastIndex(of: "/"), slash != dbPath.startIndex {
            Self.makeDirectories(String(dbPath[..<slash]), mode: 0o700)
        }

        var settings = QueueSettings(downloadRoot: root)
        settings.maxActive = maxConcurrent ?? settings.maxActive
        settings.connectionBudget = totalConnections
        settings.maxConnectionsPerServer = maxConnectionsPerHost ?? settings.maxConnectionsPerServer
        settings.speedSchedule = try speedSchedule.map { text throws -> SpeedSchedule in try SpeedSchedule(parsing: text) }
        settings.maxOverallSpeed = maxOverall.flatMap { $0.bytesPerSecond > 0 ? $0.bytesPerSecond : nil }
        settings.allowAnyDirectory = allowAnyDirectory
        settings.linkRenewalWait = linkRenewalWait
        settings.tls = try tlsFiles(caCertificate: caCertificate, certificate: certificate, privateKey: privateKey)
        settings.proxyTLS = try proxyTLS.files()
        // One daemon per queue: a second one on the same database started with no complaint, took
        // the first one's running tasks for its own, failed them ("another segget is already
        // downloading into ...") while the first went on, and the two then disagreed on the queue.
        // The lock is held until the process ends.
        let lockPath = dbPath + ".lock"
        let lock: FileDescriptor
        do throws(Errno) {
            lock = try FileDescriptor.open(lockPath, .readWrite, options: [.create, .closeOnExec], permissions: 0o600)
        } catch {
            throw SeggetError(.fileSystem, "cannot open the queue's lock file \(lockPath): \(error). Check the directory's permissions, or give --database.")
        }
        do throws(Errno) {
            try lock.tryLock(.exclusive)
        } catch {
            lock.close()
            throw SeggetError(
                .fileSystem,
                "another segget daemon is using the queue \(dbPath) (it holds \(lockPath)). Stop it first (aria2.shutdown, or SIGTERM), or give --database to run a second daemon with a queue of its own.")
        }
        let queue: DownloadQueue
        do {
            queue = try DownloadQueue(databasePath: dbPath, settings: settings)
        } catch {
            throw SeggetError(.fileSystem, "\(error.message) Give --database to use another file.")
        }
        useStoredGlobals(queue)
        for task in queue.tasksLeftAside {
            let line = "segget daemon: task \(task.gid) is not run or listed: \(task.why). Its row is kept in \(dbPath) as it is, for a segget that can read it."
            writeStderr(DisplayText.escaping(line, keepingLineBreaks: false) + "\n")
        }

        let token = try resolveToken()
        let hub = NotificationHub()
        let stop = ShutdownSignal()
        let methods = Aria2Methods(
            queue: queue, policy: RPCPolicy(root: root, allowAnyDirectory: allowAnyDirectory),
            sessionID: Self.randomHex(20), listening: .init(port: port, all: listenAll), requestShutdown: { force in stop.fire(force: force) })
        let rpcGuard = RPCGuard(hostPolicy: listenAll ? .anyHost : .loopback, log: { writeStderr($0) })
        let server = RPCServer(
            processor: RPCProcessor(secret: token, handler: methods), hub: hub, rpcGuard: rpcGuard,
            host: listenAll ? "0.0.0.0" : "127.0.0.1", alsoHost: listenAll ? nil : "::1", port: port)

        // Signals arrive on a dispatch queue, not in a handler, so stopping can do real work.
        for sig in [SIGINT, SIGTERM] { signal(sig, SIG_IGN) }
        let sources = [SIGINT, SIGTERM].map { sig in
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { stop.fire(force: false) }
            source.resume()
            return source
        }
        defer { sources.forEach { $0.cancel() } }

        let done = DispatchSemaphore(value: 0)
        let outcome = DaemonFailure()
        let listenAll = self.listenAll
        let port = self.port
        // Subscribed before the queue starts: the starts of restored tasks come at once, and a
        // task missing from `running` would have its pause or removal notified to no one.
        let subscription = queue.events
        Task {
            let events = Task {
                var running = Set<TaskID>()
                for await event in subscription {
                    Self.forward(event, to: hub, running: &running)
                    DaemonLog.record(event, of: queue)
                }
            }
            let serving = Task {
                do {
                    let ipv6 = Mutex(!listenAll)
                    try await server.run(
                        ready: { bound in
                            let addresses = listenAll ? "0.0.0.0" : ipv6.withLock { $0 } ? "127.0.0.1 and [::1]" : "127.0.0.1"
                            writeStderr(
                                "segget daemon: serving aria2 JSON-RPC on \(addresses), port \(bound), at /jsonrpc (HTTP and WebSocket); files under \(root); queue in \(dbPath)\n"
                            )
                        },
                        unbound: { host, error in
                            ipv6.withLock { $0 = false }
                            writeStderr("segget daemon: not listening on [\(host)] as well (\(RPCServer.describe(error))); 127.0.0.1 serves.\n")
                        })
                } catch {
                    outcome.set(
                        SeggetError(
                            .network,
                            "Cannot listen on port \(port): \(RPCServer.describe(error)). Is another daemon or aria2c running? Give another --rpc-listen-port."
                        ))
                    stop.fire(force: true)
                }
            }
            queue.start()
            let force = await stop.wait()
            server.close()
            // No notifications are wanted once stopping has begun.
            events.cancel()
            await queue.shutdown(force: force)
            _ = await serving.result
            done.signal()
        }
        done.wait()
        if let error = outcome.error { throw error }
        writeStderr("segget daemon: stopped; the queue is saved in \(dbPath).\n")
    }

    /// The token every call must carry: `--rpc-secret`, else the token file's (made if missing); nil only
    /// with `--rpc-insecure-no-secret`, which is logged loudly.
    func resolveToken() throws -> String? {
        if noSecret {
            writeStderr(
                """
                segget daemon: WARNING: --rpc-insecure-no-secret: calls need no token. Any web page open in \
                your browser can queue downloads, read their status and errors, and pause or remove your \
                tasks through this daemon. Drop the flag to require the token (segget token shows it).

                """)
            return nil
        }
        if let secret, !secret.isEmpty { return secret }
        // From the environment (the systemd unit's daemon.env), which other users cannot read; an
        // empty --rpc-secret names the token file, whatever the environment says.
        if secret == nil, let env = getenv("SEGGET_RPC_SECRET").map({ String(cString: $0) }), !env.isEmpty { return env }
        let path = secretFile ?? TokenFile.defaultPath()
        let (token, created) = try TokenFile.loadOrCreate(path)
        writeStderr(
            created
                ? "segget daemon: made a new RPC token in \(path) (mode 0600); 'segget token' shows it and where to paste it.\n"
                : "segget daemon: calls must carry the RPC token in \(path); 'segget token' shows it.\n")
        return token
    }

    /// The settings a client changed while the daemon last ran (see `DownloadQueue.StoredGlobals`),
    /// where this command line does not give them; those it gives win, and their stored values are
    /// forgotten, so that the next start without them has the defaults.
    func useStoredGlobals(_ queue: DownloadQueue) {
        let given: [(DownloadQueue.GlobalSetting, Bool)] = [
            (.maxActive, maxConcurrent != nil), (.maxOverallSpeed, maxOverall != nil),
            (.maxConnectionsPerServer, maxConnectionsPerHost != nil),
        ]
        let forgotten = given.filter(\.1).map(\.0)
        do {
            try queue.forgetStoredGlobals(forgotten)
        } catch {
            let names = forgotten.map(\.rawValue).joined(separator: ", ")
            let why = error.message.hasSuffix(".") ? String(error.message.dropLast()) : error.message
            writeStderr("segget daemon: the values a client stored for \(names) could not be dropped (\(why)); this run uses the command line's, and a later start without those options would use the stored ones.\n")
        }
        let now = queue.settings
        let globals = queue.storedGlobals().without(forgotten)
        let refused = globals.refused(by: now)
        if !refused.isEmpty {
            let list = refused.map { "\($0.rawValue) \(globals.values[$0] ?? 0)" }.joined(separator: ", ")
            writeStderr("segget daemon: the queue holds values this segget does not take (\(list)); it uses its own for those (a client's changeGlobalOption stores new ones).\n")
        }
        let stored = globals.applied(to: now)
        guard stored != now else { return }
        do {
            try queue.changeSettings(stored)
        } catch {
            writeStderr("segget daemon: the settings a client stored in the queue are not used: \(error.message)\n")
        }
    }

    /// aria2's notification for `event`. `running`: the tasks started and not yet paused or ended.
    /// A pause or removal of a task that was not running (waiting, or paused already) is notified
    /// by no one, as aria2 does: a front-end counting events saw a pause with no start before it.
    static func forward(_ event: QueueEvent, to hub: NotificationHub, running: inout Set<TaskID>) {
        switch event {
        case .started(let id):
            running.insert(id)
            hub.notify(method: "aria2.onDownloadStart", gid: id.gid)
        case .paused(let id):
            if running.remove(id) != nil { hub.notify(method: "aria2.onDownloadPause", gid: id.gid) }
        case .stopped(let id):
            if running.remove(id) != nil { hub.notify(method: "aria2.onDownloadStop", gid: id.gid) }
        case .completed(let id):
            running.remove(id)
            hub.notify(method: "aria2.onDownloadComplete", gid: id.gid)
        case .failed(let id):
            running.remove(id)
            hub.notify(method: "aria2.onDownloadError", gid: id.gid)
        case .linkExpired(let id, let r):
            // segget's own event (docs/daemon.md): answer it with aria2.changeUri. Numbers as strings,
            // as aria2's status fields are.
            hub.notify(
                method: "segget.onLinkExpired", gid: id.gid,
                fields: [
                    ("uri", .string(r.url)), ("status", .string(String(r.status))),
                    ("completedLength", .string(String(r.bytesDone))), ("totalLength", .string(String(r.totalLength))),
                    ("renewal", .string(String(r.renewal))),
                ])
        }
    }

    static func randomHex(_ count: Int) -> String {
        var g = SystemRandomNumberGenerator()
        return String((0..<count).map { _ in "0123456789abcdef".randomElement(using: &g) ?? "0" })
    }
}

/// The first stop request wins: a signal, aria2.shutdown or a failed bind.
final class ShutdownSignal: Sendable {
    private let state = Mutex<(fired: Bool, force: Bool, waiter: CheckedContinuation<Bool, Never>?)>(
        (false, false, nil))

    func fire(force: Bool) {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            guard !s.fired else { return nil }
            s.fired = true
            s.force = force
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: force)
    }

    func wait() async -> Bool {
        await withCheckedContinuation { c in
            let fired = state.withLock { s -> Bool? in
                if s.fired { return s.force }
                s.waiter = c
                return nil
            }
            if let fired { c.resume(returning: fired) }
        }
    }
}

final class DaemonFailure: Sendable {
    private let stored = Mutex<SeggetError?>(nil)
    func set(_ e: SeggetError) { stored.withLock { if $0 == nil { $0 = e } } }
    var error: SeggetError? { stored.withLock { $0 } }
}

import Segget
import SeggetQueue

/// aria2's RPC methods over a `DownloadQueue`: each call's parameters checked, turned into one
/// queue command, and its result rendered as aria2 renders it.
public struct Aria2Methods: RPCMethodHandler {
    public let queue: DownloadQueue
    public let policy: RPCPolicy
    /// A random id per daemon run (aria2's getSessionInfo).
    public let sessionID: String
    /// Called after shutdown/forceShutdown answered; `true` for forceShutdown.
    public let requestShutdown: @Sendable (_ force: Bool) -> Void
    /// How the daemon listens, for the `rpc-*` options.
    public let listening: Listening

    /// The daemon's port, whether it listens on every address, and its request size limit.
    public struct Listening: Sendable {
        public var port: Int
        public var all: Bool
        public var maxRequestBytes: Int

        public init(port: Int = 6800, all: Bool = false, maxRequestBytes: Int = 2 << 20) {
            self.port = port
            self.all = all
            self.maxRequestBytes = maxRequestBytes
        }
    }

    public init(
        queue: DownloadQueue, policy: RPCPolicy, sessionID: String, listening: Listening = Listening(),
        requestShutdown: @escaping @Sendable (Bool) -> Void
    ) {
        self.queue = queue
        self.policy = policy
        self.sessionID = sessionID
        self.listening = listening
        self.requestShutdown = requestShutdown
    }

    /// What the option table reads mapped options from.
    var optionContext: Aria2OptionTable.Context {
        Aria2OptionTable.Context(
            settings: queue.settings, rpcPort: listening.port, listenAll: listening.all,
            maxRequestBytes: listening.maxRequestBytes, overallSpeedNow: queue.currentOverallSpeed ?? 0)
    }

    /// aria2's version this daemon answers like; front-ends check for at least 1.x features.
    public static let compatibleVersion = "1.37.0"

    public static let methods: [String] = [
        "aria2.addUri", "aria2.addTorrent", "aria2.addMetalink", "aria2.remove", "aria2.forceRemove",
        "aria2.pause", "aria2.pauseAll", "aria2.forcePause", "aria2.forcePauseAll", "aria2.unpause",
        "aria2.unpauseAll", "aria2.tellStatus", "aria2.getUris", "aria2.getFiles", "aria2.getPeers",
        "aria2.getServers", "aria2.tellActive", "aria2.tellWaiting", "aria2.tellStopped", "aria2.changePosition",
        "aria2.changeUri", "aria2.getOption", "aria2.changeOption", "aria2.getGlobalOption",
        "aria2.changeGlobalOption", "aria2.getGlobalStat", "aria2.purgeDownloadResult",
        "aria2.removeDownloadResult", "aria2.getVersion", "aria2.getSessionInfo", "aria2.shutdown",
        "aria2.forceShutdown", "aria2.saveSession", "system.multicall", "system.listMethods",
        "system.listNotifications",
    ]

    public static let notifications: [String] = [
        "aria2.onDownloadStart", "aria2.onDownloadPause", "aria2.onDownloadStop", "aria2.onDownloadComplete",
        "aria2.onDownloadError", "aria2.onBtDownloadComplete", "segget.onLinkExpired",
    ]

    public func handle(_ call: RPCCall) throws(RPCError) -> JSON {
        let p = call.params
        switch call.method {
        case "aria2.addUri": return try addUri(p)
        case "aria2.tellStatus":
            return Aria2Status.render(try task(p, 0), keys: try keys(p, 1))
        case "aria2.getUris": return Aria2Status.uris(try task(p, 0))
        case "aria2.getFiles": return Aria2Status.files(try task(p, 0))
        case "aria2.getPeers":
            _ = try task(p, 0)
            return .array([])
        case "aria2.getServers": return servers(try task(p, 0))
        case "aria2.addMetalink": return try addMetalink(p)
        case "aria2.tellActive":
            let k = try keys(p, 0)
            return .array(queue.active().map { Aria2Status.render($0, keys: k) })
        case "aria2.tellWaiting", "aria2.tellStopped":
            let offset = try integer(p, 0, "offset")
            let num = try integer(p, 1, "num")
            guard num >= 0 else { throw .invalidParams("num must not be negative.") }
            let k = try keys(p, 2)
            let all =
                call.method == "aria2.tellWaiting"
                ? queue.waiting(offset: 0, count: Int.max) : queue.stopped(offset: 0, count: Int.max)
            return .array(
                Aria2Status.page(size: all.count, offset: offset, num: num).map { Aria2Status.render(all[$0], keys: k) }
            )
        case "aria2.pause", "aria2.forcePause":
            let id = try gid(p, 0)
            // aria2 answers an error for a task that is paused already; the queue takes it as done.
            if queue.snapshot(id)?.status == .paused { throw .failed("GID \(id.gid) cannot be paused now: it is paused already") }
            try run { try queue.pause(id, force: call.method == "aria2.forcePause") }
            return .string(id.gid)
        case "aria2.pauseAll", "aria2.forcePauseAll":
            queue.pauseAll(force: call.method == "aria2.forcePauseAll")
            return .string("OK")
        case "aria2.unpause":
            let id = try gid(p, 0)
            if let status = queue.snapshot(id)?.status, status == .active || status == .waiting {
                throw .failed("GID \(id.gid) cannot be unpaused now: it is \(status.rawValue), not paused")
            }
            try run { try queue.resume(id) }
            return .string(id.gid)
        case "aria2.unpauseAll":
            queue.resumeAll()
            return .string("OK")
        case "aria2.remove", "aria2.forceRemove":
            let id = try gid(p, 0)
            try run { try queue.remove(id, force: call.method == "aria2.forceRemove") }
            return .string(id.gid)
        case "aria2.removeDownloadResult":
            let id = try gid(p, 0)
            try run { try queue.removeResult(id) }
            return .string("OK")
        case "aria2.purgeDownloadResult":
            queue.purgeResults()
            return .string("OK")
        case "aria2.changePosition": return try changePosition(p)
        case "aria2.getOption":
            let t = try task(p, 0)
            return Aria2OptionTable.download(.init(options: t.options, directory: t.directory), optionContext)
        case "aria2.changeOption":
            let t = try task(p, 0)
            guard p.count >= 2 else { throw .invalidParams("changeOption takes a GID and an options object.") }
            let parsed = try Aria2TaskOptions.parse(p[1], onto: t.options, policy: policy)
            // As in aria2, a task keeps its GID.
            if parsed.gid != nil { throw .failed("option gid cannot be changed: a task keeps its GID. Nothing was changed.") }
            try run { try queue.changeOptions(t.id, parsed.options) }
            return .string("OK")
        case "aria2.getGlobalOption": return Aria2OptionTable.global(optionContext)
        case "aria2.changeGlobalOption":
            guard p.count >= 1 else { throw .invalidParams("changeGlobalOption takes an options object.") }
            try changeGlobalOptions(p[0])
            return .string("OK")
        case "aria2.getGlobalStat":
            let s = queue.globalStat()
            return .object([
                ("downloadSpeed", .string(String(s.downloadSpeed))), ("uploadSpeed", .string("0")),
                ("numActive", .string(String(s.numActive))), ("numWaiting", .string(String(s.numWaiting))),
                ("numStopped", .string(String(s.numStopped))), ("numStoppedTotal", .string(String(s.numStoppedTotal))),
            ])
        case "aria2.getVersion":
            return .object([
                ("version", .string(Self.compatibleVersion)),
                ("enabledFeatures", .array(["Async DNS", "HTTPS", "Checksum", "Metalink"].map(JSON.string))),
                ("segget", .string(seggetVersion)),
            ])
        case "aria2.getSessionInfo": return .object([("sessionId", .string(sessionID))])
        case "aria2.saveSession":
            // Every change is in the database before its call returns; there is nothing left to save.
            return .string("OK")
        case "aria2.shutdown", "aria2.forceShutdown":
            requestShutdown(call.method == "aria2.forceShutdown")
            return .string("OK")
        case "system.listMethods": return .array(Self.methods.map(JSON.string))
        case "system.listNotifications": return .array(Self.notifications.map(JSON.string))
        case "aria2.changeUri": return try changeUri(p)
        case "aria2.addTorrent":
            throw .failed("aria2.addTorrent is not supported: segget downloads HTTP and HTTPS URLs only (no BitTorrent).")
        default:
            throw .methodNotFound(call.method)
        }
    }

    // MARK: Methods with more to check

    func addUri(_ p: [JSON]) throws(RPCError) -> JSON {
        guard case .array(let rawURIs)? = p.first, !rawURIs.isEmpty else {
            throw .invalidParams("addUri takes an array of one or more URLs first.")
        }
        var urls: [String] = []
        for raw in rawURIs {
            guard case .string(let url) = raw else { throw .invalidParams("each URL must be a string.") }
            let lower = url.lowercased()
            guard !url.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }) else {
                throw .failed("A URL contains a space or a control character (CR, LF, …); percent-encode it.")
            }
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
                throw .failed("'\(url)' is not an http:// or https:// URL; segget downloads HTTP and HTTPS only.")
            }
            urls.append(url)
        }
        let parsed = try Aria2TaskOptions.parse(p.count > 1 ? p[1] : nil, policy: policy)
        var position: Int?
        if p.count > 2 {
            guard let v = p[2].intValue, v >= 0 else {
                throw .invalidParams("position must be a non-negative integer.")
            }
            position = Int(v)
        }
        let options = parsed.options
        let paused = parsed.paused
        let gid = parsed.gid
        let id = try run { try queue.add(urls: urls, options: options, paused: paused, position: position, id: gid) }
        return .string(id.gid)
    }

    /// aria2's `changeUri(gid, fileIndex, delUris, addUris[, position])`: `[deleted, added]`. Also how
    /// a client answers `segget.onLinkExpired` (docs/daemon.md).
    func changeUri(_ p: [JSON]) throws(RPCError) -> JSON {
        let id = try gid(p, 0)
        let fileIndex = try integer(p, 1, "fileIndex")
        func uris(_ i: Int, _ name: String) throws(RPCError) -> [String] {
            guard p.count > i, case .array(let items) = p[i] else {
                throw .invalidParams("changeUri takes a GID, a file index, delUris and addUris (arrays of URIs).")
            }
            var out: [String] = []
            for item in items {
                guard case .string(let s) = item else { throw .invalidParams("each of \(name) must be a string.") }
                out.append(s)
            }
            return out
        }
        let delete = try uris(2, "delUris")
        let add = try uris(3, "addUris")
        var position: Int?
        if p.count > 4 {
            guard let v = p[4].intValue, v >= 0 else { throw .invalidParams("position must be a non-negative integer.") }
            position = Int(v)
        }
        let changed = try run { try queue.changeURIs(id, fileIndex: fileIndex, delete: delete, add: add, position: position) }
        return .array([.int(Int64(changed.deleted)), .int(Int64(changed.added))])
    }

    func changePosition(_ p: [JSON]) throws(RPCError) -> JSON {
        let id = try gid(p, 0)
        let pos = try integer(p, 1, "pos")
        guard p.count > 2, case .string(let how) = p[2] else {
            throw .invalidParams("changePosition takes a GID, a position and POS_SET, POS_CUR or POS_END.")
        }
        let origin: PositionOrigin
        switch how {
        case "POS_SET": origin = .set
        case "POS_CUR": origin = .current
        case "POS_END": origin = .end
        default: throw .invalidParams("how must be POS_SET, POS_CUR or POS_END (got '\(how)').")
        }
        let result = try run { try queue.changePosition(id, pos, origin) }
        return .int(Int64(result))
    }

    func changeGlobalOptions(_ raw: JSON) throws(RPCError) {
        guard case .object(let members) = raw else { throw .invalidParams("options must be an object.") }
        var s = queue.settings
        for (key, value) in members {
            switch key {
            case "max-concurrent-downloads":
                guard let v = value.intValue, (1...64).contains(v) else {
                    throw .invalidParams("max-concurrent-downloads must be a number from 1 to 64.")
                }
                s.maxActive = Int(v)
            case "max-overall-download-limit":
                s.maxOverallSpeed = try Aria2TaskOptions.speed(value, key)
            case "split":
                s.defaultConnections = try Aria2TaskOptions.count(value, key)
            case "max-connection-per-server":
                // Separate from split, as in aria2; see QueueSettings.maxConnectionsPerServer.
                s.maxConnectionsPerServer = try Aria2TaskOptions.perServer(value, key)
            case OptionSchema.maxTries.key, OptionSchema.retryWait.key, OptionSchema.timeout.key,
                OptionSchema.connectTimeout.key:
                try Aria2TaskOptions.taskRetry(key, value, into: &s.taskRetries)
            case "speed-schedule":
                guard case .string(let text) = value else {
                    throw .invalidParams("option speed-schedule must be a string such as 08:00-18:00=2M,18:00-08:00=0.")
                }
                do {
                    s.speedSchedule = try SpeedSchedule(parsing: text)
                } catch {
                    throw .invalidParams("option speed-schedule: \(error)")
                }
            default:
                continue  // aria2 ignores global options that do not apply; so does segget
            }
        }
        let settings = s
        try run { try queue.changeSettings(settings) }
    }

    // MARK: Parameters

    func gid(_ p: [JSON], _ i: Int) throws(RPCError) -> TaskID {
        guard i < p.count, case .string(let text) = p[i] else { throw .invalidParams("a GID string is required.") }
        if let id = TaskID(gid: text) { return id }
        // As aria2: a shorter run of hex digits names the one task whose GID starts with it.
        let hex = text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0 | 0x20) }
        guard hex, (1..<16).contains(text.utf8.count) else { throw .failed("GID \(text) is not found") }
        let found = queue.tasks(withGIDPrefix: text)
        guard found.count < 2 else { throw .failed("GID \(text) is ambiguous: \(found.count) tasks' GIDs start with it") }
        guard let id = found.first else { throw .failed("GID \(text) is not found") }
        return id
    }

    func task(_ p: [JSON], _ i: Int) throws(RPCError) -> TaskSnapshot {
        let id = try gid(p, i)
        guard let t = queue.snapshot(id) else { throw .failed("GID \(id.gid) is not found") }
        return t
    }

    /// Any JSON integer (also an integral double or a decimal string, as aria2), clamped to
    /// -2^40...2^40: front-ends ask for "all" with a huge `num` (JavaScript's
    /// Number.MAX_SAFE_INTEGER, or 2^63-1) and aria2 1.36 answers them; past 2^40 no queue or
    /// file list is long enough for the difference to show, and the callers' sums cannot overflow.
    func integer(_ p: [JSON], _ i: Int, _ name: String) throws(RPCError) -> Int {
        let limit: Int64 = 1 << 40
        guard i < p.count else { throw .invalidParams("\(name) must be an integer.") }
        if case .double(let d) = p[i], d.isFinite, d == d.rounded(), abs(d) >= 9e18 {
            return d < 0 ? -Int(limit) : Int(limit)  // an integer too large for Int64
        }
        guard let v = p[i].intValue else { throw .invalidParams("\(name) must be an integer.") }
        return Int(min(max(v, -limit), limit))
    }

    func keys(_ p: [JSON], _ i: Int) throws(RPCError) -> [String]? {
        guard i < p.count else { return nil }
        guard case .array(let items) = p[i] else { throw .invalidParams("keys must be an array of strings.") }
        var out: [String] = []
        for item in items {
            guard case .string(let key) = item else { throw .invalidParams("keys must be an array of strings.") }
            out.append(key)
        }
        return out
    }

    /// Runs a queue command, turning its error into aria2's code-1 failure with the queue's sentence.
    func run<T>(_ body: () throws -> T) throws(RPCError) -> T {
        do {
            return try body()
        } catch let error as RPCError {
            throw error
        } catch {
            throw .failed(String(describing: error))
        }
    }
}

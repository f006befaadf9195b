/// The queue-wide settings a client changes while the queue runs (aria2's `changeGlobalOption` of
/// `max-concurrent-downloads`, `max-overall-download-limit`, `split` and
/// `max-connection-per-server`), kept in the database's `settings` table so that a restart keeps
/// them, as it keeps the speed schedule (an overall limit set from a front-end came back uncapped
/// after a reboot; exploratory run 7). The opener decides which to use (`segget daemon`: those its
/// command line does not give).
extension DownloadQueue {
    /// Changes settings. Nothing running is stopped: the running tasks' own connections come down
    /// to the new share at once (the rest held as loans, called back as their chunks end), no new
    /// task starts while as many run as `maxActive` allows, and a raised `maxActive` starts waiting
    /// tasks at once.
    public func changeSettings(_ s: QueueSettings) throws(QueueError) {
        try Self.checkSettings(s)
        let policy = try DirectoryPolicy(root: s.downloadRoot, allowAnyDirectory: s.allowAnyDirectory)
        var resolved = s
        resolved.downloadRoot = policy.root
        hostBudget.maxPerHost = resolved.maxConnectionsPerServer
        try change { (c: inout Core) in
            storeChangedGlobals(from: c.settings, to: resolved, &c)
            if resolved.speedSchedule != c.settings.speedSchedule {
                let text = resolved.speedSchedule?.description ?? ""
                store(&c) { s throws(SQLiteError) in try s.setSetting(Self.scheduleSetting, text) }
            }
            let more = resolved.connectionBudget - c.settings.connectionBudget
            if more > 0 { connectionLender.lend(more) } else { connectionLender.withdraw(-more) }
            c.settings = resolved
            c.policy = policy
            return c.state.setLimits(Self.limits(resolved))
        }
        applySchedule()
    }

    /// The stored values; nil where none was stored.
    public struct StoredGlobals: Sendable, Equatable {
        public var maxActive: Int?
        /// Bytes per second; 0: no limit.
        public var maxOverallSpeed: Int64?
        public var defaultConnections: Int?
        public var maxConnectionsPerServer: Int?

        public init(maxActive: Int? = nil, maxOverallSpeed: Int64? = nil, defaultConnections: Int? = nil, maxConnectionsPerServer: Int? = nil) {
            self.maxActive = maxActive
            self.maxOverallSpeed = maxOverallSpeed
            self.defaultConnections = defaultConnections
            self.maxConnectionsPerServer = maxConnectionsPerServer
        }

        /// `s` with every stored value in place.
        public func applied(to s: QueueSettings) -> QueueSettings {
            var s = s
            if let v = maxActive { s.maxActive = v }
            if let v = maxOverallSpeed { s.maxOverallSpeed = v > 0 ? v : nil }
            if let v = defaultConnections { s.defaultConnections = v }
            if let v = maxConnectionsPerServer { s.maxConnectionsPerServer = v }
            return s
        }
    }

    /// Names in the `settings` table: aria2's option names.
    public enum GlobalSetting: String, CaseIterable, Sendable {
        case maxActive = "max-concurrent-downloads"
        case maxOverallSpeed = "max-overall-download-limit"
        case defaultConnections = "split"
        case maxConnectionsPerServer = "max-connection-per-server"
    }

    /// What was stored by ``changeSettings(_:)``; a value that does not read as a number is left out.
    public func storedGlobals() -> StoredGlobals {
        core.withLock { c in
            func read(_ k: GlobalSetting) -> Int64? { (try? c.store?.setting(k.rawValue)).flatMap { $0.flatMap { Int64($0) } } }
            return StoredGlobals(
                maxActive: read(.maxActive).map { Int($0) }, maxOverallSpeed: read(.maxOverallSpeed),
                defaultConnections: read(.defaultConnections).map { Int($0) },
                maxConnectionsPerServer: read(.maxConnectionsPerServer).map { Int($0) })
        }
    }

    /// Forgets stored values (the opener was given these settings, which win).
    public func forgetStoredGlobals(_ names: [GlobalSetting]) {
        core.withLock { c in
            for n in names { store(&c) { s throws(SQLiteError) in try s.deleteSetting(n.rawValue) } }
            c.storageError = nil
        }
    }

    /// Stores the settings of ``GlobalSetting`` that differ between `old` and `new`.
    func storeChangedGlobals(from old: QueueSettings, to new: QueueSettings, _ c: inout Core) {
        var changed: [(GlobalSetting, String)] = []
        if old.maxActive != new.maxActive { changed.append((.maxActive, String(new.maxActive))) }
        if old.maxOverallSpeed != new.maxOverallSpeed { changed.append((.maxOverallSpeed, String(new.maxOverallSpeed ?? 0))) }
        if old.defaultConnections != new.defaultConnections { changed.append((.defaultConnections, String(new.defaultConnections))) }
        if old.maxConnectionsPerServer != new.maxConnectionsPerServer {
            changed.append((.maxConnectionsPerServer, String(new.maxConnectionsPerServer)))
        }
        for (k, v) in changed { store(&c) { s throws(SQLiteError) in try s.setSetting(k.rawValue, v) } }
    }
}

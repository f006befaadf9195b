/// The queue-wide settings a client changes while the queue runs (aria2's `changeGlobalOption` of
/// `max-concurrent-downloads`, `max-overall-download-limit`, `split`, `max-connection-per-server`,
/// and the tasks' default `max-tries`, `retry-wait`, `timeout` and `connect-timeout`), kept in the database's `settings` table so that a restart keeps
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

    /// The stored values, by setting; a setting absent was not stored.
    public struct StoredGlobals: Sendable, Equatable {
        public var values: [GlobalSetting: Int64]

        public init(_ values: [GlobalSetting: Int64] = [:]) { self.values = values }

        /// These values but those of `given` (the daemon's command line gave them, and they win
        /// whether or not their stored values could be dropped).
        public func without(_ given: [GlobalSetting]) -> StoredGlobals {
            StoredGlobals(values.filter { !given.contains($0.key) })
        }

        /// `s` with every stored value in place that `s` can take; one out of range (stored by a
        /// segget with wider ranges, or by hand) is left out alone, not every value with it.
        public func applied(to s: QueueSettings) -> QueueSettings {
            var s = s
            for (k, v) in values.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                var candidate = s
                k.set(v, in: &candidate)
                if (try? DownloadQueue.checkSettings(candidate)) != nil { s = candidate }
            }
            return s
        }

        /// The stored settings `applied(to:)` leaves out, by name.
        public func refused(by s: QueueSettings) -> [GlobalSetting] {
            let kept = applied(to: s)
            return values.keys.filter { $0.value(in: kept) != values[$0] }.sorted { $0.rawValue < $1.rawValue }
        }
    }

    /// Names in the `settings` table: aria2's option names. Each reads and writes its setting as
    /// the number stored.
    public enum GlobalSetting: String, CaseIterable, Sendable {
        case maxActive = "max-concurrent-downloads"
        case maxOverallSpeed = "max-overall-download-limit"
        case defaultConnections = "split"
        case maxConnectionsPerServer = "max-connection-per-server"
        case maxTries = "max-tries"
        case retryWait = "retry-wait"
        case timeout = "timeout"
        case connectTimeout = "connect-timeout"

        /// Its value in `s` (0: no overall limit).
        func value(in s: QueueSettings) -> Int64 {
            switch self {
            case .maxActive: Int64(s.maxActive)
            case .maxOverallSpeed: s.maxOverallSpeed ?? 0
            case .defaultConnections: Int64(s.defaultConnections)
            case .maxConnectionsPerServer: Int64(s.maxConnectionsPerServer)
            case .maxTries: Int64(s.taskRetries.maxTries)
            case .retryWait: Int64(s.taskRetries.retryWait)
            case .timeout: Int64(s.taskRetries.timeout)
            case .connectTimeout: Int64(s.taskRetries.connectTimeout)
            }
        }

        func set(_ v: Int64, in s: inout QueueSettings) {
            switch self {
            case .maxActive: s.maxActive = Int(clamping: v)
            case .maxOverallSpeed: s.maxOverallSpeed = v > 0 ? v : nil
            case .defaultConnections: s.defaultConnections = Int(clamping: v)
            case .maxConnectionsPerServer: s.maxConnectionsPerServer = Int(clamping: v)
            case .maxTries: s.taskRetries.maxTries = Int(clamping: v)
            case .retryWait: s.taskRetries.retryWait = Int(clamping: v)
            case .timeout: s.taskRetries.timeout = Int(clamping: v)
            case .connectTimeout: s.taskRetries.connectTimeout = Int(clamping: v)
            }
        }
    }

    /// What was stored by ``changeSettings(_:)``; a value that does not read as a number is left out.
    public func storedGlobals() -> StoredGlobals {
        core.withLock { c in
            var values: [GlobalSetting: Int64] = [:]
            for k in GlobalSetting.allCases {
                if let text = try? c.store?.setting(k.rawValue), let v = Int64(text) { values[k] = v }
            }
            return StoredGlobals(values)
        }
    }

    /// Forgets stored values (the opener was given these settings, which win). Throws where the
    /// database could not be written: the values stay, and a later start without the settings uses them.
    public func forgetStoredGlobals(_ names: [GlobalSetting]) throws(QueueError) {
        try core.withLock { c throws(QueueError) in
            for n in names { store(&c) { s throws(SQLiteError) in try s.deleteSetting(n.rawValue) } }
            try Self.takeStorageError(&c)
        }
    }

    /// Stores the settings of ``GlobalSetting`` that differ between `old` and `new`.
    func storeChangedGlobals(from old: QueueSettings, to new: QueueSettings, _ c: inout Core) {
        for k in GlobalSetting.allCases where k.value(in: old) != k.value(in: new) {
            let text = String(k.value(in: new))
            store(&c) { s throws(SQLiteError) in try s.setSetting(k.rawValue, text) }
        }
    }
}

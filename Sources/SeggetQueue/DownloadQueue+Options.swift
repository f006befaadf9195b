import Segget

extension DownloadQueue {
    /// Replaces a task's options; directory and name only while it has no bytes yet. A running task's
    /// speed cap changes at once; any other change restarts its download, as aria2 does, from what
    /// it has saved (before, a new checksum, header or connection count waited for the next start,
    /// and a download could finish checked against the digest it was told to drop).
    public func changeOptions(_ id: TaskID, _ options: TaskOptions) throws(QueueError) {
        guard let urls = core.withLock({ $0.records[id]?.urls }) else { throw QueueError.notFound(id) }
        try OptionRules.check(urls: urls, options: options)
        try change { (c: inout Core) throws(QueueError) -> [QueueState.Action] in
            guard var r = c.records[id] else { throw QueueError.notFound(id) }
            guard !r.status.isStopped else {
                throw QueueError(
                    .invalidState,
                    "Task \(id.gid) has already stopped (\(r.status.rawValue)); its options can no longer change.")
            }
            var options = options
            // A directory that resolves to the task's own changes nothing: what getOption answers
            // (the root, for a task added without dir) written back by a front-end that sends its
            // whole form was refused on a running task as a move.
            if options.directory != r.options.directory, (try? c.policy.resolve(options.directory)) == r.directory {
                options.directory = r.options.directory
            }
            if options.directory != r.options.directory || options.outputName != r.options.outputName {
                guard r.status.isQueued, r.completedLength == 0, c.live[id] == nil else {
                    let why = r.completedLength == 0 && c.live[id] != nil
                        ? "is running (its file is being named and opened)" : "has already started writing its file"
                    throw QueueError(
                        .invalidState,
                        "Task \(id.gid) \(why), so its directory and name cannot change; remove it and add it again instead."
                    )
                }
                r.directory = try c.policy.resolve(options.directory)
                r.path = options.outputName.map { OutputNames.join(r.directory, $0) }
                try Self.refuseClaimed(r.path, c.records, except: id)
                try Self.refuseClaimed(r.path, leftAside: tasksLeftAside)
            }
            // Against what the download started with: a queue-wide default changed since has not
            // reached it, so the same value now given as the task's own is a change.
            let restarts = c.live[id].map { Self.effective(options, c.settings) != $0.runsWith } ?? false
            r.options = options
            try c.state.setWant(id, Self.want(options))
            if let live = c.live[id] {
                let cap = Self.want(options).maxSpeed
                live.ownSpeed.bytesPerSecond = [cap, live.speedShare].compactMap { $0 }.min()
                c.live[id]?.grant.speed = cap
            }
            do { try c.store?.update(r) } catch {
                throw QueueError(.storage, "The options could not be saved: \(error).")
            }
            c.records[id] = r
            return restarts ? c.state.restart(id) : []
        }
    }

    /// Whether a download started with `old` under `settings` must start again to follow `new`: any
    /// change of what it runs with but the speed cap, which it reads live. An option the task leaves to the daemon and
    /// the daemon's own value given for it are the same: a front-end that sends back the whole form
    /// `getOption` filled (split 8, max-tries 6, timeout 20, the user agent, …) changes nothing, where
    /// it restarted every running task it touched.
    static func needsRestart(from old: TaskOptions, to new: TaskOptions, settings: QueueSettings) -> Bool {
        effective(old, settings) != effective(new, settings)
    }

    /// A task's options as its download runs with them: each one it leaves unset filled with the
    /// value the daemon gives it (the queue's settings, the engine's user agent; the values `getOption`
    /// answers), and no speed cap.
    static func effective(_ o: TaskOptions, _ settings: QueueSettings) -> TaskOptions {
        var e = settings.taskRetries.filling(o)
        e.maxSpeed = nil
        e.connections = o.connections ?? settings.defaultConnections
        e.maxConnectionsPerServer = o.maxConnectionsPerServer ?? settings.maxConnectionsPerServer
        e.userAgent = o.userAgent ?? DownloadOptions().transfer.userAgent
        return e
    }
}

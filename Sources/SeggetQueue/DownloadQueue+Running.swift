import Dispatch
import Glibc
import Segget
import SeggetJournal
import SeggetSystem
import SeggetVerify
import Synchronization

extension DownloadQueue {
    // MARK: Running downloads

    /// The loop every task of the process runs on (see `DownloadLoop`): one thread for the
    /// transfers of all of them, one steps queue for their blocking steps; nil when no thread could
    /// be had, and then each task runs on a thread of its own.
    static let loop = DownloadLoop.onOwnThread()

    func launch(_ ids: [TaskID]) {
        // A task that starts gets its share of the overall limit now, not at the next second's
        // sharing (until then it drew on the shared limit alone, first served).
        if !ids.isEmpty { applySchedule() }
        for id in ids {
            if let loop = Self.loop {
                loop.steps.async { self.prepareAndStart(id) }
            } else {
                DispatchQueue.global().async { self.prepareAndStart(id) }
            }
        }
    }

    /// Off the lock: creates the directory, fixes the output path (the first time from the answer
    /// to the download's own probe, a request on the loop), then starts the download and watches it.
    private func prepareAndStart(_ id: TaskID) {
        guard
            let (record, policy, live, settings) = core.withLock({ c -> (TaskRecord, DirectoryPolicy, Live, QueueSettings)? in
                guard let r = c.records[id], let l = c.live[id], !l.stopRequested else { return nil }
                return (r, c.policy, l, c.settings)
            })
        else {
            ended(id, .interrupted)
            return
        }
        let directory: String
        do {
            directory = try policy.prepare(record.directory)
        } catch {
            ended(id, .failed(SeggetError(.fileSystem, error.message)))
            return
        }
        if let path = record.path, let size = Self.finishedEarlier(record, path: path) {
            ended(id, .completed(path: path, bytes: size))
            return
        }
        guard record.path == nil else { return start(id, directory: directory, suggested: nil) }
        guard let loop = Self.loop else {
            let info = try? Download(url: record.urls[0], options: downloadOptions(record, settings: settings, grant: nil)).probe()
            return start(id, directory: directory, suggested: info?.suggestedFileName ?? FileName.fromURLPath(record.urls[0]))
        }
        // The download's own probe, made before its path is known: its answer names the file, and
        // the download goes on from it. A probe of its own for the name cost every new task one
        // request and one round trip more (a 1-byte request, then the download's).
        Download(url: record.urls[0], options: downloadOptions(record, settings: settings, grant: live.grant, live: live)).prepare(
            on: loop, interrupt: live.probeInterrupt
        ) { result in
            let prepared = try? result.get()
            let failure: SeggetError? = if case .failure(let e) = result { e } else { nil }
            let name = prepared?.info.suggestedFileName ?? FileName.fromURLPath(record.urls[0])
            self.start(id, directory: directory, suggested: name, prepared: prepared, probeFailed: failure)
        }
    }

    /// Gives a task without a path its own (from the server's `suggested` name), then starts its
    /// download and watches it, from its probe when it made one (`prepared`, or its failure).
    private func start(
        _ id: TaskID, directory: String, suggested: String?, prepared: PreparedDownload? = nil,
        probeFailed: SeggetError? = nil
    ) {
        var alreadyDone: (path: String, bytes: Int64)?
        let started: DownloadTask? = core.withLock { c in
            guard var r = c.records[id], c.live[id] != nil, c.live[id]?.stopRequested == false,
                let grant = c.live[id]?.grant
            else {
                return nil
            }
            if r.path == nil, let name = suggested {
                r.directory = directory
                if !tasksLeftAside.contains(where: { $0.path == OutputNames.join(directory, name) }), let done = Self.finishedUnderName(
                    r, name: name, directory: directory, records: c.records, serverLength: prepared?.info.totalBytes,
                    serverVersion: prepared?.info.serverVersion
                ) {
                    // The file is this URL's download, finished by an earlier task or run, at the
                    // length the server sends now: `continue` (always on here) takes it as it is,
                    // as the command line does, rather than fetch a numbered copy. At another
                    // length the server's file has changed since: a numbered name, as aria2 does.
                    r.path = done.path
                    c.records[id] = r
                    alreadyDone = done
                    return nil
                }
                r.path = Self.freePath(
                    name: name, directory: directory, records: c.records, except: id, url: r.urls.first, leftAside: tasksLeftAside)
                c.records[id] = r
                let saved = r
                store(&c) { s throws(SQLiteError) in try s.update(saved) }
                c.storageError = nil
            }
            var options = downloadOptions(r, settings: c.settings, grant: grant, live: c.live[id])
            options.pieces = c.records[id]?.pieces
            let download = Download(url: r.urls[0], options: options)
            let task = Self.loop.map { download.start(on: $0, prepared: prepared, probeFailed: probeFailed) } ?? download.start()
            c.live[id]?.task = task
            return task
        }
        if let alreadyDone {
            ended(id, .completed(path: alreadyDone.path, bytes: alreadyDone.bytes))
            return
        }
        guard let started else {
            ended(id, .interrupted)
            return
        }
        Task.detached {
            for await p in started.progress { self.progressed(id, p) }
            let finish: Finish
            do throws(SeggetError) {
                let r = try await started.result()
                finish = .completed(path: r.path, bytes: r.bytes)
            } catch {
                finish = error.kind == .interrupted ? .interrupted : .failed(error)
            }
            self.ended(id, finish)
        }
    }

    /// What each connection of an active task is doing now (its source URL and rate); nil unless the
    /// task is active and has reported progress.
    public func connections(_ id: TaskID) -> [ConnectionProgress]? {
        core.withLock { $0.live[id]?.progress?.connections }
    }

    private func progressed(_ id: TaskID, _ p: DownloadProgress) {
        core.withLock { c in
            guard c.live[id] != nil, c.records[id] != nil else { return }
            c.live[id]?.progress = p
            c.records[id]?.completedLength = p.completedBytes
            if let t = p.totalBytes { c.records[id]?.totalLength = t }
            saveProgress(&c, force: false)
        }
    }

    /// How one run of a task's download ended.
    private enum Finish {
        case completed(path: String, bytes: Int64)
        case failed(SeggetError)
        /// Stopped on request; the journal is kept.
        case interrupted
    }

    /// The path and size of the file a task without a path would be saved as, `directory/name`,
    /// when that file is the download of the task's URL that an earlier task or run finished and
    /// nobody changed since (its `FinishedMark`, with the task's checksums if it has any), no task
    /// still to run claims that path, and the server, where its answer said (`serverLength`,
    /// `serverVersion`), sends as many bytes as the file has and the version it was downloaded as (a
    /// file at another length or with other validators there is a newer version of it).
    static func finishedUnderName(
        _ r: TaskRecord, name: String, directory: String, records: [TaskID: TaskRecord], serverLength: Int64? = nil,
        serverVersion: UInt64? = nil
    ) -> (path: String, bytes: Int64)? {
        guard let url = r.urls.first else { return nil }
        let path = OutputNames.join(directory, name)
        guard claimant(of: path, records, except: r.id) == nil, let size = FinishedMark.stillServed(
            at: path, url: url, expected: r.options.checksums, length: serverLength, version: serverVersion)
        else { return nil }
        return (path, size)
    }

    /// The size of a file a killed run had already finished and renamed into place (the queue died
    /// before storing that): the final file is there with the stored length and neither the partial
    /// file nor the journal is left. Only for a task that had made progress, so that a file the
    /// user already had under that name is never taken for it.
    private static func finishedEarlier(_ r: TaskRecord, path: String) -> Int64? {
        guard r.completedLength > 0, r.totalLength > 0, keepsNothing(at: path),
            let size = PosixFile.fileSize(path: path), size == r.totalLength
        else { return nil }
        return size
    }

    private func ended(_ id: TaskID, _ outcome: Finish) {
        let launches: [TaskID] = core.withLock { c in
            guard let live = c.live.removeValue(forKey: id) else { return [] }
            // Its own connections go back; its loans went back as its download ended.
            connectionLender.lend(live.grant.connections)
            if let p = live.progress, p.totalBytes != nil { c.lastFinished[id] = p.finishedRanges }
            let ending: QueueState.Ending
            if var r = c.records[id] {
                switch outcome {
                case .completed(let path, let bytes):
                    r.path = path
                    r.totalLength = bytes
                    r.completedLength = bytes
                    ending = .completed
                case .interrupted:
                    // The chunks its journal records now: its last progress report may be a
                    // chunk or two behind what the download finished before it stopped.
                    if let path = r.path, r.totalLength > 0,
                        let ranges = Self.journalRanges(path + ".segget-journal", totalLength: r.totalLength)
                    {
                        c.lastFinished[id] = ranges
                    }
                    ending = .interrupted
                case .failed(let e):
                    r.failure = e.kind
                    // The length its server announced, where the failure came after that answer.
                    if r.totalLength == 0, let length = e.fileLength { r.totalLength = length }
                    r.errorCode = Self.aria2ErrorCode(e)
                    // The engine's advice in the daemon's terms (add the URL again, aria2's option names).
                    r.errorMessage = NextStep.forDaemon(e.message)
                    if let path = r.path, Self.keepsNothing(at: path) {
                        // Nothing of it was kept (a digest that did not match, a disk that filled
                        // without a journal): it has no bytes, as aria2 says, rather than those it
                        // had received when it failed.
                        r.completedLength = 0
                        c.lastFinished[id] = nil
                    }
                    ending = .failed
                }
                c.records[id] = r
                let saved = r
                store(&c) { s throws(SQLiteError) in try s.update(saved) }
            } else {
                ending = .interrupted
            }
            let launches = perform(c.state.downloadEnded(id, ending), &c)
            c.storageError = nil
            if c.live.isEmpty {
                for w in c.shutdownWaiters { w.resume() }
                c.shutdownWaiters = []
            }
            return launches
        }
        launch(launches)
    }

    /// `live`: the running task, whose own speed cap and own connection share the download reads
    /// while it runs (without it, the grant's speed is a fixed `maxSpeed`). From `settings`, the daemon's
    /// `--ca-certificate` and `--certificate` and their proxy twins (``QueueSettings/tls``,
    /// ``QueueSettings/proxyTLS``).
    func downloadOptions(
        _ r: TaskRecord, settings: QueueSettings, grant: QueueState.Grant?, live: Live? = nil
    ) -> DownloadOptions {
        var o = DownloadOptions()
        o.transfer.tls = settings.tls
        o.transfer.proxyTLS = settings.proxyTLS
        o.ofDaemon = true
        o.mirrors = Array(r.urls.dropFirst())
        o.outputPath = r.path
        o.directory = r.path == nil ? r.directory : nil
        if let g = grant {
            o.connections = g.connections
            o.lender = connectionLender
            o.connectionsWithLoans = g.withLoans
            o.ownShare = live?.ownShare
            if let own = live?.ownSpeed {
                // Set to the grant's speed when the task started, and to its share of the overall
                // limit every second since (see `applySchedule`).
                o.ownSpeedLimit = own
            } else {
                o.maxSpeed = g.speed
            }
        }
        o.linkRenewer = linkRenewer(r.id)
        o.hostBudget = hostBudget
        o.sharedSpeedLimit = overallSpeed
        // The directory, the connection count and the speed cap were resolved and granted above.
        // The queue's tries and time limits where the task sets none, laid on in one go with its own:
        // the wait that a retry without end takes at least 1 s is judged on the values the download gets.
        var own = settings.taskRetries.filling(r.options)
        own.directory = nil
        own.connections = nil
        own.maxSpeed = nil
        var applied = o.applying(own)
        // aria2's per-download max-connection-per-server: this download's own connections to its host.
        if let perServer = r.options.maxConnectionsPerServer {
            applied.connections = min(applied.connections, perServer)
            applied.connectionsWithLoans = min(applied.connectionsWithLoans, perServer)
        }
        return applied
    }
}

/// Seconds on the monotonic clock, for progress-save intervals.
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

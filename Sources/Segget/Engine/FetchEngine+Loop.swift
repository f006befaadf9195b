import SeggetCurl

/// The fetch loop, in passes: `begin`, then `prepare` → the driver performs → `afterPerform` until
/// done, then `complete`; `end` always. `run` drives one engine on its own driver; `runTogether`
/// drives several downloads' engines on one shared driver, in one loop on one thread.
extension FetchEngine {
    /// Runs until every chunk is written. Throws `SeggetError`, `ResourceChanged` or `RangesIgnored`.
    func run() throws {
        try begin()
        defer { end() }
        while true {
            if try prepare() { break }
            // Each ended transfer comes back through `transferDriver(_:completed:with:)`.
            let completed = try libcurl(driver.performAndDispatch)
            if try afterPerform() { break }
            // A connection that just finished gets its next work at once, not after the next poll
            // (which can wait up to 100 ms while the others receive in paced bursts).
            if completed > 0 { continue }
            try libcurl { () throws(CurlError) in try driver.wait(timeoutMs: pollTimeout(now: passStartedAt)) }
        }
        try complete()
    }

    /// Starts the download: the checkpoint thread, the hasher's first prefix, the first requests.
    /// After it, `end` must run whatever happens.
    func begin() throws {
        startedAt = monotonicSeconds()
        if ownsDriver {
            try libcurl { () throws(CurlError) in
                try driver.multi.setMultiplexing(settings.transfer.http2)
                try driver.multi.setMaxConnectionCache(max(io.count * 2, 16))
            }
        }
        trace("writes: \(writer.isDirect ? "O_DIRECT" : "page cache")")
        if let journal, settings.checkpointInterval > 0 {
            checkpointThread = CheckpointWorker(
                journal: journal, data: data, interval: settings.checkpointInterval,
                on: checkpointQueue ?? CheckpointWorker.sharedQueue)
        }
        if target.ranged { onPrefix?(plan.byteRange(ofChunks: 0..<prefixChunks).upperBound) }
        apply(.begin, now: startedAt)
    }

    /// The first half of a pass, before the driver performs: stops on Ctrl-C, the deadline or a
    /// decided failure; starts what is due and hands out work. True when the download is done.
    func prepare() throws -> Bool {
        lastLoopTime = monotonicSeconds()
        if interrupt.isSet {
            throw SeggetError(.interrupted, "interrupted")
        }
        let now = monotonicSeconds()
        passStartedAt = now
        if let d = settings.deadline, now >= d.at {
            throw d.expired("the download")
        }
        try throwIfStopped()
        if isDone { return true }
        if let c = adoptedToUnpause {
            adoptedToUnpause = nil
            // libcurl hands over the bytes it held back from inside this call; a refusal by `receive`
            // ends the transfer with `writeError`, reported as for any request.
            try? c.easy.unpause()
        }
        // A connection a lender has spare is offered; the core keeps it only when it would find work.
        try limitToStreamWindow()
        var offered: Int?
        if let lender = settings.lender { offered = lender.spare > 0 ? lender.borrow(upTo: 1) : 0 }
        // Slots of the host's budget beyond the requests in flight go back for other downloads.
        if let share = settings.hostShare, let c = core.ranged { share.sync(inFlight: c.inFlight) }
        apply(.pass(offered: offered), now: now)
        return false
    }

    /// The second half of a pass, after the driver performed: removes lost races, counts writer
    /// waits, resumes paused transfers, records what was written, and runs the periodic decisions
    /// when due. True when the download is done.
    func afterPerform() throws -> Bool {
        let now = passStartedAt
        flushRemovals()
        countWriterWaits()
        try resumePausedTransfers()
        runAfterWrites()
        collectVouched()
        try throwIfStopped()
        apply(.performed(passStartedAt: now))
        return isDone
    }

    /// After the last pass of a download that is done: everything written and recorded, the last
    /// checkpoint taken, the last progress reported.
    func complete() throws {
        runAfterWrites(waiting: true)
        try throwIfStopped()
        if let cp = checkpointThread {
            checkpointThread = nil
            cp.stop()
        }
        apply(.tick)
    }

    /// Whatever ended the download: its transfers leave the driver, and whatever was received is
    /// written and recorded, also when stopping early.
    func end() {
        for c in io where core.connections[c.id].machine.isTransferring {
            driver.cancel(c.easy)
            settle(c)
            apply(.removed(c.id))
            settings.hostShare?.cancelled(1)
        }
        runAfterWrites(waiting: true)
        settings.lender?.lend(core.loans)
        settings.hostShare?.sync(inFlight: 0)
        recordFinalSlots()
        checkpointThread?.stop()
        vouching?.stop()
        trace("writes at the end: \(writer.isDirect ? "O_DIRECT" : "page cache"), \(writer.bytesWritten); waited \(Format.fixed(writer.waitedSeconds, 2)) s for the writer")
    }

    /// Runs several downloads' engines, all made with `driver:` `driver`, in one loop on the calling
    /// thread: each pass prepares every engine still running, performs the transfers of all of them
    /// at once (each completion goes to the engine that started it), then lets each carry out what
    /// followed. The engines share the driver's connection cache. Returns what ended each download:
    /// nil when it completed, else what its `run` would have thrown.
    static func runTogether(_ engines: [FetchEngine], on driver: TransferDriver) -> [(any Error)?] {
        precondition(engines.allSatisfy { $0.driver === driver }, "every engine must run on the shared driver")
        var results = [(any Error)?](repeating: nil, count: engines.count)
        do {
            try libcurl { () throws(CurlError) in
                try driver.multi.setMultiplexing(engines.contains { $0.settings.transfer.http2 })
                try driver.multi.setMaxConnectionCache(max(engines.reduce(0) { $0 + $1.io.count } * 2, 16))
            }
        } catch {
            return results.map { _ in error }
        }
        var running: [Int] = []
        for (i, e) in engines.enumerated() {
            do {
                try e.begin()
                running.append(i)
            } catch {
                results[i] = error
            }
        }
        /// Ends engine `i`: completed when `error` is nil, else stopped by it.
        func conclude(_ i: Int, _ error: (any Error)?) {
            var error = error
            if error == nil {
                do { try engines[i].complete() } catch let e { error = e }
            }
            engines[i].end()
            results[i] = error
            running.removeAll { $0 == i }
        }
        while !running.isEmpty {
            for i in running {
                do {
                    if try engines[i].prepare() { conclude(i, nil) }
                } catch {
                    conclude(i, error)
                }
            }
            if running.isEmpty { break }
            let completed: Int
            do {
                completed = try libcurl(driver.performAndDispatch)
            } catch {
                for i in running { conclude(i, error) }
                break
            }
            for i in running {
                do {
                    if try engines[i].afterPerform() { conclude(i, nil) }
                } catch {
                    conclude(i, error)
                }
            }
            if completed > 0 || running.isEmpty { continue }
            let now = monotonicSeconds()
            let wait = running.map { engines[$0].pollTimeout(now: now) }.min() ?? 100
            do {
                try libcurl { () throws(CurlError) in try driver.wait(timeoutMs: wait) }
            } catch {
                for i in running { conclude(i, error) }
            }
        }
        return results
    }
}

import SeggetCurl
import SeggetSystem

/// The fetch loop, in passes: `begin`, then `prepare` → the driver performs → `afterPerform` until
/// done, then `complete`; `end` always. A `DownloadLoop` drives every engine this way, several
/// downloads' engines on its one driver.
extension FetchEngine {
    /// Starts the download: the checkpoint thread, the hasher's first prefix, the first requests.
    /// After it, `end` must run whatever happens.
    func begin() throws {
        startedAt = monotonicSeconds()
        trace("writes: \(writer.isDirect ? "O_DIRECT" : "page cache")")
        if let t = settings.probeFirstAnswer { trace("the probe's first answer took \(Format.fixed(t, 3)) s") }
        if let journal, settings.checkpointInterval > 0 {
            checkpointThread = CheckpointWorker(
                journal: journal, data: data, interval: settings.checkpointInterval,
                on: checkpointQueue ?? CheckpointWorker.sharedQueue)
        }
        if target.ranged { onPrefix?(plan.byteRange(ofChunks: 0..<prefixChunks).upperBound) }
        // The warm-ups as they stand now; each pass tells the core what changed since.
        if let w = settings.warmUps?.take(always: true) { apply(.warmedUp(w), now: startedAt) }
        // What the file lacks: not the bytes of a partly written chunk the probe or an earlier run left.
        if target.ranged { missingAtStart = plan.totalLength - core.progress(now: startedAt, elapsed: 0).completedBytes }
        // The probe's connection tells the path's round trip before the first split is weighed.
        if let held = adoptable, let rtt = driver.multi.roundTrip(of: held.easy) {
            apply(.connected(0, roundTrip: rtt, newConnection: nil), now: startedAt)
        }
        if !target.ranged, let held = adoptable {
            // One stream without ranges continues the probe's answer after the bytes it brought
            // (in the file already), or, where it cannot, starts over from byte 0.
            // The conditions `execute` checks again when the stream's first request goes out.
            if canContinue(held, on: 0), held.bringsMore, (target.totalLength ?? Int64.max) <= held.answerEnd {
                core.streamContinues(from: held.offset)
            } else {
                adoptable = nil
                held.release(counting: settings.hostShare)
            }
        }
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
        var recall = false
        if let lender = settings.lender {
            // A lowered own share: the connections above it are loans now, taken from the lender
            // that the queue gave them back to.
            if let share = settings.ownShare { lender.withdraw(core.lowerOwn(to: share.count)) }
            let spare = lender.spare
            offered = spare > 0 ? lender.borrow(upTo: 1) : 0
            recall = spare < 0
        }
        // Slots of the host's budget beyond the requests in flight go back for other downloads.
        if let share = settings.hostShare, let inFlight = core.ranged?.inFlightToMainHost { share.sync(inFlight: inFlight) }
        if let w = settings.warmUps?.take() { apply(.warmedUp(w), now: now) }
        apply(.pass(offered: offered, recall: recall), now: now)
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
        collectPieces()
        try throwIfStopped()
        if core.judgesSlow(passStartedAt: now) {
            let connections = core.connections
            for c in io where connections[c.id].machine.isTransferring {
                apply(.unread(c.id, bytes: driver.multi.unreadBytes(of: c.easy) ?? 0), now: now)
                if c.head.isComplete, c.head.status >= 200 { apply(.answering(c.id), now: now) }
            }
        }
        if core.wantsStillConnecting(passStartedAt: now) { tellStillConnecting(now: now) }
        apply(.performed(passStartedAt: now))
        return isDone
    }

    /// Before a round of the slow rule or a progress tick: the transferring connections without a
    /// byte of their answer whose connection is not made yet (libcurl has not begun sending their
    /// request: `EasyHandle.requestGoingOut`); their stall clock is paused meanwhile, for at most the
    /// connection timeout from the request's start (libcurl ends a connect there), and the slow rule
    /// tells their handshakes from their wait for a first byte.
    private func tellStillConnecting(now: Double) {
        let connections = core.connections
        let limit = settings.transfer.connectTimeout
        for c in io where c.head.byteCount == 0 && connections[c.id].machine.isTransferring
            && now - connections[c.id].requestStartedAt < limit && !c.easy.requestGoingOut()
        {
            apply(.stillConnecting(c.id), now: now)
        }
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
            countEnded(c)
            driver.cancel(c.easy)
            settle(c)
            hostShare(of: c.id)?.cancelled(1)
            apply(.removed(c.id))
        }
        runAfterWrites(waiting: true)
        settings.lender?.lend(core.loans)
        settings.hostShare?.sync(inFlight: 0)
        recordFinalSlots()
        checkpointThread?.stop()
        vouching?.stop()
        pieceChecks?.hasher.stop()
        trace("writes at the end: \(writer.isDirect ? "O_DIRECT" : "page cache"), \(writer.bytesWritten); waited \(Format.fixed(writer.waitedSeconds, 2)) s for the writer")
        trace("cost to the servers: \(spent.summary)")
    }
}

extension FetchEngine {
    /// Counts the time the loop just waited for the writer as held time for every connection
    /// receiving: they were not read meanwhile, so neither the slow rule nor the stall timeout may
    /// blame the network for it.
    func countWriterWaits() {
        let waited = writer.waitedSeconds - writerWaitSeen
        guard waited > 0 else { return }
        writerWaitSeen = writer.waitedSeconds
        apply(.writerWaited(waited))
    }

    /// How many consecutive source ports libcurl may try from the random one before giving up.
    static let sourcePortTries = 64

    /// A random port in the system's ephemeral range, for a re-dial. Left to itself the kernel hands
    /// successive connections to one server ports that follow a pattern, and a path chosen by a hash
    /// of the addresses and ports (ECMP routing, load balancers, or the benchmark's "ports ending in 0
    /// or 1 are slow" server) can then pick the same slow path again; a random port draws it afresh.
    static func randomSourcePort() -> Int? {
        var low = 32768, high = 60999
        if let file = try? PosixFile.open(path: "/proc/sys/net/ipv4/ip_local_port_range", mode: .readOnly) {
            defer { file.close() }
            let text = String(decoding: (try? file.read(count: 64, at: 0)) ?? [], as: UTF8.self)
            let parts = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
            if parts.count == 2, parts[0] >= 1024, parts[1] - parts[0] > sourcePortTries { (low, high) = (parts[0], parts[1]) }
        }
        return Int.random(in: low...(high - sourcePortTries))
    }
}

import Dispatch
import Glibc
import SeggetCurl
import SeggetSystem
import Synchronization

/// Runs any number of downloads on one thread and one `TransferDriver`: their probes, and the
/// engines that fetch their chunks, share one multi handle (so one connection cache: a file's
/// requests reuse the connections of the files before it on the same host) and one loop.
///
/// Threads: the loop runs on the thread that calls `run(until:)`. What blocks (opening and
/// preallocating the partial download, the journal, verifying, publishing) runs on `steps`, one
/// serial queue for all the downloads, so that a download never needs a thread of its own; the
/// checkpoints' syncs run there too, between those steps. Beside them run the writers
/// (`StagedWriter.sharedQueues`, two serial queues for every download).
///
/// Everything is handed to the loop through `post`, from any thread; the loop owns the driver, the
/// engines while they fetch, and the probes.
public final class DownloadLoop: @unchecked Sendable {
    let driver: TransferDriver
    /// The downloads' blocking steps, one at a time: off the loop on a worker thread of their own,
    /// or, for a loop that serves one download at a time, on the loop thread between passes (see
    /// `init`).
    public let steps: LoopSteps

    private let inboxLock = ConditionLock()
    /// Guarded by `inboxLock`: work posted for the loop thread.
    private var inbox: [() -> Void] = []
    /// Guarded by `inboxLock`: the loop will look at its inbox without another wake: one was sent
    /// for work it has not taken yet, or the loop thread itself posted some.
    private var inboxSeen = false
    /// Guarded by `inboxLock`: the thread running the loop, while it runs. Work it posts itself needs
    /// no wake: a pass looks at the inbox before it waits.
    private var thread: SystemThread.ID?

    // Loop thread only.
    private final class Running {
        let engine: FetchEngine
        let done: ((any Error)?) -> Void
        /// When the engine is next looked at even with nothing new.
        var nextVisit = 0.0
        var prepared = false
        init(engine: FetchEngine, done: @escaping ((any Error)?) -> Void) {
            self.engine = engine
            self.done = done
        }
    }
    /// An engine with nothing new is looked at this often at least, sooner when a timer of its own
    /// is due (its `pollTimeout`).
    static let idleVisit = 0.02
    /// Downloads ended so far (loop thread only).
    private var concluded = 0
    private var engines: [Running] = []
    private var probes: [ObjectIdentifier: LoopProbe] = [:]
    private var cacheSize = 16
    /// Loop thread only: how busy the loop is.
    private var load = LoopLoad()
    /// `load.fraction`'s bits, for other threads (`busyFraction`).
    private let busy = Atomic<UInt64>(0)
    private var multiplexing = false
    /// For Benchmarks/http2.py only: `SEGGET_HTTP2_RANGES=streams` multiplexes one file's ranges
    /// on one HTTP/2 connection, the way measured against connections of their own.
    static let benchmarkRangesAsStreams = getenv("SEGGET_HTTP2_RANGES").map { String(cString: $0) == "streams" } ?? false
    /// For Benchmarks/http2.py only: `SEGGET_HTTP2_BATCH=before` runs a batch over HTTP/2 as before
    /// issue 38 (no multiplexing, `-j` files at once).
    public static let benchmarkBatchBefore = getenv("SEGGET_HTTP2_BATCH").map { String(cString: $0) == "before" } ?? false

    /// Whether a file that its probe brought whole is saved on one of the writer threads
    /// (`StagedWriter.sharedQueues`) while the steps go on, rather than on the steps themselves.
    /// A batch that gains a second loop turns it off (see `Batch.run`): each loop then saves its
    /// own files, and the two loops are what runs at once. Read and set from any thread.
    public var wholeSavesOnWriters: Bool {
        get { savesOnWriters.load(ordering: .relaxed) }
        set { savesOnWriters.store(newValue, ordering: .relaxed) }
    }
    private let savesOnWriters: Atomic<Bool>

    /// With `stepsOnLoop`, the blocking steps run on the loop thread, between two passes, so that
    /// each step costs no hand-over to another thread and back (on a busy 2-CPU machine, a wait for
    /// the scheduler each way): for a loop that serves one download at a time (a single download,
    /// `-j 1`), and for a batch, whose steps are short (a file's name, its part file, its journal,
    /// its publication) and whose checkpoints' syncs run on a worker of their own. Otherwise (the
    /// daemon, a batch with `--fsync`) they run on a worker thread, off the loop.
    ///
    /// `wholeSavesOnWriters` (default: when the steps have a thread of their own): see the property.
    /// A batch of many files in flight saves them on the writers, so that the loop goes on with the
    /// other files' requests while a file is created, and two are created at once.
    ///
    /// With `http2Sharing`, HTTP/2 requests to a host share its connections as streams, at most
    /// `streams` on each, on at most `connections` connections per host (a batch's many small files):
    /// a request beyond waits in libcurl for a free stream rather than opening a connection of its
    /// own (without the cap on connections, libcurl 7.88 opened one for nearly every request added
    /// while the connections were full: 66 connections for 400 files at 8 streams each, and
    /// `CURLOPT_PIPEWAIT` did not stop it).
    public init(
        stepsOnLoop: Bool = false, wholeSavesOnWriters: Bool? = nil,
        http2Sharing: (streams: Int, connections: Int)? = nil
    ) {
        savesOnWriters = Atomic(wholeSavesOnWriters ?? !stepsOnLoop)
        driver = TransferDriver(multi: MultiHandle(), clock: monotonicSeconds)
        try? driver.multi.setMaxConnectionCache(cacheSize)
        if let sharing = http2Sharing, (try? driver.multi.setMultiplexing(true)) != nil {
            multiplexing = true
            try? driver.multi.setMaxConcurrentStreams(max(1, sharing.streams))
            try? driver.multi.setMaxHostConnections(max(1, sharing.connections))
        }
        steps = LoopSteps(worker: stepsOnLoop ? nil : SerialWorker(name: "segget-steps"))
        steps.loop = self
    }

    /// A loop running on a thread of its own for as long as the process lives (the daemon's), or nil
    /// when no thread could be had.
    public static func onOwnThread() -> DownloadLoop? {
        let loop = DownloadLoop()
        do {
            try SystemThread.detach { loop.run(until: { false }) }
        } catch {
            return nil
        }
        return loop
    }

    /// Keeps at most `count` connections open for reuse (16 by default; engines that join raise it
    /// to twice their connections). From any thread: applied on the loop. A batch that splits its
    /// files over two loops gives each half its connections, so that together they keep no more
    /// open than one did (see `LoopRun.addLoop`).
    public func keepConnections(_ count: Int) {
        post { [self] in
            if (try? driver.multi.setMaxConnectionCache(count)) != nil { cacheSize = count }
        }
    }

    /// Downloads fetching now (loop thread only).
    var runningEngines: Int { engines.count }

    /// Runs `work` on the loop thread at the top of its next pass; from any thread.
    public func post(_ work: @escaping () -> Void) { post(work, wake: true) }

    /// `post`, waking the loop only with `wake`. Without, `work` waits for the loop's next pass,
    /// which the caller knows is coming: the loop has a request of its own in flight, or is
    /// running work that ends in a look at the inbox (a batch's other loops, `LoopRun`, hand each
    /// other files this way: a wake of a sleeping thread costs a 2-CPU VM tens of microseconds).
    public func post(_ work: @escaping () -> Void, wake: Bool) {
        let wakeNow = inboxLock.withLock { () -> Bool in
            inbox.append(work)
            if thread == SystemThread.current { inboxSeen = true }
            guard wake, !inboxSeen else { return false }
            inboxSeen = true
            return true
        }
        // Thread-safe in libcurl: a poll in progress returns at once. Work posted behind work the
        // loop will see needs no wake of its own (the loop takes everything in the inbox at once):
        // behind work whose wake was sent, or work the loop thread posted itself (a pass looks at the
        // inbox before it waits). Work posted without a wake does not count.
        if wakeNow { try? driver.multi.wakeUp() }
    }

    /// Runs the loop on the calling thread until `finished` says so (asked after every pass, and at
    /// once after work is posted).
    public func run(until finished: () -> Bool) {
        inboxLock.withLock { thread = SystemThread.current }
        defer { inboxLock.withLock { thread = nil } }
        var mark = monotonicSeconds()
        while true {
            runPosted()
            if finished() { return }
            let waited = pass()
            let now = monotonicSeconds()
            load.pass(worked: now - mark - waited, waited: waited)
            busy.store(load.fraction.bitPattern, ordering: .relaxed)
            mark = now
        }
    }

    /// The share of its recent time the loop spent working rather than waiting for its sockets
    /// (see `LoopLoad`); from any thread.
    public var busyFraction: Double { Double(bitPattern: busy.load(ordering: .relaxed)) }

    /// Runs the work posted so far, in order, on the calling thread, and what that work posts in turn,
    /// up to four rounds, rather than one more pass (a poll and every engine's visit) for each: a
    /// batch file's steps post one another. Work that keeps posting more waits for the next pass.
    private func runPosted() {
        for _ in 0..<4 {
            let work = inboxLock.withLock { () -> [() -> Void] in
                defer { inbox.removeAll(keepingCapacity: true) }
                inboxSeen = false
                return inbox
            }
            if work.isEmpty { return }
            for w in work { w() }
        }
    }

    /// One pass: the engines prepare, the driver performs (completions go to their engine or
    /// probe), the probes look at their requests, the engines carry out what followed; then a wait
    /// for the sockets unless something ended.
    ///
    /// Only the engines with something new take part: bytes received or a transfer ended since they
    /// were last looked at, or a timer of theirs due, or `idleVisit` passed (what other threads and
    /// downloads change for them: the writer's progress, spare connections, an interrupt). A pass
    /// woken by one socket of many downloads (a daemon's 64) does not visit all of them. Returns the
    /// seconds it waited for the sockets.
    private func pass() -> Double {
        let now = monotonicSeconds()
        let concludedBefore = concluded
        for r in engines {
            guard r.engine.hadActivity || now >= r.nextVisit else {
                // Its callbacks in this pass read the time from here.
                r.engine.lastLoopTime = now
                r.engine.passStartedAt = now
                continue
            }
            r.engine.hadActivity = false
            r.prepared = true
            do {
                if try r.engine.prepare() { conclude(r.engine, nil) }
            } catch {
                conclude(r.engine, error)
            }
        }
        let completed: Int
        do {
            completed = try libcurl(driver.performAndDispatch)
        } catch {
            for r in engines { conclude(r.engine, error) }
            for p in probes.values { p.abandon(error) }
            return 0
        }
        driver.tickDueClients()
        offerSlots()
        for r in engines where r.prepared || r.engine.hadActivity {
            r.prepared = false
            do {
                if try r.engine.afterPerform() {
                    conclude(r.engine, nil)
                    continue
                }
            } catch {
                conclude(r.engine, error)
                continue
            }
            let t = r.engine.passStartedAt
            r.nextVisit = t + min(Self.idleVisit, Double(r.engine.pollTimeout(now: t)) / 1000)
        }
        // A download that ended in this pass may be what the caller waits for (`run(until:)`): no wait
        // then. One that ended on a visit alone (its writer done, no transfer of this pass) used to
        // leave the loop asleep for the idle second: `-o -` exited a second after its last byte.
        if completed > 0 || concluded != concludedBefore || inboxLock.withLock({ !inbox.isEmpty }) { return 0 }
        let later = monotonicSeconds()
        // Idle, it waits for posted work (which wakes it) a second at a time.
        var wait = engines.map { Int32(max(0, (($0.nextVisit - later) * 1000).rounded(.up))) }.min()
            ?? (probes.isEmpty ? 1000 : 100)
        // A probe's request is looked at (held or cut) at least every 10 ms, as on a thread of its own.
        if !probes.isEmpty { wait = min(wait, 10) }
        try? driver.wait(timeoutMs: wait)
        return monotonicSeconds() - later
    }

    // MARK: Engines

    /// Starts fetching with `engine` (made with this loop's driver); `done` hears on the loop thread
    /// how it ended: nil when every chunk is written, else what stopped it (`SeggetError`,
    /// `ResourceChanged` or `RangesIgnored`).
    /// Loop thread only.
    func join(_ engine: FetchEngine, done: @escaping ((any Error)?) -> Void) {
        precondition(engine.driver === driver, "an engine joins the loop whose driver it was made with")
        let wanted = max(16, (engines.reduce(0) { $0 + $1.engine.io.count } + engine.io.count) * 2)
        if wanted > cacheSize, (try? driver.multi.setMaxConnectionCache(wanted)) != nil { cacheSize = wanted }
        // Over HTTP/2 a download's ranges keep a connection each, as over HTTP/1.1 (the multi handle
        // multiplexes only where a batch asked at `init`): 64 MiB at -n 8 through WAN link a took
        // 1.86 times as long as streams of one connection (0.1 % loss halves one window for all of
        // them), and 1 GiB on loopback no less (Benchmarks/RESULTS.md, issue 38).
        if engine.settings.transfer.http2 && !multiplexing && Self.benchmarkRangesAsStreams, (try? driver.multi.setMultiplexing(true)) != nil {
            multiplexing = true
        }
        // Its checkpoints' syncs run between the downloads' blocking steps, on no thread of their own.
        // With the steps on the loop, on the checkpoints' own worker: a sync must not hold up the loop.
        engine.checkpointQueue = steps.worker
        do {
            try engine.begin()
        } catch {
            done(error)
            return
        }
        engines.append(Running(engine: engine, done: done))
    }

    /// Runs `engines` (made with this loop's driver) on the calling thread until every one has ended,
    /// and returns what ended each: nil when every chunk is written, else what stopped it. For a loop
    /// of its own (`Download.stream`, tests); the calling thread becomes the loop's thread meanwhile.
    func run(_ engines: [FetchEngine]) -> [(any Error)?] {
        let results = LoopResults(count: engines.count)
        post { [self] in
            for (i, engine) in engines.enumerated() {
                join(engine) { results.set(i, $0) }
            }
        }
        run(until: { results.allSet })
        return results.values
    }

    /// Ends `engine`: completed when `error` is nil, else stopped by it.
    private func conclude(_ engine: FetchEngine, _ error: (any Error)?) {
        guard let i = engines.firstIndex(where: { $0.engine === engine }) else { return }
        let r = engines.remove(at: i)
        concluded += 1
        var error = error
        if error == nil {
            do { try engine.complete() } catch let e { error = e }
        }
        engine.end()
        r.done(error)
    }

    // MARK: Probes

    /// Probes waiting for a slot in their host's budget, in the order they asked.
    private var slotWaiters: [LoopProbe] = []

    /// `probe` waits for a slot of `key`'s host: it takes one now when one is free and no probe
    /// before it waits for that host, else in its turn. Probes take their host's slots in the order
    /// they asked, so that a batch's files (whose probes start in list order) take them in list order
    /// and no file waiting for an earlier file's name holds a slot the earlier file still waits for.
    func waitForSlot(_ probe: LoopProbe, key: String) {
        if !slotWaiters.contains(where: { $0.hostKey == key }) && probe.trySlot() { return }
        slotWaiters.append(probe)
    }

    /// Offers slots to the waiting probes, in order, once a pass: past the first of a host that
    /// finds none free, that host's probes wait for the next pass.
    private func offerSlots() {
        guard !slotWaiters.isEmpty else { return }
        let waiting = slotWaiters
        slotWaiters = []
        var full: Set<String> = []
        var still: [LoopProbe] = []
        for p in waiting {
            guard let key = p.hostKey, !full.contains(key) else {
                if p.isWaitingForSlot { still.append(p) }
                continue
            }
            if !p.trySlot() {
                full.insert(key)
                still.append(p)
            }
        }
        // Probes that began waiting meanwhile (a refusal seen while another took its slot) follow.
        slotWaiters = still + slotWaiters
    }

    /// Starts probing for `download` (see `LoopProbe`); `done` hears on the loop thread. Loop thread only.
    /// With `hostShare`, the probe first waits (on the loop, without blocking it) for a slot in its
    /// host's budget, then calls `onSlot`; a refusal that the budget takes for the host's limit (with
    /// `retrying` or `waitsOutHostLimit`) waits for a slot again instead of counting as a failure. `after`: the failure of
    /// a first probe made for this download already (a batch's, see `Download.prepare`), counted as
    /// this probe's first attempt (see `LoopProbe.priorFailure`). `onFileName`: see
    /// `LoopProbe.onFileName`.
    func probe(
        _ download: Download, url: String? = nil, firstBytes: Int, deadline: Deadline?, retrying: Bool,
        waitsOutHostLimit: Bool = false,
        events: (@Sendable (DownloadEvent) -> Void)?, interrupt: InterruptFlag, hostShare: HostShare? = nil,
        slotHeld: Bool = false, warmUp: ConnectionWarmUp? = nil, after priorFailure: SeggetError? = nil,
        onSlot: (() -> Void)? = nil, onFileName: ((String) -> Void)? = nil, holdsWholeAnswer: Bool = false,
        done: @escaping (Result<ProbeResult, SeggetError>) -> Void
    ) {
        var prober = download.prober(firstBytes: firstBytes, multi: driver.multi, deadline: deadline)
        prober.holdsWholeAnswer = holdsWholeAnswer
        // The small first answer over TLS is for a download whose connections are its own.
        if let warmUp { prober.smallFirstAnswerOverTLS = warmUp.count > 0 }
        let p = LoopProbe(
            loop: self, download: download, url: url ?? download.url, prober: prober,
            retrying: retrying, waitsOutHostLimit: waitsOutHostLimit, events: events, interrupt: interrupt,
            hostShare: hostShare, slotHeld: slotHeld)
        p.onSlot = onSlot
        p.onFileName = onFileName
        p.warmUp = warmUp
        p.priorFailure = priorFailure
        let id = ObjectIdentifier(p)
        probes[id] = p
        // Not unregistered: a held transfer stays on the driver for the fetch, and the driver lets
        // go of a client (held weakly) once it is gone.
        p.done = { [unowned self] result in
            probes[id] = nil
            done(result)
        }
        driver.register(p, tickInterval: LoopProbe.tickInterval)
        p.begin()
    }

    /// Ends a transfer held for a fetch that did not take it (see `HeldTransfer`); from any thread.
    func release(_ handle: EasyHandle) {
        post { [self] in driver.cancel(handle) }
    }
}

extension DownloadLoop {
    /// Runs what was posted until nothing more is, on the calling thread (the loop is not running).
    func drainPosted() {
        while inboxLock.withLock({ !inbox.isEmpty }) { runPosted() }
    }
}

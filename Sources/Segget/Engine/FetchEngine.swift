import SeggetCurl
import Dispatch
import Glibc
import SeggetJournal
import Synchronization

/// One server that holds the file (the main URL or a mirror), with its validators.
struct FetchSource {
    var url: String
    var etag: String?
    var lastModified: String?
    /// Sent as `If-Range` so that a changed file yields a 200 instead of mixed bytes.
    var ifRange: String?
    /// Send no credentials here (another host than the one they were given for).
    var withoutCredentials = false
}

/// How a fetch validates what the server sends.
struct FetchTarget {
    var url: String
    /// Total length; nil only in stream mode with an unknown length.
    var totalLength: Int64?
    /// Ranged (one request per run of chunks) or one plain stream from byte 0.
    var ranged: Bool
    var etag: String?
    var lastModified: String?
    /// Sent as `If-Range` so that a changed file yields a 200 instead of mixed bytes.
    var ifRange: String?
    /// Mirrors besides the main URL; connection i uses source i mod (mirrors + 1).
    var mirrors: [FetchSource] = []

    /// Send no credentials to the main URL (a redirect moved it to another host).
    var mainWithoutCredentials = false

    var sources: [FetchSource] {
        [FetchSource(url: url, etag: etag, lastModified: lastModified, ifRange: ifRange, withoutCredentials: mainWithoutCredentials)] + mirrors
    }
}

/// Knobs of the fetch loop.
struct FetchSettings {
    var transfer = TransferOptions()
    var connections = 8
    /// Start with a few connections and add more while throughput rises, up to `connections`.
    var autoConnections = false
    var retries = 5
    var retryWait = 1.0
    /// `--timeout`: the loop ends there, and a retry that would wait past it fails at once.
    var deadline: Deadline?
    var maxRetryWait = RetryPolicy.defaultMaxWait
    var maxSpeed: Int64?
    var redialSlow = true
    var maxRedialsPerConnection = 3
    var endGame = true
    var checkpointInterval = 5.0
    /// Hand out work in file order, in runs of at most this many chunks (while hashing in order).
    var maxRunChunks: Int?
    var progressInterval = 0.25
    /// How the per-connection buffers reach the file (see `StagedWriter`).
    var writePath = WritePath.adaptive
}

/// Why a worker's transfer ended early (set inside callbacks, acted on by the loop).
enum StopReason {
    case none
    /// Reached the end of an assignment that shrank (stolen work): not an error.
    case reachedEnd
    /// Lost an end-game race.
    case cancelled
    /// Retry after a delay (seconds; nil means backoff); `kind` is the failure if retries run out.
    case retry(String, after: Double?, kind: FailureKind)
    /// The server answered a range with the whole file (same validators): ranges are unusable.
    case rangesIgnored(String)
    /// The resource changed on the server; the download must start over.
    case resourceChanged(String)
    case fatal(SeggetError)
}

/// The resource changed while downloading; the caller restarts from zero.
struct ResourceChanged: Error {
    let reason: String
}

/// The server stopped honouring byte ranges; the caller restarts with one stream from byte 0.
struct RangesIgnored: Error {
    let reason: String
}

/// One connection: an easy handle plus the byte range it is filling.
final class Worker {
    let id: Int
    let easy = EasyHandle()
    unowned(unsafe) var engine: FetchEngine!

    var active = false
    var waitUntil: Double?
    /// `waitUntil` is this worker's first start (see `FetchEngine.rampStep`), not a retry.
    var rampStart = false
    /// Its transfer is paused until `--max-speed`'s budget allows receiving again.
    var paused = false
    var head = ResponseHead()
    var validated = false
    var stop = StopReason.none
    var isDuplicate = false

    /// What the current HTTP request asked for, half-open; `requestEnd` moves down to where a shorter
    /// answer ends.
    var requestStart: Int64 = 0
    var requestEnd: Int64 = 0
    /// Where this worker's bytes in its current chunk begin (for progress).
    var progressFrom: Int64 = 0
    /// Next byte to write, and where this worker must stop (≤ requestEnd; shrinks when robbed).
    var pos: Int64 = 0
    var end: Int64 = 0
    /// End of the chunk that holds `pos`.
    var chunkEnd: Int64 = 0

    var attempts = 0
    /// Re-dials since this worker last finished a chunk (see `SlowConnectionRule`).
    var redials = 0
    /// Index into the target's sources (main URL, then mirrors).
    var source = 0
    /// `pos` when this worker's progress slot was last written.
    var slotPos: Int64 = 0
    var transferStartedAt = 0.0
    var transferBytes: Int64 = 0
    /// When the last byte arrived (or the transfer started), for the stall timeout.
    var lastByteAt = 0.0
    /// (time, transferBytes) samples for the rate, newest last.
    var samples: [(Double, Int64)] = []
    /// `held(at:)` at the time of each sample in `samples`.
    var heldSamples: [Double] = []
    /// Seconds segget held this worker back (paused for `--max-speed`, or the loop waiting for the
    /// writer), summed over its life; a pause in progress began at `pausedAt`.
    var heldTotal = 0.0
    var pausedAt: Double?
    /// When the current request went out, and `held(at:)` then and at `transferStartedAt`.
    var requestStartedAt = 0.0
    var heldAtRequest = 0.0
    var heldAtTransfer = 0.0
    /// When the current transfer's first body byte arrived, with `held(at:)` and `transferBytes` then
    /// (for judging a request younger than the slow rule's window).
    var firstByteAt: Double?
    var heldAtFirstByte = 0.0
    var bytesAtFirstByte: Int64 = 0
    /// Received bytes not yet written: `staging.start..<pos` (see `StagedWriter`).
    var staging: Staging!

    init(id: Int) { self.id = id }

    /// The rate over about the last `window` seconds, from samples taken every `progressInterval`;
    /// nil until they span at least three quarters of it. The samples may reach back one interval
    /// further, or the rate would be unknown whenever the clock sits just before a sample.
    func rate(now: Double, window: Double) -> Double? {
        sampledRate(samples, endingAt: now, window: window + engine.settings.progressInterval, minSpan: window * 0.75)
    }

    /// Seconds held back so far, counting a pause in progress.
    func held(at now: Double) -> Double { heldTotal + (pausedAt.map { max(0, now - $0) } ?? 0) }

    /// Bytes, seconds and held seconds over the same samples `rate(now:window:)` uses.
    func recent(now: Double, window: Double) -> (bytes: Int64, seconds: Double, held: Double)? {
        let reach = window + engine.settings.progressInterval
        guard let last = samples.indices.last, heldSamples.count == samples.count,
            let first = samples.firstIndex(where: { now - $0.0 <= reach + 0.01 }),
            samples[last].0 - samples[first].0 >= max(window * 0.75, 0.001)
        else { return nil }
        return (samples[last].1 - samples[first].1, samples[last].0 - samples[first].0, heldSamples[last] - heldSamples[first])
    }
}

extension Worker: TransferDelegate {
    func transfer(_ handle: EasyHandle, received body: UnsafeRawBufferPointer) -> WriteDecision {
        guard let ptr = body.baseAddress else { return .proceed }
        return engine.receive(self, ptr, body.count)
    }
    func transfer(_ handle: EasyHandle, receivedHeaderLine line: String) { head.append(line: Substring(line)) }
}

/// The fetch loop: one libcurl multi handle driving one easy handle per connection, on the calling
/// thread. Each write callback `pwrite`s the received bytes straight to their offset in the data file.
final class FetchEngine {
    let target: FetchTarget
    let settings: FetchSettings
    let data: BlockStorage
    /// Where received bytes go: per-connection buffers written with `O_DIRECT` when possible.
    let writer: StagedWriter
    let journal: Journal?
    let plan: ChunkPlan
    var scheduler: Scheduler
    /// `--max-speed`, shared by all connections (see `RateBudget`).
    private var budget: RateBudget?
    private var resumeCursor = 0
    let interrupt: InterruptFlag
    var onProgress: ((DownloadProgress) -> Void)?
    var onEvent: ((DownloadEvent) -> Void)?
    /// Where each connection got inside its current chunk (survives `kill -9`), and what an earlier
    /// run recorded there: chunk → offset up to which it is already written.
    var progressSlots: ProgressSlots?
    var partialChunks: [Int: Int64] = [:]
    /// A slot is rewritten after at least this many new bytes, to keep the syscalls few.
    static let slotStep: Int64 = 128 << 10

    /// Called when the finished prefix of the file grows (for hashing behind the download).
    var onPrefix: ((Int64) -> Void)?
    /// Called every `writebackStep` bytes written through the page cache, to start writing dirty pages
    /// back early, so that the data reaches the disk while the download goes on and a final sync (or
    /// the user's `sync`) has little left to do.
    var onWriteback: (() -> Void)?
    var writebackStep: Int64 = 64 << 20
    private var lastWriteback: Int64 = 0

    /// Runs this engine's transfers; the engine is its one client (see `transferDriver(_:completed:with:)`).
    private let driver: TransferDriver
    /// `SEGGET_DEBUG=1` traces scheduling decisions on stderr (for tuning, not for users).
    private let debug = getenv("SEGGET_DEBUG") != nil

    private func trace(_ text: @autoclosure () -> String) {
        guard debug else { return }
        let line = "[\(Format.fixed(monotonicSeconds() - startedAt, 2))] \(text())\n"
        try? FileDescriptor.standardError.writeAll(line)
    }
    private let sources: [FetchSource]
    private lazy var strippedTransfer = settings.transfer.withoutCredentials()
    /// How many workers may take work now (grows in auto mode).
    private var workerLimit: Int
    private var autoLastRate = 0.0
    private var autoLastChange = 0.0
    private var autoSettled = false
    private(set) var workers: [Worker] = []
    private var pendingRemoval: [Int] = []
    private var fatalError: SeggetError?
    private var changed: String?
    private var ignored: String?

    var prefixChunks = 0
    private var streamPrefix: Int64 = 0
    /// What may happen only once the writer has written everything handed over up to a ticket: the
    /// journal bit of a chunk, a progress slot, the hasher's prefix. In ticket order.
    private enum AfterWrite {
        case chunk(Int)
        case slot(worker: Int, chunk: Int, upTo: Int64)
        case stream(Int64)
    }
    private var afterWrites: [(ticket: Int64, action: AfterWrite)] = []
    private var afterWritesDone = 0
    /// Chunks whose bytes are in the file (for the hasher's prefix), unlike `scheduler.finished`,
    /// which counts chunks as soon as their last byte is received.
    var inFile: [Bool] = []
    /// Bytes received from the network in this run.
    private(set) var receivedBytes: Int64 = 0
    private var finishedBytes: Int64 = 0
    /// The CRC-32C of each chunk's bytes as they are handed to the writer (see `ChunkVouching.swift`).
    let chunkCRCs: ChunkChecksums
    /// Checks the chunks a resumed journal claims, behind the download (see `vouch(with:)`).
    var vouching: ChunkVoucher?
    /// Claimed chunks whose bytes did not match their checksum, and their bytes: fetched again.
    var rejectedChunks = 0
    var rejectedBytes: Int64 = 0
    private var rateSamples: [(Double, Int64)] = []
    private var startedAt = 0.0
    /// Decides which connections are too slow to keep their work (see `redialSlowConnections`).
    private var slowRule: SlowConnectionRule
    /// How long recent first body bytes took after their request (held time left out), newest last.
    private var firstByteWaits: [Double] = []
    /// `writer.waitedSeconds` already counted as held time.
    private var writerWaitSeen = 0.0
    private var checkpointThread: CheckpointWorker?
    /// Time at the top of the current loop iteration (cheaper than a clock read per callback).
    private var lastLoopTime = 0.0

    init(target: FetchTarget, settings: FetchSettings, data: BlockStorage, journal: Journal?,
         plan: ChunkPlan, isFinished: (Int) -> Bool, interrupt: InterruptFlag, multi: MultiHandle = MultiHandle(),
         partialChunks: [Int: Int64] = [:]) {
        self.target = target
        driver = TransferDriver(multi: multi, clock: monotonicSeconds)
        self.settings = settings
        self.data = data
        let bufferSize = StagedWriter.bufferSize(connections: target.ranged ? settings.connections : 1)
        writer = StagedWriter(
            data: data, path: settings.writePath, bufferSize: bufferSize,
            maxInFlight: StagedWriter.maxInFlight(bufferSize: bufferSize))
        self.journal = journal
        self.plan = plan
        self.interrupt = interrupt
        chunkCRCs = ChunkChecksums(plan: plan)
        let n = target.ranged ? settings.connections : 1
        sources = target.sources
        workerLimit = target.ranged && settings.autoConnections ? min(n, FetchEngine.autoInitial) : n
        slowRule = SlowConnectionRule(
            maxConsecutiveRedials: settings.maxRedialsPerConnection,
            maxTotalRedials: Self.maxTotalRedials(connections: n, chunks: plan.chunkCount))
        self.partialChunks = partialChunks
        scheduler = Scheduler(
            plan: plan, connections: workerLimit, isFinished: isFinished, maxRunChunks: settings.maxRunChunks,
            runStarts: Set(partialChunks.keys))
        workers = (0..<n).map { Worker(id: $0) }
        for w in workers {
            w.engine = self
            w.source = w.id % sources.count
        }
        if let cap = settings.maxSpeed { budget = RateBudget(bytesPerSecond: cap, now: monotonicSeconds()) }
        for k in 0..<plan.chunkCount where scheduler.finished[k] { finishedBytes += Int64(plan.byteRange(ofChunk: k).count) }
        prefixChunks = scheduler.finishedPrefix(from: 0)
        inFile = scheduler.finished
        if target.ranged && journal != nil {
            // Checksummed beside the write, off the fetch loop, from the very buffer that is written.
            writer.besideWrite = { [chunkCRCs] bytes, offset in chunkCRCs.add(bytes, at: offset) }
        }
    }

    // MARK: The loop

    /// Runs until every chunk is written. Throws `SeggetError` or `ResourceChanged`.
    func run() throws {
        startedAt = monotonicSeconds()
        try libcurl { () throws(CurlError) in
            try driver.multi.setMultiplexing(settings.transfer.http2)
            try driver.multi.setMaxConnectionCache(max(workers.count * 2, 16))
        }
        trace("writes: \(writer.isDirect ? "O_DIRECT" : "page cache")")
        defer { trace("writes at the end: \(writer.isDirect ? "O_DIRECT" : "page cache"), \(writer.bytesWritten); waited \(Format.fixed(writer.waitedSeconds, 2)) s for the writer") }
        if let journal, settings.checkpointInterval > 0 {
            checkpointThread = CheckpointWorker(journal: journal, data: data, interval: settings.checkpointInterval)
        }
        defer {
            for w in workers where w.active { detach(w) }
            // Whatever was received is written and recorded, also when stopping early.
            runAfterWrites(waiting: true)
            recordFinalSlots()
            checkpointThread?.stop()
            vouching?.stop()
        }
        if target.ranged {
            onPrefix?(plan.byteRange(ofChunks: 0..<prefixChunks).upperBound)
            let starting = workers.filter { scheduler.run(of: $0.id) != nil }
            let step = Self.rampStep(connections: starting.count)
            for (k, w) in starting.enumerated() {
                if k == 0, let r = scheduler.run(of: w.id) {
                    start(w, bytes: runBytes(r))
                } else {
                    w.waitUntil = startedAt + Double(k) * step
                    w.rampStart = true
                }
            }
        } else {
            start(workers[0], bytes: 0..<(target.totalLength ?? Int64.max))
        }
        var lastTick = 0.0
        var lastJudged = 0.0
        while true {
            lastLoopTime = monotonicSeconds()
            if interrupt.isSet {
                throw SeggetError(.interrupted, "interrupted")
            }
            let now = monotonicSeconds()
            if let d = settings.deadline, now >= d.at {
                throw d.expired("the download")
            }
            try throwIfStopped()
            if isDone { break }
            startWaitingWorkers(now: now)
            if target.ranged { assignIdleWorkers() }
            // Each ended transfer comes back through `transferDriver(_:completed:with:)`.
            let completed = try libcurl(driver.performAndDispatch)
            flushRemovals()
            countWriterWaits()
            try resumePausedTransfers()
            runAfterWrites()
            collectVouched()
            try throwIfStopped()
            if now - lastTick >= settings.progressInterval {
                lastTick = now
                // Samples are timed after the bytes they count (`perform` can take a while).
                tick(now: monotonicSeconds())
            }
            if settings.redialSlow && target.ranged && now - lastJudged >= Self.slowJudgeInterval {
                lastJudged = now
                redialSlowConnections(now: monotonicSeconds())
            }
            if isDone { break }
            // A connection that just finished gets its next work at once, not after the next poll
            // (which can wait up to 100 ms while the others receive in paced bursts).
            if completed > 0 { continue }
            try libcurl { () throws(CurlError) in try driver.wait(timeoutMs: pollTimeout(now: now)) }
        }
        runAfterWrites(waiting: true)
        try throwIfStopped()
        if let cp = checkpointThread {
            checkpointThread = nil
            cp.stop()
        }
        tick(now: monotonicSeconds())
    }

    /// Carries out what waited for the writer (see `AfterWrite`), up to the last completed write, or,
    /// `waiting`, after every write handed over so far. A write error stops the download.
    private func runAfterWrites(waiting: Bool = false) {
        guard waiting || afterWritesDone < afterWrites.count else { return }
        let done: Int64
        do {
            if waiting { try writer.drain() }
            done = try writer.completedTicket()
        } catch {
            if fatalError == nil { fatalError = Self.writeError(error) }
            return
        }
        while afterWritesDone < afterWrites.count, afterWrites[afterWritesDone].ticket <= done {
            let action = afterWrites[afterWritesDone].action
            afterWritesDone += 1
            switch action {
            case .chunk(let k):
                do {
                    // A chunk without a checksum (see `ChunkChecksums`) is not claimed: a resume fetches it.
                    if let crc = chunkCRCs.takeFinished(k) {
                        try journal?.markWritten(chunk: k, crc: crc)
                    } else {
                        trace("chunk \(k) has no checksum; not recorded in the journal")
                    }
                } catch {
                    if fatalError == nil {
                        fatalError = SeggetError(.fileSystem, "could not update the journal: \(error). Free some space or fix permissions, then run the same command to resume.")
                    }
                }
                markInFile(k)
            case .slot(let id, let chunk, let upTo):
                if let crc = chunkCRCs.crc(ofChunk: chunk, upTo: upTo) {
                    try? progressSlots?.record(slot: id, chunk: chunk, upTo: upTo, crc: crc)
                }
            case .stream(let p):
                if p > streamPrefix {
                    streamPrefix = p
                    onPrefix?(p)
                }
            }
        }
        if afterWritesDone >= 4096 {
            afterWrites.removeFirst(afterWritesDone)
            afterWritesDone = 0
        }
    }

    /// On the way out (Ctrl-C, an error), once everything received is written: records where each
    /// connection got inside its chunk, so that a rerun continues from there. (With chunks no larger
    /// than the staging buffer, slots are otherwise written only at chunk ends.)
    private func recordFinalSlots() {
        guard let slots = progressSlots, target.ranged, (try? writer.completedTicket()) == writer.submitted else { return }
        for w in workers where !w.isDuplicate && w.staging != nil && w.pos > 0 && w.pos < plan.totalLength {
            let k = plan.chunk(containing: w.pos - 1)
            guard !scheduler.finished[k], w.pos < plan.byteRange(ofChunk: k).upperBound, w.pos > w.slotPos,
                let crc = chunkCRCs.crc(ofChunk: k, upTo: w.pos)
            else { continue }
            try? slots.record(slot: w.id, chunk: k, upTo: w.pos, crc: crc)
        }
    }

    /// Chunk `k`'s bytes are in the file (written in this run, or kept and vouched for): the finished
    /// prefix may grow.
    func markInFile(_ k: Int) {
        inFile[k] = true
        if k == prefixChunks {
            while prefixChunks < inFile.count && inFile[prefixChunks] { prefixChunks += 1 }
            onPrefix?(plan.byteRange(ofChunks: 0..<prefixChunks).upperBound)
        }
    }

    /// Chunk `k`, counted as finished, is fetched again (its kept bytes failed their check).
    func reopen(_ k: Int) {
        guard scheduler.finished[k] else { return }
        scheduler.reopen(k)
        finishedBytes -= Int64(plan.byteRange(ofChunk: k).count)
    }

    /// Ends the loop with whatever a transfer decided for the whole download.
    private func throwIfStopped() throws {
        if let e = fatalError { throw e }
        if let c = changed { throw ResourceChanged(reason: c) }
        if let r = ignored { throw RangesIgnored(reason: r) }
    }

    private var isDone: Bool {
        // Nothing is finished before every chunk kept from an earlier run was vouched for.
        if target.ranged { return scheduler.isComplete && (vouching?.isDone ?? true) }
        let w = workers[0]
        return !w.active && w.waitUntil == nil && w.pos >= w.end
    }

    private func pollTimeout(now: Double) -> Int32 {
        var ms = 100.0
        for w in workers { if let t = w.waitUntil { ms = min(ms, max(0, (t - now) * 1000)) } }
        if let b = budget, workers.contains(where: { $0.paused }) {
            ms = min(ms, max(1, (b.secondsUntilAllowed * 1000).rounded(.up)))
        }
        return Int32(ms)
    }

    // MARK: Assignment

    private func assignIdleWorkers() {
        let idle = workers.prefix(workerLimit).filter { !$0.active && $0.waitUntil == nil && scheduler.run(of: $0.id) == nil && scheduler.duplicates[$0.id] == nil }
        for (i, w) in idle.enumerated() {
            let now = monotonicSeconds()
            guard let a = scheduler.nextAssignment(
                for: w.id, allowDuplicates: settings.endGame,
                remainingSeconds: { self.remainingSeconds(self.workers[$0], now: now) },
                minRemainingSeconds: FetchEngine.minRaceSeconds, maxRacers: FetchEngine.maxRacers, thieves: idle.count - i,
                chunkSeconds: typicalRate(now: now).map { Double(plan.chunkSize) / $0 },
                runSeconds: { self.runSeconds(self.workers[$0], now: now) },
                worthStealing: { self.worthStealing(self.workers[$0], notStartedChunks: $1, now: now) })
            else { continue }
            trace("w\(w.id) gets \(a)")
            switch a {
            case .run(let r):
                start(w, bytes: runBytes(r))
            case .stolen(let r, let victim, let newEnd):
                let v = workers[victim]
                v.end = min(v.end, plan.byteRange(ofChunk: newEnd - 1).upperBound)
                start(w, bytes: runBytes(r))
            case .duplicate(let chunk, let owner):
                let o = workers[owner]
                let chunkRange = plan.byteRange(ofChunk: chunk)
                let from = max(chunkRange.lowerBound, min(o.pos, chunkRange.upperBound - 1))
                // The racer fetches only from `from` on; what the owner received before it must reach
                // the file whoever wins (a losing owner's staged bytes are discarded), and before the
                // winner's journal bit, which is queued behind a later ticket.
                settle(o)
                w.isDuplicate = true
                start(w, bytes: from..<chunkRange.upperBound)
            }
        }
    }

    /// Robbing a connection aborts its request at the cut (what is already in flight beyond it is
    /// wasted) and costs the thief a new request: worth it only when the victim would otherwise need
    /// a while for the rest. 0.2 s rather than 0.5 s shortened the uneven benchmark's tail (median of
    /// 4: 8.55 s against 8.84 s) and changed nothing measurable capped or uncapped.
    static let minStealSeconds = 0.2

    /// A victim waiting to retry has nothing in flight and may always be robbed. One that is receiving
    /// is robbed only on evidence, like a race: once its rate is known and its remainder would take a
    /// while, since a fast server may already have sent everything beyond the cut.
    private func worthStealing(_ v: Worker, notStartedChunks: Int, now: Double) -> Bool {
        guard v.active else { return true }
        guard let r = v.rate(now: now, window: 1) ?? averageRate(v, now: now) else { return false }
        let bytes = Double(notStartedChunks) * Double(plan.chunkSize)
        return bytes / max(r, 1) >= FetchEngine.minStealSeconds
    }

    /// The current request's average rate, once it had `minEvidenceSeconds` free to receive (and, if
    /// no byte came yet, far longer than first bytes usually take); nil before.
    private func averageRate(_ w: Worker, now: Double) -> Double? {
        let elapsed = now - w.requestStartedAt - (w.held(at: now) - w.heldAtRequest)
        guard elapsed >= max(FetchEngine.minEvidenceSeconds, w.validated ? 0 : 4 * (usualFirstByteWait ?? 0)) else { return nil }
        return Double(w.pos - w.requestStart) / elapsed
    }

    /// Racing a chunk costs a connection and up to a chunk of bandwidth: only worth it for one that
    /// is expected to take longer than this.
    static let minRaceSeconds = 0.5
    /// A second racer joins only when the first is slow too (see `Scheduler`).
    static let maxRacers = 2

    /// Seconds the worker still needs for its in-flight chunk: large when it is waiting to retry,
    /// zero while its rate is not known yet (racing is decided on evidence, not at once).
    /// The bytes of a run, skipping the part of its first chunk an earlier run already wrote.
    private func runBytes(_ r: Range<Int>) -> Range<Int64> {
        let bytes = plan.byteRange(ofChunks: r)
        guard let done = partialChunks.removeValue(forKey: r.lowerBound), done > bytes.lowerBound,
            done < plan.byteRange(ofChunk: r.lowerBound).upperBound
        else { return bytes }
        return done..<bytes.upperBound
    }

    /// Seconds `w` still needs for its whole run at its current rate; nil while that is unknown.
    private func runSeconds(_ w: Worker, now: Double) -> Double? {
        guard w.active, !w.isDuplicate, let r = w.rate(now: now, window: 1) else { return nil }
        return Double(max(0, w.end - w.pos)) / max(r, 1)
    }

    /// The median rate of the connections receiving now, for sizing steals; nil if none is known.
    private func typicalRate(now: Double) -> Double? {
        let rates = workers.compactMap { w in w.active && !w.isDuplicate ? w.rate(now: now, window: 1) : nil }.sorted()
        guard !rates.isEmpty else { return nil }
        return max(1, rates[rates.count / 2])
    }

    /// (Until a second of samples is known, the request's average so far decides (`averageRate`): in
    /// the end game the idle connections have nothing better to do than race a request that trickles
    /// from its start.)
    private func remainingSeconds(_ w: Worker, now: Double) -> Double {
        if !w.active { return 1e9 }
        let left = Double(max(0, w.chunkEnd - w.pos))
        guard let r = w.rate(now: now, window: 1) ?? averageRate(w, now: now) else { return 0 }
        return left / max(r, 1)
    }

    /// The least time a request must have had before its average rate stands for it.
    static let minEvidenceSeconds = 0.25

    /// The median of recent first-byte waits; nil before the first.
    private var usualFirstByteWait: Double? {
        firstByteWaits.isEmpty ? nil : firstByteWaits.sorted()[firstByteWaits.count / 2]
    }

    /// Starts (or restarts) `w` on `bytes`, reusing a kept-alive connection unless `fresh` forces a new
    /// TCP connection; `newPath` also gives it a random source port (see `randomSourcePort`).
    /// `continuing` asks for the rest after a shorter answer: the same transfer to the rate rules.
    private func start(_ w: Worker, bytes: Range<Int64>, fresh: Bool = false, newPath: Bool = false, continuing: Bool = false) {
        if w.staging == nil { w.staging = writer.makeStaging() }
        settle(w)
        let e = w.easy
        e.reset()
        do throws(CurlError) {
            try configureRequest(e, for: w, bytes: bytes, fresh: fresh, newPath: newPath)
        } catch {
            if fatalError == nil { fatalError = SeggetError(error) }
            return
        }
        w.head = ResponseHead()
        w.validated = false
        w.stop = .none
        // Bytes of the chunk this worker already received before `bytes` still count as progress.
        if bytes.lowerBound != w.pos { w.progressFrom = bytes.lowerBound }
        w.requestStart = bytes.lowerBound
        w.requestEnd = bytes.upperBound
        w.pos = bytes.lowerBound
        w.end = bytes.upperBound
        w.chunkEnd = target.ranged ? plan.byteRange(ofChunk: plan.chunk(containing: w.pos)).upperBound : bytes.upperBound
        w.lastByteAt = monotonicSeconds()
        w.slotPos = w.pos
        endPause(w, now: w.lastByteAt)
        w.requestStartedAt = w.lastByteAt
        w.heldAtRequest = w.heldTotal
        if !continuing {
            w.transferStartedAt = w.lastByteAt
            w.heldAtTransfer = w.heldTotal
            w.transferBytes = 0
            w.firstByteAt = nil
            w.samples = []
            w.heldSamples = []
        }
        w.waitUntil = nil
        w.rampStart = false
        w.paused = false
        w.active = true
        do throws(CurlError) {
            try driver.start(e, for: self)
        } catch {
            w.active = false
            if fatalError == nil { fatalError = SeggetError(error) }
        }
    }

    /// The request `start` sends: `bytes` of `w`'s source, over a new connection when `fresh`, from a
    /// random source port when `newPath`.
    private func configureRequest(_ e: EasyHandle, for w: Worker, bytes: Range<Int64>, fresh: Bool, newPath: Bool) throws(CurlError) {
        var extra: [String] = []
        let src = sources[w.source % sources.count]
        if target.ranged, let v = src.ifRange { extra.append("If-Range: \(v)") }
        try e.configure(url: src.url, options: src.withoutCredentials ? strippedTransfer : settings.transfer, extraHeaders: extra,
            lowSpeedBackstop: false)
        if target.ranged {
            try e.setRange(bytes)
        }
        if fresh {
            try e.setFreshConnect(true)
        }
        if newPath, let port = Self.randomSourcePort() {
            try e.setLocalPort(port, tries: Self.sourcePortTries)
        }
        e.delegate = w
    }

    /// The connections start one after another, `rampStep` apart, so that their first requests
    /// reach the server spread over about 0.1 s rather than in one burst. A pacing server (nginx's
    /// `limit_rate`) sends each response in bursts on a timer; requests that arrive together share one
    /// timer tick and are served one after another in it, so every burst waits for the others' sends.
    /// Measured on the capped benchmark (8 × 16 MiB/s, 8 connections on one nginx worker): 8 curl
    /// processes started at once took 8.23–8.44 s, started 15 ms apart 8.15–8.34 s including the
    /// stagger. The later connections lose nothing that work stealing does not make up at the end.
    static func rampStep(connections n: Int) -> Double {
        n <= 1 ? 0 : min(0.015, 0.1 / Double(n))
    }

    private func startWaitingWorkers(now: Double) {
        for w in workers {
            guard let t = w.waitUntil, t <= now else { continue }
            w.waitUntil = nil
            if w.rampStart {
                w.rampStart = false
                // Robbed of everything meanwhile: it is idle and gets work like any idle worker.
                if let r = scheduler.run(of: w.id) { start(w, bytes: runBytes(r)) }
                continue
            }
            if target.ranged {
                guard w.isDuplicate || scheduler.run(of: w.id) != nil else { continue }
            }
            // Without ranges a retry can only start over from byte 0.
            start(w, bytes: (target.ranged ? w.pos : 0)..<w.end, fresh: true)
        }
    }

    // MARK: The hot path

    /// The write callback: validates the response once, then pwrites each byte at its offset.
    /// `.abort` ends the transfer (with `CurlCode.writeError`); `.pause` holds the bytes for `--max-speed`.
    func receive(_ w: Worker, _ ptr: UnsafeRawPointer, _ n: Int) -> WriteDecision {
        if !w.validated {
            validate(w)
            guard case .none = w.stop else { return .abort }
            firstByteWaits.append(max(0, lastLoopTime - w.requestStartedAt - (w.held(at: lastLoopTime) - w.heldAtRequest)))
            if firstByteWaits.count > 16 { firstByteWaits.removeFirst() }
            if w.firstByteAt == nil {
                w.firstByteAt = lastLoopTime
                w.heldAtFirstByte = w.held(at: lastLoopTime)
                w.bytesAtFirstByte = w.transferBytes
            }
        }
        guard case .none = w.stop else { return .abort }
        if budget != nil {
            budget!.refill(now: monotonicSeconds())
            guard budget!.allowsReceiving else {
                // libcurl keeps these bytes and hands them over again after `unpause()`.
                w.paused = true
                if w.pausedAt == nil { w.pausedAt = budget!.updatedAt }
                return .pause
            }
            budget!.spend(n)
        }
        var offset = 0
        while offset < n {
            // The assignment can reach past a shorter answer's end (see `ContentRange.Answer.prefix`).
            let room = min(w.end, w.requestEnd) - w.pos
            if room <= 0 {
                if w.requestEnd > w.end {
                    w.stop = .reachedEnd
                } else if target.ranged {
                    w.stop = .retry("the server sent more bytes than the range it declared", after: nil, kind: .protocolViolation)
                } else {
                    w.stop = .fatal(SeggetError(.protocolViolation, "the server sent more than the \(w.end) bytes it announced; the file on the server may have changed. Run the command again."))
                }
                return .abort
            }
            let take = min(n - offset, Int(min(room, w.chunkEnd - w.pos)))
            let flushed = writer.append(w.staging, ptr + offset, count: take, at: w.pos)
            w.pos += Int64(take)
            w.transferBytes += Int64(take)
            w.lastByteAt = lastLoopTime
            receivedBytes += Int64(take)
            offset += take
            if w.pos == w.chunkEnd {
                crossedChunkEnd(w)
            } else if flushed {
                moveSlot(w, atLeast: Self.slotStep)
            }
            if case .none = w.stop {} else { return offset == n ? .proceed : .abort }
        }
        return .proceed
    }

    /// Hands what `w` has staged to the writer, so that every byte before `w.pos` is written or
    /// queued. (Write errors surface through `runAfterWrites`.)
    private func settle(_ w: Worker) {
        if let s = w.staging { writer.flush(s) }
    }

    /// Ends `w`'s transfer (if libcurl has not already) and hands over what it received.
    private func detach(_ w: Worker) {
        driver.cancel(w.easy)
        w.active = false
        settle(w)
    }

    private func crossedChunkEnd(_ w: Worker) {
        // The chunk's bytes must be in the file before anything vouches for them (see `AfterWrite`).
        settle(w)
        guard target.ranged else {
            afterWrites.append((writer.submitted, .stream(w.pos)))
            w.chunkEnd = w.end
            return
        }
        let k = plan.chunk(containing: w.chunkEnd - 1)
        let wasFinished = scheduler.finished[k]
        let losers = scheduler.chunkFinished(k, by: w.id)
        if !wasFinished {
            finishedBytes += Int64(plan.byteRange(ofChunk: k).count)
            afterWrites.append((writer.submitted, .chunk(k)))
            w.attempts = 0
            w.redials = 0
        }
        for l in losers {
            let o = workers[l]
            o.stop = .cancelled
            o.waitUntil = nil
            if o.active { pendingRemoval.append(l) } else { o.isDuplicate = false; o.end = o.pos }
        }
        if w.isDuplicate {
            // The race is over either way; this worker is free again.
            w.stop = w.pos < w.requestEnd ? .reachedEnd : w.stop
        }
        w.chunkEnd = min(w.chunkEnd + plan.chunkSize, plan.totalLength)
    }

    // MARK: Validation

    /// Checks the response head before the first body byte is written: status, Content-Range equal
    /// to the request, exact length, no content coding, unchanged validators.
    private func validate(_ w: Worker) {
        w.validated = true
        let h = w.head
        let asked = "\(w.requestStart)-\(w.requestEnd - 1)"
        if h.status == 429 || h.status == 503 || (500...599).contains(h.status) || h.status == 408 {
            w.stop = .retry("HTTP \(h.status)", after: h.value("retry-after").flatMap { parseRetryAfter($0) }, kind: .httpStatus)
            return
        }
        if let verdict = permanentVerdict(h, asked: asked) {
            w.stop = verdict
            return
        }
        if !target.ranged {
            guard h.status == 200 else {
                w.stop = .fatal(Prober.statusError(h.status, url: target.url))
                return
            }
            if let total = target.totalLength, let cl = h.contentLength, cl != total {
                w.stop = .resourceChanged("its length changed from \(total) to \(cl) bytes")
            } else if let reason = validatorChange(h, w) {
                w.stop = .resourceChanged(reason)
            }
            return
        }
        switch h.status {
        case 206:
            guard let cr = h.contentRange else {
                w.stop = .retry("a 206 without a usable Content-Range for bytes \(asked)", after: nil, kind: .protocolViolation)
                return
            }
            if let total = cr.completeLength, total != target.totalLength {
                w.stop = .resourceChanged("its length changed from \(target.totalLength ?? 0) to \(total) bytes")
                return
            }
            switch cr.answer(asked: w.requestStart..<w.requestEnd, total: target.totalLength) {
            case .whole:
                break
            case .prefix(let end):
                // An honest shorter answer: take it, and `finish` asks for the rest (not a failure).
                w.requestEnd = end
            case .mismatch:
                w.stop = .retry("asked for bytes \(asked), the server sent \(h.value("content-range") ?? "?")", after: nil, kind: .protocolViolation)
                return
            }
            // A Content-Length that disagrees with the range, and a content coding, were refused by
            // `permanentVerdict` already.
            if let reason = validatorChange(h, w) { w.stop = .resourceChanged(reason) }
        case 200:
            if let reason = validatorChange(h, w) {
                w.stop = .resourceChanged(reason)
            } else if let cl = h.contentLength, let total = target.totalLength, cl != total {
                w.stop = .resourceChanged("its length changed from \(total) to \(cl) bytes")
            } else {
                // Same validators (or none to compare): the server ignores ranges at this offset.
                w.stop = .rangesIgnored("the server ignored the byte range \(asked) and sent the whole file")
            }
        case 416:
            w.stop = .resourceChanged("the server says bytes \(asked) no longer exist (416)")
        default:
            w.stop = .fatal(Prober.statusError(h.status, url: target.url))
        }
    }

    /// Answers that no retry can change, decided before anything else about a 200 or 206: a coded
    /// range or several ranges for one (ranges are unusable: start over as one stream, as the probe
    /// would have), ambiguous framing (see `FramingProblem`).
    private func permanentVerdict(_ h: ResponseHead, asked: String) -> StopReason? {
        guard h.status == 200 || h.status == 206 else { return nil }
        if target.ranged, h.status == 206, let enc = h.contentEncoding {
            return .rangesIgnored("the server applied Content-Encoding '\(enc)' to the byte range \(asked), which makes its offsets meaningless")
        }
        if let problem = h.framingProblem { return .fatal(Prober.framingError(problem, url: target.url)) }
        if target.ranged, h.status == 206, h.isMultipartByteRanges {
            return .rangesIgnored("the server answered the byte range \(asked) with a multipart/byteranges body")
        }
        return nil
    }

    private func validatorChange(_ h: ResponseHead, _ w: Worker) -> String? {
        let src = sources[w.source % sources.count]
        if let want = src.etag, let got = h.etag, want != got { return "its ETag changed from \(want) to \(got)" }
        if let want = src.lastModified, let got = h.lastModified, want != got {
            return "its Last-Modified changed from \(want) to \(got)"
        }
        return nil
    }

    // MARK: Completion

    private func finish(_ w: Worker, code: CurlCode) {
        detach(w)
        if target.ranged {
            let now = monotonicSeconds()
            slowRule.recordFinished(id: w.id, bytes: w.transferBytes, seconds: now - w.transferStartedAt, heldSeconds: w.held(at: now) - w.heldAtTransfer, now: now)
        }
        trace("w\(w.id) done code=\(code.rawValue) stop=\(w.stop) pos=\(w.pos) end=\(w.end) port=\((try? w.easy.localPort()).map(String.init) ?? "?") rate=\(Format.rate(Double(w.transferBytes) / max(0.001, monotonicSeconds() - w.transferStartedAt)))")
        // No response head at all (refused, reset, timed out): a network failure, not an HTTP answer.
        if case .none = w.stop, !w.validated, w.head.status != 0 { validate(w) }
        let reason = w.stop
        w.stop = .none
        switch reason {
        case .reachedEnd, .cancelled:
            becomeIdle(w)
        case .fatal(let e):
            if fatalError == nil { fatalError = e }
        case .resourceChanged(let r):
            if changed == nil { changed = r }
        case .retry(let why, let after, let kind):
            scheduleRetry(w, reason: why, after: after, kind: kind)
        case .rangesIgnored(let r):
            if ignored == nil { ignored = r }
        case .none:
            if !target.ranged && target.totalLength == nil && code == .ok {
                // A chunked or close-delimited body ends when the server says so.
                w.end = w.pos
            }
            if w.pos >= w.end {
                if target.ranged { becomeIdle(w) }
            } else if target.ranged && code == .ok && w.pos == w.requestEnd {
                // The server answered a shorter range than asked, in full: ask for the rest at once,
                // on the same connection, without counting a failure.
                trace("w\(w.id) continues at \(w.pos) after a shorter answer")
                start(w, bytes: w.pos..<w.end, continuing: true)
            } else if code == .ok || code == .partialFile {
                scheduleRetry(w, reason: "the connection ended \(w.end - w.pos) bytes early", after: nil, kind: .network)
            } else if code.isTransient && !Prober.headersTooLarge(code, head: w.head) || code == .writeError {
                scheduleRetry(w, reason: code.description, after: nil, kind: .network)
            } else {
                fatalError = Prober.networkError(code, url: target.url, head: w.head)
            }
        }
    }

    private func becomeIdle(_ w: Worker) {
        if w.isDuplicate {
            scheduler.abandon(w.id)
            w.isDuplicate = false
        }
        w.end = w.pos
    }

    private func scheduleRetry(_ w: Worker, reason: String, after: Double?, kind: FailureKind) {
        if w.isDuplicate {
            // A failed racer just stops; the owner is still on it.
            becomeIdle(w)
            return
        }
        w.attempts += 1
        if w.attempts > settings.retries {
            let hint = kind == .protocolViolation ? "the server's answers are unusable; try -n 1 or another server" : "run the same command to resume later, or raise --retries"
            fatalError = SeggetError(kind, "bytes \(w.pos)-\(w.end - 1) failed \(w.attempts) time\(w.attempts == 1 ? "" : "s") (last: \(reason)); \(hint).")
            return
        }
        switch RetryPolicy.decide(
            attempt: w.attempts, reason: reason, base: settings.retryWait, retryAfter: after, maxWait: settings.maxRetryWait,
            deadline: settings.deadline, now: monotonicSeconds(), jitter: .random(in: 0.5...1.5))
        {
        case .giveUp(let message):
            if fatalError == nil { fatalError = SeggetError(.network, message) }
        case .wait(let delay, let note):
            w.waitUntil = monotonicSeconds() + delay
            onEvent?(.retry(connection: w.id, attempt: w.attempts, delay: delay, reason: note.map { "\(reason); \($0)" } ?? reason))
        }
    }

    private func flushRemovals() {
        for id in pendingRemoval {
            let w = workers[id]
            if w.active {
                driver.cancel(w.easy)
                w.active = false
            }
            // It lost the race: another connection wrote this chunk.
            if let s = w.staging { writer.discard(s) }
            w.stop = .none
            w.isDuplicate = false
            w.end = w.pos
        }
        pendingRemoval.removeAll()
    }

    // MARK: Periodic work

    private func tick(now: Double) {
        for w in workers where w.active {
            w.samples.append((now, w.transferBytes))
            w.heldSamples.append(w.held(at: now))
            if w.samples.count > 16 {
                w.samples.removeFirst(w.samples.count - 16)
                w.heldSamples.removeFirst(w.heldSamples.count - 16)
            }
        }
        rateSamples.append((now, receivedBytes))
        if rateSamples.count > 20 { rateSamples.removeFirst() }
        dropStalledConnections(now: now)
        if settings.autoConnections && target.ranged { growConnections(now: now) }
        checkpointThread?.poke()
        if let kick = onWriteback {
            let cached = writer.bytesWritten.pageCache
            if cached - lastWriteback >= writebackStep {
                lastWriteback = cached
                kick()
            }
        }
        if target.ranged { flushSlowStaging() }
        if !target.ranged, let s = workers[0].staging, !s.isEmpty {
            // A stream has no chunk ends at which to hand its bytes over; do it every tick.
            settle(workers[0])
            afterWrites.append((writer.submitted, .stream(workers[0].pos)))
        }
        reportProgress(now: now)
    }

    /// Resumes transfers paused by `--max-speed` while the budget allows, starting after the one resumed
    /// first last time, so that every connection gets its turn. Resuming can hand over the held bytes
    /// at once (`receive` runs inside `unpause()`) and pause the transfer again.
    private func resumePausedTransfers() throws(SeggetError) {
        guard budget != nil, workers.contains(where: { $0.paused }) else { return }
        budget!.refill(now: monotonicSeconds())
        let n = workers.count
        for i in 0..<n {
            guard budget!.allowsReceiving else { break }
            let w = workers[(resumeCursor + i) % n]
            guard w.paused else { continue }
            w.paused = false
            endPause(w, now: monotonicSeconds())
            guard w.active else { continue }
            w.lastByteAt = monotonicSeconds()
            resumeCursor = (w.id + 1) % n
            do throws(CurlError) {
                try w.easy.unpause()
            } catch where error.code == .easy(.writeError) {
                // `receive` refused the held bytes and recorded why; the transfer ends with this error.
            } catch {
                throw SeggetError(error)
            }
        }
    }

    /// Every tick, what each connection has staged goes to the file in whole blocks, and its progress
    /// slot follows: a slow connection (2 MiB/s takes half a second to fill a 1 MiB buffer) would
    /// otherwise keep its bytes in memory, where a kill loses them. A fast one fills its buffer many
    /// times per tick, so this adds at most one smaller write per connection and tick.
    private func flushSlowStaging() {
        for w in workers where w.active && !w.isDuplicate {
            guard let s = w.staging, s.end - s.start >= Self.slotStep / 2, writer.flushWholeBlocks(s) else { continue }
            moveSlot(w, atLeast: Self.slotStep / 2)
        }
    }

    /// Moves `w`'s progress slot to where the bytes it handed to the writer end, if that is at least
    /// `step` beyond the last record. Recorded after the data reached the file, like a journal bit:
    /// a kill then loses only the staged and queued bytes and what never arrived.
    private func moveSlot(_ w: Worker, atLeast step: Int64) {
        guard progressSlots != nil, !w.isDuplicate, w.staging.start - w.slotPos >= step else { return }
        w.slotPos = w.staging.start
        afterWrites.append((writer.submitted, .slot(worker: w.id, chunk: plan.chunk(containing: w.slotPos - 1), upTo: w.slotPos)))
    }

    /// A connection that delivered nothing for `stallTimeout` seconds is dropped and retried from the
    /// byte it reached. (libcurl's low-speed limit averages over several seconds, so it reacts late.)
    private func dropStalledConnections(now: Double) {
        let limit = settings.transfer.stallTimeout
        guard limit > 0 else { return }
        for w in workers where w.active && !w.paused && now - w.lastByteAt > limit {
            trace("w\(w.id) stalled for \(Format.fixed(now - w.lastByteAt, 1)) s")
            detach(w)
            w.stop = .none
            scheduleRetry(w, reason: "no data for \(Format.seconds(now - w.lastByteAt))", after: nil, kind: .network)
        }
    }

    /// A connection far slower than its peers (see `SlowConnectionRule`), owner or end-game racer,
    /// gives back its not-started chunks and reconnects; out of re-dials, it only gives them back.
    private func redialSlowConnections(now: Double) {
        // Half a second tells a connection capped 8x lower from its peers: nginx sends a 2 MiB/s
        // connection its first 2 MiB at once and then nothing for a second, while a 16 MiB/s one gets
        // 2 MiB every 125 ms. On the uneven benchmark the slow ones were re-dialled after 0.76 s
        // instead of 1.26 s with a 1 s window (8 runs each: median 8.32 s against 8.37 s, slowest
        // 8.61 s against 9.09 s), and no capped run re-dialled anything.
        let window = slowRule.window
        var observations: [SlowConnectionRule.Observation] = []
        // A request younger than the window is measured from its first byte; the rule judges it only
        // on clear evidence (see `SlowConnectionRule.minJudgeSeconds`).
        for w in workers where w.active {
            let left = max(0, w.end - w.pos)
            if !w.validated {
                let waited = now - w.requestStartedAt - (w.held(at: now) - w.heldAtRequest)
                observations.append(.init(id: w.id, bytes: 0, seconds: 0, waitingForFirstByte: waited, remainingBytes: left, consecutiveRedials: w.redials))
            } else if now - w.transferStartedAt >= window, let m = w.recent(now: now, window: window) {
                observations.append(.init(id: w.id, bytes: m.bytes, seconds: m.seconds, heldSeconds: m.held, remainingBytes: left, consecutiveRedials: w.redials))
            } else if let first = w.firstByteAt, now - first > 0 {
                observations.append(.init(id: w.id, bytes: w.transferBytes - w.bytesAtFirstByte, seconds: now - first,
                    heldSeconds: w.held(at: now) - w.heldAtFirstByte, remainingBytes: left, consecutiveRedials: w.redials))
            }
        }
        let verdicts = slowRule.judge(observations, now: now, usualFirstByteWait: usualFirstByteWait)
        for v in verdicts {
            let w = workers[v.id]
            switch v.action {
            case .keepOnlyTheChunkInFlight:
                guard w.end > w.chunkEnd else { continue }
                trace("w\(w.id) keeps only its chunk at \(Format.rate(v.rate)) vs typical \(Format.rate(v.typical))")
                scheduler.releaseNotStarted(of: w.id)
                w.end = w.chunkEnd
            case .redial:
                w.redials += 1
                trace("w\(w.id) redial at \(Format.rate(v.rate)) vs typical \(Format.rate(v.typical)) (first bytes take \(Format.fixed(usualFirstByteWait ?? -1, 3)) s) port=\((try? w.easy.localPort()).map(String.init) ?? "?")\(w.isDuplicate ? " (racer)" : "")")
                scheduler.releaseNotStarted(of: w.id)
                w.end = min(w.end, w.chunkEnd)
                onEvent?(.redial(connection: w.id, reason: "\(Format.rate(v.rate)) against a median of \(Format.rate(v.typical))"))
                // Abort now and continue on a fresh connection from the exact byte reached.
                detach(w)
                start(w, bytes: w.pos..<w.end, fresh: true, newPath: true)
            }
        }
    }

    /// How often the slow rule judges, seconds: more often than progress ticks, so that a young request
    /// that trickles is caught soon after `SlowConnectionRule.minJudgeSeconds` (the loop wakes at least
    /// every 0.1 s). Judging reuses the tick's samples for the half-second window and costs microseconds.
    static let slowJudgeInterval = 0.05

    /// Re-dials allowed per download: three per connection, and more for a long download, in
    /// which a server that slows some requests down keeps drawing new slow ones.
    static func maxTotalRedials(connections: Int, chunks: Int) -> Int { 3 * connections + chunks / 8 }

    /// Counts the time the loop just waited for the writer as held time for every connection
    /// receiving: they were not read meanwhile, so neither the slow rule nor the stall timeout may
    /// blame the network for it.
    private func countWriterWaits() {
        let waited = writer.waitedSeconds - writerWaitSeen
        guard waited > 0 else { return }
        writerWaitSeen = writer.waitedSeconds
        for w in workers where w.active {
            w.heldTotal += waited
            w.lastByteAt += waited
        }
    }

    /// Ends a `--max-speed` pause of `w` (if any), counting it as held time.
    private func endPause(_ w: Worker, now: Double) {
        guard let p = w.pausedAt else { return }
        w.heldTotal += max(0, now - p)
        w.pausedAt = nil
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

    static let autoInitial = 4
    static let autoStep = 2
    static let autoInterval = 2.0

    /// `-n auto`: every `autoInterval` seconds, add `autoStep` connections while the total rate
    /// over the last interval grew by at least 10 %; stop at the first interval that did not.
    private func growConnections(now: Double) {
        guard !autoSettled, workerLimit < workers.count else { return }
        if autoLastChange == 0 { autoLastChange = now; return }
        guard now - autoLastChange >= FetchEngine.autoInterval else { return }
        let rate = totalRate(window: FetchEngine.autoInterval)
        if autoLastRate > 0 && rate < autoLastRate * 1.10 {
            autoSettled = true
            onEvent?(.notice("using \(workerLimit) connections (more did not raise the throughput)."))
            return
        }
        autoLastRate = rate
        autoLastChange = now
        workerLimit = min(workers.count, workerLimit + FetchEngine.autoStep)
    }

    private func totalRate(window: Double) -> Double {
        guard let last = rateSamples.last else { return 0 }
        return sampledRate(rateSamples, endingAt: last.0, window: window, minSpan: 0) ?? 0
    }

    private func reportProgress(now: Double) {
        guard let onProgress else { return }
        let rate = rateSamples.last.flatMap { sampledRate(rateSamples, endingAt: $0.0, window: 3, minSpan: 0.2) } ?? 0
        var completed = finishedBytes
        var conns: [ConnectionProgress] = []
        for w in workers {
            let state: ConnectionProgress.State
            if w.waitUntil != nil { state = .waiting }
            else if !w.active { state = .idle }
            else if w.isDuplicate { state = .racing }
            else { state = .receiving }
            if target.ranged, w.active, !w.isDuplicate, w.pos < w.chunkEnd {
                completed += w.pos - max(plan.byteRange(ofChunk: plan.chunk(containing: w.pos)).lowerBound, w.progressFrom)
            }
            conns.append(ConnectionProgress(id: w.id, state: state, bytesPerSecond: w.rate(now: now, window: 2) ?? 0, remainingBytes: max(0, w.end - w.pos)))
        }
        if !target.ranged { completed = workers[0].pos }
        onProgress(DownloadProgress(
            completedBytes: completed, totalBytes: target.totalLength, receivedBytes: receivedBytes,
            bytesPerSecond: rate, elapsed: now - startedAt, connections: conns))
    }

    static func writeError(_ error: any Error) -> SeggetError {
        if let e = error as? Errno, e.rawValue == ENOSPC {
            return SeggetError(.fileSystem, "the disk is full. Free some space, then run the same command to resume; nothing already downloaded is lost.")
        }
        return SeggetError(.fileSystem, "could not write the downloaded data: \(error). Fix the problem, then run the same command to resume.")
    }
}

/// Runs journal checkpoints with the data file's `fdatasync` on a background queue, so that a sync
/// never stalls the fetch loop. The journal itself is only touched on the loop thread.
final class CheckpointWorker {
    private let journal: Journal
    private let data: BlockStorage
    private let interval: Double
    private let queue = DispatchQueue(label: "segget.checkpoint")
    private let finished = ResultSlot()
    private var lastCheckpoint = monotonicSeconds()
    private var inFlight = false

    struct CheckpointResult: Sendable {
        let snapshot: CheckpointSnapshot
        let ok: Bool
    }

    /// The background sync's result, handed back to the loop thread.
    final class ResultSlot: Sendable {
        private let slot = Mutex<CheckpointResult?>(nil)
        func put(_ r: CheckpointResult) { slot.withLock { $0 = r } }
        func take() -> CheckpointResult? { slot.withLock { r in defer { r = nil }; return r } }
    }

    init(journal: Journal, data: BlockStorage, interval: Double) {
        self.journal = journal
        self.data = data
        self.interval = interval
    }

    /// Called on every tick of the loop: completes a finished sync, starts the next one when due.
    func poke() {
        if let done = finished.take() {
            if done.ok { try? journal.completeCheckpoint(done.snapshot) }
            inFlight = false
        }
        let now = monotonicSeconds()
        guard !inFlight, now - lastCheckpoint >= interval else { return }
        lastCheckpoint = now
        inFlight = true
        let snapshot = journal.beginCheckpoint()
        let box = UncheckedBox(data)
        let finished = self.finished
        queue.async {
            let ok = (try? box.value.sync()) != nil
            finished.put(CheckpointResult(snapshot: snapshot, ok: ok))
        }
    }

    /// Waits for a sync in flight (so no background work outlives the download).
    func stop() {
        queue.sync {}
        poke()
    }
}

/// Carries a non-Sendable reference to a queue that is the only other user while it runs.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

extension FetchEngine {
    /// Bytes of finished chunks (ranged) or bytes written (stream), for the interrupted message.
    var finishedBytesForReport: Int64 { target.ranged ? finishedBytes : workers[0].pos }
    /// Bytes written by the single stream.
    var streamLength: Int64 { workers[0].pos }
}

/// Bytes per second over the newest `window` seconds (counted back from `end`) of (time, total
/// bytes) samples; nil when those samples span less than `minSpan` seconds.
func sampledRate(_ samples: [(Double, Int64)], endingAt end: Double, window: Double, minSpan: Double) -> Double? {
    guard let last = samples.last, let first = samples.first(where: { end - $0.0 <= window + 0.01 }),
        last.0 - first.0 >= max(minSpan, 0.001)
    else { return nil }
    return Double(last.1 - first.1) / (last.0 - first.0)
}

extension FetchEngine: TransferClient {
    /// A connection's transfer ended (the driver has removed it already).
    func transferDriver(_ driver: TransferDriver, completed handle: EasyHandle, with code: CurlCode) {
        guard let w = workers.first(where: { $0.easy === handle }) else { return }
        finish(w, code: code)
    }
}

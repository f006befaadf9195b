import SeggetCurl
import Glibc
import SeggetJournal
import SeggetSystem

/// What the engine holds for one connection beside the coordinator's `Connection`: its libcurl
/// handle, the response head being collected, and the bytes received but not yet written.
final class ConnectionIO {
    let id: Int
    /// The connection's handle: its own (made at first use: a batch file has slots for connections
    /// it may only borrow), or the probe's when it continues the probe's transfer.
    var easy: EasyHandle {
        get {
            if let made { return made }
            let e = EasyHandle()
            made = e
            return e
        }
        set { made = newValue }
    }
    /// The handle, if one was made.
    private(set) var made: EasyHandle?
    unowned(unsafe) var engine: FetchEngine!
    var head = ResponseHead()
    /// Received bytes not yet written: `staging.start..<pos` (see `StagedWriter`).
    var staging: Staging!
    /// Where this connection's progress slot was last written up to.
    var slotPos: Int64 = 0
    /// How its current request reached the server was told to the core (`EngineCore.Event.connected`).
    var reportedConnection = false
    /// The bytes of the callback a speed cap paused (libcurl hands them over again on resume): the
    /// cap resumes the transfer once its allowance covers them (`RateBudget.allows`).
    var pausedBytes = 0

    init(id: Int) { self.id = id }
}

extension ConnectionIO: TransferDelegate {
    func transfer(_ handle: EasyHandle, received body: UnsafeRawBufferPointer) -> WriteDecision {
        guard let ptr = body.baseAddress else { return .proceed }
        return engine.receive(self, ptr, body.count)
    }
    func transfer(_ handle: EasyHandle, receivedHeaderLine line: String, latin1: Bool) {
        head.append(line: Substring(line), latin1: latin1)
    }
}

/// The fetch loop: the I/O shell around a `Coordinator` (or a `SingleStream`). A `TransferDriver`
/// runs one easy handle per connection on the calling thread (its own driver, or one shared with
/// other downloads' engines: see `FetchEngine+Loop.swift`); the coordinator decides, the engine
/// carries its commands out. Received bytes go through per-connection staging buffers to the
/// `StagedWriter`; what may happen only once they are in the file (journal bits, progress slots,
/// the hasher's prefix) waits in the ledger of `FetchEngine+Writes.swift`.
final class FetchEngine {
    /// Fixed once made, but for its mirrors: one whose probe agrees after the fetch began joins
    /// them (`addSource`).
    private(set) var target: FetchTarget
    let settings: FetchSettings
    let data: BlockStorage
    /// Where received bytes go: per-connection buffers written with `O_DIRECT` when possible.
    let writer: StagedWriter
    let journal: Journal?
    let plan: ChunkPlan
    /// Every decision about the connections, through its one entry point (`EngineCore.handle`): a
    /// `Coordinator` for ranged requests, a `SingleStream` for a server without ranges.
    var core: EngineCore
    /// `--max-speed`, shared by all connections (see `RateBudget`).
    private var budget: RateBudget?
    /// A download into a stream: its reorder window pauses connections that are too far ahead (see
    /// `StreamSink`), and work is handed out inside it (`FetchEngine+Stream.swift`).
    var streamGate: StreamGate?
    private var resumeCursor = 0
    let interrupt: InterruptFlag
    var onProgress: ((DownloadProgress) -> Void)?
    var onEvent: ((DownloadEvent) -> Void)?
    /// Where each connection got inside its current chunk (survives `kill -9`).
    var progressSlots: ProgressSlots?
    /// A slot is rewritten after at least this many new bytes, to keep the syscalls few.
    static let slotStep: Int64 = 128 << 10

    /// The checks of a Metalink's piece hashes, when the download has them (see `PieceChecks`).
    var pieceChecks: PieceChecks?

    /// Called when the finished prefix of the file grows (for hashing behind the download).
    var onPrefix: ((Int64) -> Void)?
    /// Called every `writebackStep` bytes written through the page cache, to start writing dirty pages
    /// back early, so that the data reaches the disk while the download goes on and a final sync (or
    /// the user's `sync`) has little left to do.
    var onWriteback: (() -> Void)?
    var writebackStep: Int64 = 64 << 20
    var lastWriteback: Int64 = 0

    /// Runs this engine's transfers (see `transferDriver(_:completed:with:)`) beside other downloads'
    /// engines: the driver of the `DownloadLoop` that runs it.
    let driver: TransferDriver
    /// `SEGGET_DEBUG=1` traces scheduling decisions on stderr (for tuning, not for users).
    private let debug = getenv("SEGGET_DEBUG") != nil
    private lazy var strippedTransfer = settings.transfer.withoutCredentials()
    private(set) var io: [ConnectionIO] = []
    /// The probe's transfer, held open (see `HeldTransfer`): connection 0's first request continues
    /// it when that request asks for exactly the rest of the file.
    var adoptable: HeldTransfer?
    /// What this fetch's requests cost the server so far (see `spent`).
    var tally = RequestTally()
    /// Bytes the file lacked when the fetch began (what it needs to receive once each).
    var missingAtStart: Int64?
    /// Which sources (0: the main URL, then the mirrors) wrote bytes into the file in this fetch.
    var wroteFrom: [Bool] = []
    /// A continued probe transfer to unpause at the top of the next pass, once the loop's clock runs.
    var adoptedToUnpause: ConnectionIO?
    var pendingRemoval: [Int] = []

    var prefixChunks = 0
    var streamPrefix: Int64 = 0
    var afterWrites: [(ticket: Int64, action: AfterWrite)] = []
    var afterWritesDone = 0
    /// Chunks whose bytes are in the file (for the hasher's prefix), unlike the coordinator's
    /// `finishedChunks`, which counts chunks as soon as their last byte is received.
    var inFile: [Bool] = []
    /// The CRC-32C of each chunk's bytes as they are handed to the writer (see `ChunkVouching.swift`).
    let chunkCRCs: ChunkChecksums
    /// Checks the chunks a resumed journal claims, behind the download (see `vouch(with:)`).
    var vouching: ChunkVoucher?
    /// Claimed chunks whose bytes did not match their checksum, and their bytes: fetched again.
    var rejectedChunks = 0
    var rejectedBytes: Int64 = 0
    var startedAt = 0.0
    /// `writer.waitedSeconds` already counted as held time.
    var writerWaitSeen = 0.0
    var checkpointThread: CheckpointWorker?
    /// Where the checkpoints' syncs run (a loop's steps queue); nil: `CheckpointWorker.sharedQueue`.
    var checkpointQueue: SerialWorker?
    /// Time at the top of the current loop iteration (cheaper than a clock read per callback).
    var lastLoopTime = 0.0
    /// When the current pass began.
    var passStartedAt = 0.0
    /// Bytes came or a transfer ended since the loop last looked (see `DownloadLoop.pass`).
    var hadActivity = false

    init(target: FetchTarget, settings: FetchSettings, data: BlockStorage, journal: Journal?,
         plan: ChunkPlan, isFinished: (Int) -> Bool, interrupt: InterruptFlag,
         partialChunks: [Int: Int64] = [:], driver: TransferDriver) {
        self.target = target
        self.driver = driver
        self.settings = settings
        self.data = data
        let n = target.ranged ? settings.connections : 1
        let initialLoans = target.ranged ? settings.loansAtStart(of: n) : 0
        // Sized for the connections it starts with: borrowed ones come and go near a batch's end.
        let own = min(n, settings.initialConnections ?? n) + initialLoans
        let bufferSize =
            journal != nil && target.ranged
            ? StagedWriter.bufferSize(connections: own, slotsInChunksOf: plan.chunkSize)
            : StagedWriter.bufferSize(connections: own)
        writer = StagedWriter(
            data: data, path: settings.writePath, bufferSize: bufferSize,
            maxInFlight: StagedWriter.maxInFlight(bufferSize: bufferSize))
        self.journal = journal
        self.plan = plan
        self.interrupt = interrupt
        chunkCRCs = ChunkChecksums(plan: plan)
        let config = Coordinator.Config(target: target, settings: settings, initialLoans: initialLoans)
        if target.ranged {
            var c = Coordinator(
                plan: plan, connections: n, config: config, isFinished: isFinished, maxRunChunks: settings.maxRunChunks,
                partialChunks: partialChunks)
            c.tracing = debug
            core = EngineCore(ranged: c)
        } else {
            var s = SingleStream(config: config)
            s.tracing = debug
            core = EngineCore(stream: s)
        }
        io = (0..<n).map { ConnectionIO(id: $0) }
        for c in io { c.engine = self }
        if let cap = settings.maxSpeed {
            // The bucket starts empty: nothing was saved up before the download began. The probe's
            // bytes came first, at the network's rate, and are owed. Spent from a full bucket, a
            // file of 158 KiB at --max-speed 100k took 1.0 s (154 KiB/s; exploratory run 10), its
            // first 64 KiB free; and a stream, whose probe brings no bytes, came a burst (a tenth of
            // a second's worth) ahead of the cap: 8 MiB at 2 MiB/s in 3.93 s.
            budget = RateBudget(bytesPerSecond: cap, now: monotonicSeconds())
            budget!.spend(settings.probePrefixBytes)
        }
        for limit in settings.speedLimits { limit.spend(settings.probePrefixBytes) }
        inFile = core.finishedChunks
        prefixChunks = inFile.prefix(while: { $0 }).count
        if target.ranged && journal != nil {
            // Checksummed beside the write, off the fetch loop, from the very buffer that is written.
            writer.besideWrite = { [chunkCRCs] bytes, offset in chunkCRCs.add(bytes, at: offset) }
        }
    }

    /// The connections the download had: all of its slots, or with a lender its own and the used loans.
    var connectionsUsed: Int {
        guard settings.lender != nil else { return io.count }
        return max(settings.initialConnections ?? 0, io.filter { $0.made != nil }.count)
    }

    func trace(_ text: @autoclosure () -> String) {
        guard debug else { return }
        let line = "[\(Format.fixed(monotonicSeconds() - startedAt, 2))] \(DisplayText.escaping(text(), keepingLineBreaks: false))\n"
        try? FileDescriptor.standardError.writeAll(line)
    }

    /// Ends the loop with whatever a transfer or a write decided for the whole download.
    func throwIfStopped() throws {
        if let e = core.stop { throw e }
    }

    var isDone: Bool {
        // Nothing is finished before every chunk kept from an earlier run was vouched for.
        core.isComplete && (!target.ranged || ((vouching?.isDone ?? true) && (pieceChecks?.ledger.allVerified ?? true)))
    }

    func pollTimeout(now: Double) -> Int32 {
        var ms = 100.0
        for c in core.connections { if let t = c.machine.waitingUntil { ms = min(ms, max(0, (t - now) * 1000)) } }
        if budget != nil || !settings.speedLimits.isEmpty {
            // The cap's allowance for the soonest of the paused callbacks.
            for c in io where core.connections[c.id].machine.isPaused {
                let live = settings.speedLimits.map { $0.secondsUntil(allowing: c.pausedBytes) }.max() ?? 0
                let wait = max(budget?.secondsUntil(allowing: c.pausedBytes) ?? 0, live)
                ms = min(ms, max(1, (wait * 1000).rounded(.up)))
            }
        }
        // A connection paused for the reorder window continues once the reader has taken more.
        if streamGate != nil, core.connections.contains(where: { $0.machine.isPaused }) { ms = min(ms, Self.streamPollMs) }
        return Int32(ms)
    }

    // MARK: Carrying out the core's actions

    /// A mirror whose probe agreed after the fetch began: it joins the sources, and connections
    /// move to it as the coordinator decides (`Coordinator.addSource`). A ranged fetch without piece
    /// hashes only: with them, every mirror is there from the start (see `Download.attempt`), and the
    /// piece ledger counts its sources once.
    func addSource(_ source: FetchSource) {
        assert(pieceChecks == nil, "mirrors join only a fetch without piece hashes")
        guard target.ranged, pieceChecks == nil else { return }
        target.mirrors.append(source)
        apply(.sourceAdded(source))
        // A connection moved off its transfer starts again on the loop's next pass, not its next visit.
        hadActivity = true
    }

    /// Hands `event` to the core at `now` and carries out what it decides.
    func apply(_ event: EngineCore.Event, now: Double = monotonicSeconds()) {
        execute(core.handle(event, now: now), now: now)
    }

    func execute(_ actions: [EngineCore.Action], now: Double) {
        for action in actions {
            switch action {
            case .start(let id, let bytes, let fresh, let newPath):
                if let held = adoptable {
                    adoptable = nil
                    if !fresh, !newPath, bytes.lowerBound == held.offset, bytes.upperBound <= (target.ranged ? held.total : held.answerEnd),
                        held.bringsMore, continueProbe(io[id], held)
                    {
                        continue
                    }
                    held.release(counting: settings.hostShare)
                }
                if !target.ranged, bytes.lowerBound != 0 {
                    // A request without a range brings the file from byte 0: only the probe's
                    // answer continues after it (`begin` checked that it can, so this is not reached).
                    apply(.removed(id))
                    apply(.failed(SeggetError(.internalError, "the stream could not continue the first answer after byte \(bytes.lowerBound).")))
                    continue
                }
                startRequest(io[id], bytes: bytes, fresh: fresh, newPath: newPath)
            case .settle(let id):
                settle(io[id])
            case .remove(let id):
                countEnded(io[id])
                driver.cancel(io[id].easy)
                settle(io[id])
                hostShare(of: id)?.cancelled(1)
            case .event(let e):
                onEvent?(e)
            case .trace(let line):
                trace(line)
            case .giveBack(let count):
                settings.lender?.lend(count)
            case .progressTick:
                periodicWork(now: now)
            case .write, .crossed, .body:
                preconditionFailure("body actions are carried out by receive")
            }
        }
    }

    /// Sends connection `c`'s request for `bytes` (the coordinator has prepared its bookkeeping).
    /// A request libcurl refuses to set up ends the download.
    private func startRequest(_ c: ConnectionIO, bytes: Range<Int64>, fresh: Bool, newPath: Bool) {
        tally.requests += 1
        if c.staging == nil { c.staging = writer.makeStaging() }
        settle(c)
        c.easy.reset()
        c.head = ResponseHead()
        c.reportedConnection = false
        c.slotPos = bytes.lowerBound
        do throws(CurlError) {
            try configureRequest(c, bytes: bytes, fresh: fresh, newPath: newPath)
            try driver.start(c.easy, for: self)
        } catch {
            apply(.removed(c.id))
            apply(.failed(SeggetError(error)))
        }
    }

    /// Makes the probe's held transfer connection `c`'s request for the rest of the file (the
    /// coordinator has prepared its bookkeeping as for any request): its head is judged as the answer
    /// to that request, and its bytes, which libcurl held back, arrive once it is unpaused at the top
    /// of the next pass.
    /// The connection's range usually ends before the answer does (it runs to the file's end): at the
    /// range's end the connection goes on into work nobody has started (`Scheduler.extend`), and
    /// where there is none the transfer is cut, as a shortened range's is. Where the range runs on
    /// past the answer (a server's honest shorter answer), the connection asks for the rest on the
    /// same connection once it ends.
    private func continueProbe(_ c: ConnectionIO, _ held: HeldTransfer) -> Bool {
        guard canContinue(held, on: c.id) else { return false }
        if c.staging == nil { c.staging = writer.makeStaging() }
        settle(c)
        c.easy = held.easy
        // Without ranges the answer is judged as it came, a 200 for the whole file (what the
        // stream's own request would get).
        c.head = target.ranged ? held.head.continuing(from: held.offset, to: held.answerEnd, total: held.total) : held.head
        c.reportedConnection = false
        c.slotPos = held.offset
        held.easy.delegate = c
        // The engine judges stalls itself (as for its own requests).
        try? held.easy.setLowSpeedLimit(bytesPerSecond: 0, seconds: 0)
        driver.adopt(held.easy, for: self)
        held.adopted()
        apply(.continued(c.id, sentAt: held.sentAt, requestEnd: held.answerEnd))
        adoptedToUnpause = c
        return true
    }

    /// Whether connection `id` can continue the probe's held transfer: its answer is of the kind
    /// the fetch asks for (a range of the file; a 200 where there are no ranges), from the main
    /// URL, still on this engine's multi handle.
    func canContinue(_ held: HeldTransfer, on id: Int) -> Bool {
        (target.ranged ? held.head.status == 206 : held.head.status == 200) && core.connections[id].source == 0
            && held.multi === driver.multi && held.multi.contains(held.easy) && !held.isSettled
    }

    /// The request `startRequest` sends: `bytes` of `c`'s source, reusing a kept-alive connection
    /// unless `fresh` forces a new TCP connection; `newPath` also gives it a random source port (see
    /// `randomSourcePort`).
    private func configureRequest(_ c: ConnectionIO, bytes: Range<Int64>, fresh: Bool, newPath: Bool) throws(CurlError) {
        let e = c.easy
        var extra: [String] = []
        let src = target.source(core.connections[c.id].source)
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
        e.delegate = c
    }

    // MARK: The hot path

    /// The body callback: judges the response once, then hands each byte to the writer at its
    /// offset. `.abort` ends the transfer (with `CurlCode.writeError`); `.pause` holds the bytes for
    /// `--max-speed`.
    func receive(_ c: ConnectionIO, _ ptr: UnsafeRawPointer, _ n: Int) -> WriteDecision {
        hadActivity = true
        var allows = true
        var now = lastLoopTime
        if budget != nil {
            now = monotonicSeconds()
            budget!.refill(now: now)
            allows = budget!.allows(n)
        }
        if !settings.speedLimits.isEmpty {
            if budget == nil { now = monotonicSeconds() }
            let at = now
            allows = settings.speedLimits.allSatisfy { $0.allowsReceiving(now: at, bytes: n) } && allows
        }
        if !allows {
            c.pausedBytes = n
            _ = core.handle(.capHeld, now: now)
        }
        if allows, let gate = streamGate {
            allows = core.connections[c.id].pos + Int64(n) <= gate.receiveLimit
        }
        if !c.reportedConnection {
            // Once per request, before its head is judged: what the request cost on the network.
            c.reportedConnection = true
            _ = core.handle(.connected(c.id, roundTrip: driver.multi.roundTrip(of: c.easy),
                                       newConnection: (try? c.easy.newConnections()).map { $0 > 0 }), now: now)
        }
        let actions = core.handle(.body(c.id, count: n, head: c.head, budgetAllows: allows), now: now)
        var decision = WriteDecision.proceed
        var flushed = false
        for action in actions {
            switch action {
            case .write(_, let from, let count, let at):
                if flushed { moveSlot(c, atLeast: Self.slotStep) }
                if budget != nil && from == 0 { budget!.spend(n) }
                let source = core.connections[c.id].source
                pieceChecks?.ledger.wrote(chunk: plan.chunk(containing: at), source: source)
                if source >= wroteFrom.count || !wroteFrom[source] { noteWrite(from: source) }
                if from == 0 { for limit in settings.speedLimits { limit.spend(n) } }
                flushed = writer.append(c.staging, ptr + from, count: count, at: at)
            case .crossed(_, let crossing):
                flushed = false
                crossedChunkEnd(c, crossing)
            case .body(let d):
                switch d {
                case .proceed: decision = .proceed
                // libcurl keeps these bytes and hands them over again after `unpause()`.
                case .pause: decision = .pause
                case .abort: decision = .abort
                }
            default:
                execute([action], now: now)
            }
        }
        if flushed { moveSlot(c, atLeast: Self.slotStep) }
        // What a connection paused for the reorder window staged goes on, so that the bytes before
        // another connection's never wait in its buffer.
        if decision == .pause, streamGate != nil { settle(c) }
        return decision
    }

    // MARK: Periodic work

    /// A progress tick's I/O (the core decided it is due): the checkpoint, early write-back, slow
    /// connections' staged bytes, the progress report.
    func periodicWork(now: Double) {
        checkpointThread?.poke()
        if let kick = onWriteback {
            let cached = writer.bytesWritten.pageCache
            if cached - lastWriteback >= writebackStep {
                lastWriteback = cached
                kick()
            }
        }
        if target.ranged { flushSlowStaging() } else { settleStream() }
        onProgress?(core.progress(now: now, elapsed: now - startedAt))
    }

    /// Resumes transfers paused by `--max-speed` while the budget allows, starting after the one resumed
    /// first last time, so that every connection gets its turn. Resuming can hand over the held bytes
    /// at once (`receive` runs inside `unpause()`) and pause the transfer again.
    func resumePausedTransfers() throws(SeggetError) {
        guard budget != nil || !settings.speedLimits.isEmpty || streamGate != nil, core.connections.contains(where: { $0.machine.isPaused })
        else { return }
        let now = monotonicSeconds()
        budget?.refill(now: now)
        let n = io.count
        for i in 0..<n {
            let c = io[(resumeCursor + i) % n]
            guard core.connections[c.id].machine.isPaused else { continue }
            // In turn: the next in line waits for its allowance rather than be passed by a smaller one.
            guard budget?.allows(c.pausedBytes) ?? true, settings.speedLimits.allSatisfy({ $0.allowsReceiving(now: now, bytes: c.pausedBytes) }) else { break }
            if let gate = streamGate, core.connections[c.id].pos + Self.streamResumeRoom > gate.receiveLimit { continue }
            apply(.resumed(c.id))
            resumeCursor = (c.id + 1) % n
            do throws(CurlError) {
                try c.easy.unpause()
            } catch where error.code == .easy(.writeError) {
                // `receive` refused the held bytes and recorded why; the transfer ends with this error.
            } catch {
                throw SeggetError(error)
            }
        }
    }
}

extension FetchEngine {
    /// Bytes of finished chunks (ranged) or bytes written (stream), for the interrupted message.
    var finishedBytesForReport: Int64 { core.finishedBytes }
    /// Bytes written by the single stream.
    var streamLength: Int64 { core.connections[0].pos }
    /// Bytes received from the network in this run.
    var receivedBytes: Int64 { core.receivedBytes }
}

extension FetchEngine: TransferClient {
    /// A connection's transfer ended (the driver has removed it already).
    func transferDriver(_ driver: TransferDriver, completed handle: EasyHandle, with code: CurlCode) {
        guard let c = io.first(where: { $0.made === handle }) else { return }
        hadActivity = true
        finish(c, code: code)
    }
}

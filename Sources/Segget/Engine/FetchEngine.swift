import SeggetCurl
import Glibc
import SeggetJournal

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

    init(id: Int) { self.id = id }
}

extension ConnectionIO: TransferDelegate {
    func transfer(_ handle: EasyHandle, received body: UnsafeRawBufferPointer) -> WriteDecision {
        guard let ptr = body.baseAddress else { return .proceed }
        return engine.receive(self, ptr, body.count)
    }
    func transfer(_ handle: EasyHandle, receivedHeaderLine line: String) { head.append(line: Substring(line)) }
}

/// The fetch loop: the I/O shell around a `Coordinator` (or a `SingleStream`). A `TransferDriver`
/// runs one easy handle per connection on the calling thread (its own driver, or one shared with
/// other downloads' engines: see `FetchEngine+Loop.swift`); the coordinator decides, the engine
/// carries its commands out. Received bytes go through per-connection staging buffers to the
/// `StagedWriter`; what may happen only once they are in the file (journal bits, progress slots,
/// the hasher's prefix) waits in the ledger of `FetchEngine+Writes.swift`.
final class FetchEngine {
    let target: FetchTarget
    let settings: FetchSettings
    let data: BlockStorage
    /// Where received bytes go: per-connection buffers written with `O_DIRECT` when possible.
    let writer: StagedWriter
    let journal: Journal?
    let plan: ChunkPlan
    /// Every decision about the connections: a `Coordinator` for ranged requests, a `SingleStream`
    /// for a server without ranges.
    var coordinator: any Coordinating
    /// `--max-speed`, shared by all connections (see `RateBudget`).
    private var budget: RateBudget?
    private var resumeCursor = 0
    let interrupt: InterruptFlag
    var onProgress: ((DownloadProgress) -> Void)?
    var onEvent: ((DownloadEvent) -> Void)?
    /// Where each connection got inside its current chunk (survives `kill -9`).
    var progressSlots: ProgressSlots?
    /// A slot is rewritten after at least this many new bytes, to keep the syscalls few.
    static let slotStep: Int64 = 128 << 10

    /// Called when the finished prefix of the file grows (for hashing behind the download).
    var onPrefix: ((Int64) -> Void)?
    /// Called every `writebackStep` bytes written through the page cache, to start writing dirty pages
    /// back early, so that the data reaches the disk while the download goes on and a final sync (or
    /// the user's `sync`) has little left to do.
    var onWriteback: (() -> Void)?
    var writebackStep: Int64 = 64 << 20
    var lastWriteback: Int64 = 0

    /// Runs this engine's transfers (see `transferDriver(_:completed:with:)`): its own, or one that
    /// runs other downloads' engines too (see `runTogether`).
    let driver: TransferDriver
    /// The driver was made for this engine alone (its multi handle is this engine's to configure).
    let ownsDriver: Bool
    /// `SEGGET_DEBUG=1` traces scheduling decisions on stderr (for tuning, not for users).
    private let debug = getenv("SEGGET_DEBUG") != nil
    private lazy var strippedTransfer = settings.transfer.withoutCredentials()
    private(set) var io: [ConnectionIO] = []
    /// The probe's transfer, held open (see `HeldTransfer`): connection 0's first request continues
    /// it when that request asks for exactly the rest of the file.
    var adoptable: HeldTransfer?
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
    /// Time at the top of the current loop iteration (cheaper than a clock read per callback).
    var lastLoopTime = 0.0
    /// When the current pass began, and when progress was last ticked and the slow rule last judged.
    var passStartedAt = 0.0
    var lastTick = 0.0
    var lastJudged = 0.0

    init(target: FetchTarget, settings: FetchSettings, data: BlockStorage, journal: Journal?,
         plan: ChunkPlan, isFinished: (Int) -> Bool, interrupt: InterruptFlag, multi: MultiHandle = MultiHandle(),
         partialChunks: [Int: Int64] = [:], driver shared: TransferDriver? = nil) {
        self.target = target
        driver = shared ?? TransferDriver(multi: multi, clock: monotonicSeconds)
        ownsDriver = shared == nil
        self.settings = settings
        self.data = data
        let n = target.ranged ? settings.connections : 1
        // Sized for the connections of its own: borrowed ones come and go near a batch's end.
        let bufferSize = StagedWriter.bufferSize(connections: min(n, settings.initialConnections ?? n))
        writer = StagedWriter(
            data: data, path: settings.writePath, bufferSize: bufferSize,
            maxInFlight: StagedWriter.maxInFlight(bufferSize: bufferSize))
        self.journal = journal
        self.plan = plan
        self.interrupt = interrupt
        chunkCRCs = ChunkChecksums(plan: plan)
        let config = Coordinator.Config(target: target, settings: settings)
        if target.ranged {
            coordinator = Coordinator(
                plan: plan, connections: n, config: config, isFinished: isFinished, maxRunChunks: settings.maxRunChunks,
                partialChunks: partialChunks)
        } else {
            coordinator = SingleStream(config: config)
        }
        coordinator.tracing = debug
        io = (0..<n).map { ConnectionIO(id: $0) }
        for c in io { c.engine = self }
        if let cap = settings.maxSpeed { budget = RateBudget(bytesPerSecond: cap, now: monotonicSeconds()) }
        inFile = coordinator.finishedChunks
        prefixChunks = inFile.prefix(while: { $0 }).count
        if target.ranged && journal != nil {
            // Checksummed beside the write, off the fetch loop, from the very buffer that is written.
            writer.besideWrite = { [chunkCRCs] bytes, offset in chunkCRCs.add(bytes, at: offset) }
        }
    }

    /// The connections the download had: all of its slots, or with a lender its own share and every
    /// borrowed one that was used.
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
        if let e = coordinator.stop { throw e }
    }

    var isDone: Bool {
        // Nothing is finished before every chunk kept from an earlier run was vouched for.
        coordinator.isComplete && (!target.ranged || (vouching?.isDone ?? true))
    }

    func pollTimeout(now: Double) -> Int32 {
        var ms = 100.0
        for c in coordinator.connections { if let t = c.machine.waitingUntil { ms = min(ms, max(0, (t - now) * 1000)) } }
        if let b = budget, coordinator.connections.contains(where: { $0.machine.isPaused }) {
            ms = min(ms, max(1, (b.secondsUntilAllowed * 1000).rounded(.up)))
        }
        return Int32(ms)
    }

    // MARK: Carrying out the coordinator's commands

    func execute(_ commands: [Coordinator.Command]) {
        for command in commands {
            switch command {
            case .start(let id, let bytes, let fresh, let newPath):
                if let held = adoptable {
                    adoptable = nil
                    if !fresh, !newPath, bytes == held.offset..<held.total, continueProbe(io[id], held) { continue }
                    held.release()
                }
                startRequest(io[id], bytes: bytes, fresh: fresh, newPath: newPath)
            case .settle(let id):
                settle(io[id])
            case .remove(let id):
                driver.cancel(io[id].easy)
                settle(io[id])
            case .event(let e):
                onEvent?(e)
            case .trace(let line):
                trace(line)
            }
        }
    }

    /// Sends connection `c`'s request for `bytes` (the coordinator has prepared its bookkeeping).
    /// A request libcurl refuses to set up ends the download.
    private func startRequest(_ c: ConnectionIO, bytes: Range<Int64>, fresh: Bool, newPath: Bool) {
        if c.staging == nil { c.staging = writer.makeStaging() }
        settle(c)
        c.easy.reset()
        c.head = ResponseHead()
        c.slotPos = bytes.lowerBound
        do throws(CurlError) {
            try configureRequest(c, bytes: bytes, fresh: fresh, newPath: newPath)
            try driver.start(c.easy, for: self)
        } catch {
            coordinator.removed(c.id, now: monotonicSeconds())
            coordinator.fail(SeggetError(error))
        }
    }

    /// Makes the probe's held transfer connection `c`'s request for the rest of the file (the
    /// coordinator has prepared its bookkeeping as for any request): its head is judged as the answer
    /// to that request, and its bytes, which libcurl held back, arrive once it is unpaused at the top
    /// of the next pass.
    private func continueProbe(_ c: ConnectionIO, _ held: HeldTransfer) -> Bool {
        guard target.ranged, coordinator.connections[c.id].source == 0, held.multi === driver.multi else { return false }
        if c.staging == nil { c.staging = writer.makeStaging() }
        settle(c)
        c.easy = held.easy
        c.head = held.head.continuing(from: held.offset, total: held.total)
        c.slotPos = held.offset
        held.easy.delegate = c
        // The engine judges stalls itself (as for its own requests).
        try? held.easy.setLowSpeedLimit(bytesPerSecond: 0, seconds: 0)
        driver.adopt(held.easy, for: self)
        held.adopted()
        adoptedToUnpause = c
        return true
    }

    /// The request `startRequest` sends: `bytes` of `c`'s source, reusing a kept-alive connection
    /// unless `fresh` forces a new TCP connection; `newPath` also gives it a random source port (see
    /// `randomSourcePort`).
    private func configureRequest(_ c: ConnectionIO, bytes: Range<Int64>, fresh: Bool, newPath: Bool) throws(CurlError) {
        let e = c.easy
        var extra: [String] = []
        let src = target.sources[coordinator.connections[c.id].source % target.sources.count]
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
        let id = c.id
        if !coordinator.connections[id].machine.headJudged {
            guard coordinator.headArrived(id, head: c.head, now: lastLoopTime) else { return .abort }
        }
        var allows = true
        if budget != nil {
            budget!.refill(now: monotonicSeconds())
            allows = budget!.allowsReceiving
        }
        switch coordinator.bytesArrived(id, budgetAllows: allows, now: budget?.updatedAt ?? lastLoopTime) {
        case .write: break
        // libcurl keeps these bytes and hands them over again after `unpause()`.
        case .pause: return .pause
        default: return .abort
        }
        if budget != nil { budget!.spend(n) }
        var offset = 0
        while offset < n {
            guard let room = coordinator.room(id, now: lastLoopTime) else { return .abort }
            let take = min(n - offset, Int(room))
            let at = coordinator.connections[id].pos
            let flushed = writer.append(c.staging, ptr + offset, count: take, at: at)
            offset += take
            if let crossing = coordinator.wrote(id, take, now: lastLoopTime) {
                crossedChunkEnd(c, crossing)
            } else if flushed {
                moveSlot(c, atLeast: Self.slotStep)
            }
            if coordinator.connections[id].machine.stopReason != nil { return offset == n ? .proceed : .abort }
        }
        return .proceed
    }

    // MARK: Completion

    /// Connection `c`'s transfer ended (the driver has removed it already).
    private func finish(_ c: ConnectionIO, code: CurlCode) {
        settle(c)
        trace("connection \(c.id) done code=\(code.rawValue) pos=\(coordinator.connections[c.id].pos) port=\((try? c.easy.localPort()).map(String.init) ?? "?") rate=\(Format.rate(Double(coordinator.connections[c.id].transferBytes) / max(0.001, monotonicSeconds() - coordinator.connections[c.id].transferStartedAt)))")
        let end: Coordinator.TransferEnd
        if code == .ok {
            end = .ok
        } else if code == .partialFile {
            end = .partial
        } else if code.isTransient && !Prober.headersTooLarge(code, head: c.head) || code == .writeError {
            end = .transient(code.description)
        } else {
            end = .failed(Prober.networkError(code, url: target.url, head: c.head))
        }
        execute(coordinator.transferEnded(c.id, end, head: c.head, now: monotonicSeconds()))
    }

    /// Removes the losers of end-game races; their staged bytes are discarded (the winner wrote them).
    func flushRemovals() {
        for id in pendingRemoval {
            let c = io[id]
            if coordinator.connections[id].machine.isTransferring {
                driver.cancel(c.easy)
                coordinator.removed(id, now: monotonicSeconds())
            }
            if let s = c.staging { writer.discard(s) }
        }
        pendingRemoval.removeAll()
    }

    // MARK: Periodic work

    func tick(now: Double) {
        execute(coordinator.tick(now: now))
        checkpointThread?.poke()
        if let kick = onWriteback {
            let cached = writer.bytesWritten.pageCache
            if cached - lastWriteback >= writebackStep {
                lastWriteback = cached
                kick()
            }
        }
        if target.ranged { flushSlowStaging() } else { settleStream() }
        onProgress?(coordinator.progress(now: now, elapsed: now - startedAt))
    }

    /// Resumes transfers paused by `--max-speed` while the budget allows, starting after the one resumed
    /// first last time, so that every connection gets its turn. Resuming can hand over the held bytes
    /// at once (`receive` runs inside `unpause()`) and pause the transfer again.
    func resumePausedTransfers() throws(SeggetError) {
        guard budget != nil, coordinator.connections.contains(where: { $0.machine.isPaused }) else { return }
        budget!.refill(now: monotonicSeconds())
        let n = io.count
        for i in 0..<n {
            guard budget!.allowsReceiving else { break }
            let c = io[(resumeCursor + i) % n]
            guard coordinator.connections[c.id].machine.isPaused else { continue }
            coordinator.resume(c.id, now: monotonicSeconds())
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

    /// Counts the time the loop just waited for the writer as held time for every connection
    /// receiving: they were not read meanwhile, so neither the slow rule nor the stall timeout may
    /// blame the network for it.
    func countWriterWaits() {
        let waited = writer.waitedSeconds - writerWaitSeen
        guard waited > 0 else { return }
        writerWaitSeen = writer.waitedSeconds
        coordinator.heldByWriter(waited)
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

extension FetchEngine {
    /// Bytes of finished chunks (ranged) or bytes written (stream), for the interrupted message.
    var finishedBytesForReport: Int64 { coordinator.finishedBytes }
    /// Bytes written by the single stream.
    var streamLength: Int64 { coordinator.connections[0].pos }
    /// Bytes received from the network in this run.
    var receivedBytes: Int64 { coordinator.receivedBytes }
}

extension FetchEngine: TransferClient {
    /// A connection's transfer ended (the driver has removed it already).
    func transferDriver(_ driver: TransferDriver, completed handle: EasyHandle, with code: CurlCode) {
        guard let c = io.first(where: { $0.made === handle }) else { return }
        finish(c, code: code)
    }
}

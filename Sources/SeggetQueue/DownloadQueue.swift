import Dispatch
import Glibc
import Segget
import SeggetJournal
import SeggetVerify
import Synchronization
import SeggetSystem

/// A durable download manager: tasks queued, scheduled under limits, and kept in SQLite.
///
/// Every call that changes a task has written it to the database (WAL, synchronous=FULL) before it
/// returns, so after `kill -9` or a power cut ``init(databasePath:settings:)`` finds every task in
/// its last state; tasks that were active start again and resume from their journals (each task's
/// output path is stored the first time it starts, so the restart targets the same file).
///
/// The scheduling decisions are ``QueueState``'s; this class carries out its actions: it starts and
/// stops ``Download``s, stores rows, and publishes events. All state sits behind one lock; no lock is
/// held while waiting on the network.
public final class DownloadQueue: Sendable {
    let core: Mutex<Core>
    /// Every task's requests per host, capped at ``QueueSettings/maxConnectionsPerServer``, with the
    /// limits hosts' refusals teach kept for 10 minutes after their last refusal (see `HostBudget`).
    public let hostBudget: HostBudget
    /// The overall download limit every task pays into, changed live by the speed schedule (see
    /// `DownloadQueue+Schedule.swift`).
    public let overallSpeed: SharedRateLimit
    /// The connection budget (``QueueSettings/connectionBudget``) less every running task's own
    /// connections: what the tasks that ask for more may borrow, and call back when a task that
    /// starts later takes its own share out of it (see `ConnectionLender`).
    let connectionLender: ConnectionLender
    /// The tasks whose rows this segget cannot read (a newer segget's options, a damaged row): left
    /// in the database as they are, not run or listed, their GIDs and names kept from new tasks.
    public let tasksLeftAside: [LeftAsideTask]
    /// Minutes since local midnight; injectable for tests.
    let minuteOfDay: @Sendable () -> Int

    struct Live {
        var grant: QueueState.Grant
        var task: DownloadTask?
        /// Set when a stop was asked for before the download existed (during its probe).
        var stopRequested = false
        /// Set with `stopRequested`: ends the probe that names the file (it may wait for a slot of
        /// its host's budget).
        let probeInterrupt = InterruptFlag()
        var progress: DownloadProgress?
        var lastSaved = 0.0
        /// The task's own speed cap, which its download reads while it runs: `changeOption`'s
        /// `max-download-limit` takes effect at once, as in aria2 (it waited for the next start).
        let ownSpeed = SharedRateLimit()
        /// Its own connections, which a change of the limits may lower while it runs.
        let ownShare = ConnectionShare(1)
        /// Its share of the overall limit, the last time it was shared out (see `SpeedShares`).
        var speedShare: Int64?
        /// The options its download started with, each one the task leaves unset filled with the
        /// queue's value then (``DownloadQueue/effective(_:_:)``): what `changeOption` compares with,
        /// since a later `changeGlobalOption` does not reach a download already running.
        var runsWith: TaskOptions
    }

    struct Core {
        var state: QueueState
        var store: TaskStore?
        var settings: QueueSettings
        var policy: DirectoryPolicy
        var records: [TaskID: TaskRecord]
        var live: [TaskID: Live] = [:]
        /// The finished byte ranges a download's last run ended with, for its piece map while it is
        /// paused or stopped (not stored: after a restart the completed length stands in).
        var lastFinished: [TaskID: [Range<Int64>]] = [:]
        /// Tasks whose link expired, waiting for a new one (see `DownloadQueue+Renewal.swift`).
        var renewals: [TaskID: PendingRenewal] = [:]
        var subscribers: [Int: AsyncStream<QueueEvent>.Continuation] = [:]
        var nextSubscriber = 0
        var stoppedTotal: Int
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
        var closed = false
        /// The first storage failure of the current call (reported by the public method that caused it).
        var storageError: QueueError?
        var lastStorageError: QueueError?
    }

    /// Opens (or creates) the database at `databasePath` and restores every task in its last state.
    /// Tasks that were active are started again when ``start()`` is called.
    /// `minuteOfDay` is the clock the speed schedule reads (default: local time).
    public init(
        databasePath: String, settings: QueueSettings, minuteOfDay: (@Sendable () -> Int)? = nil
    ) throws(QueueError) {
        try Self.checkSettings(settings)
        let policy = try DirectoryPolicy(root: settings.downloadRoot, allowAnyDirectory: settings.allowAnyDirectory)
        let store: TaskStore
        let records: [TaskRecord]
        let leftAside: [LeftAsideTask]
        let stoppedTotal: Int64
        let storedSchedule: String?
        do {
            store = try TaskStore(path: databasePath)
            (records, leftAside) = try store.loadAll()
            stoppedTotal = try store.counter("stopped_total")
            storedSchedule = try store.setting(Self.scheduleSetting)
            if let given = settings.speedSchedule { try store.setSetting(Self.scheduleSetting, given.description) }
        } catch {
            throw QueueError(
                .storage,
                "The queue database \(databasePath) could not be opened: \(error). Check the path and its permissions.")
        }
        var resolved = settings
        resolved.downloadRoot = policy.root
        if settings.speedSchedule == nil {
            resolved.speedSchedule = try Self.storedSchedule(storedSchedule, databasePath: databasePath)
        }
        tasksLeftAside = leftAside
        self.minuteOfDay = minuteOfDay ?? { localMinuteOfDay() }
        overallSpeed = SharedRateLimit(bytesPerSecond: Self.overallLimit(resolved, atMinute: self.minuteOfDay()))
        let stored = records.map {
            QueueState.Stored(id: $0.id, status: $0.status, want: Self.want($0.options), order: $0.order)
        }
        let state = QueueState(limits: Self.limits(resolved), restoring: stored)
        hostBudget = HostBudget(maxPerHost: resolved.maxConnectionsPerServer, forgetLearntAfter: HostBudget.daemonForgetAfter)
        connectionLender = ConnectionLender(spare: resolved.connectionBudget)
        var restored = Core(
            state: state, store: store, settings: resolved, policy: policy,
            records: Dictionary(uniqueKeysWithValues: records.map { ($0.id, $0) }),
            stoppedTotal: max(Int(stoppedTotal), state.history.count))
        // The piece map of a task that ran before: the chunks its journal records. Read as a prefix
        // of the file from its completed length, a paused task at split 8 showed pieces 1-10 done
        // and hid 8, 16, 24… that were (exploratory run 11).
        for r in records where r.status != .complete && r.completedLength > 0 {
            if let path = r.path, let ranges = Self.journalRanges(path + ".segget-journal", totalLength: r.totalLength) {
                restored.lastFinished[r.id] = ranges
            }
        }
        core = Mutex(restored)
    }

    /// Begins scheduling: starts restored and queued tasks as the limits allow.
    public func start() {
        var first = false
        let launches = core.withLock { c -> [TaskID] in
            guard !c.closed, !c.state.scheduling else { return [] }
            first = true
            return perform(c.state.startScheduling(), &c)
        }
        launch(launches)
        if first { followSchedule() }
    }

    /// A new subscription to task events: each access returns a fresh stream that sees every event
    /// from then on (the newest 1,000 are buffered for a slow reader). It ends at ``shutdown(force:)``.
    public var events: AsyncStream<QueueEvent> {
        let (stream, sink) = AsyncStream.makeStream(of: QueueEvent.self, bufferingPolicy: .bufferingNewest(1000))
        let key: Int? = core.withLock { c in
            guard !c.closed else { return nil }
            c.nextSubscriber += 1
            c.subscribers[c.nextSubscriber] = sink
            return c.nextSubscriber
        }
        if let key {
            sink.onTermination = { [weak self] _ in self?.core.withLock { _ = $0.subscribers.removeValue(forKey: key) }
            }
        } else {
            sink.finish()
        }
        return stream
    }

    // MARK: Changing tasks

    /// Adds a task; it is in the database before this returns.
    ///
    /// - Parameters:
    ///   - urls: the file's URL, then mirrors of the same file.
    ///   - paused: add it paused (it waits for ``resume(_:)``).
    ///   - position: its place in the waiting queue (0 = front); nil or past the end: the end.
    ///   - pieces: a Metalink's piece hashes of the file, checked while it downloads (stored with the task).
    ///   - id: the task's id (aria2's `gid` option), refused where a listed task has it; nil: one is drawn.
    @discardableResult
    public func add(
        urls: [String], options: TaskOptions, paused: Bool = false, position: Int? = nil, pieces: PieceHashes? = nil,
        id wanted: TaskID? = nil
    ) throws(QueueError) -> TaskID {
        try OptionRules.check(urls: urls, options: options)
        let (id, launches) = try core.withLock { (c: inout Core) throws(QueueError) -> (TaskID, [TaskID]) in
            try Self.checkOpen(c)
            let directory = try c.policy.resolve(options.directory)
            if let wanted, c.records[wanted] != nil || tasksLeftAside.contains(where: { $0.gid == wanted.gid }) {
                throw QueueError(.invalidState, "The GID \(wanted.gid) is already a task's; give another, or none and one is drawn. Nothing was added.")
            }
            let path = options.outputName.map { OutputNames.join(directory, $0) }
            try Self.refuseClaimed(path, c.records, except: nil)
            try Self.refuseClaimed(path, leftAside: tasksLeftAside)
            var id = wanted ?? TaskID(UInt64.random(in: 1...UInt64.max))
            while c.records[id] != nil || tasksLeftAside.contains(where: { $0.gid == id.gid }) {
                id = TaskID(UInt64.random(in: 1...UInt64.max))
            }
            var next = c.state
            let actions = next.add(id, want: Self.want(options), paused: paused, position: position)
            let record = TaskRecord(
                id: id, urls: urls, options: options, status: paused ? .paused : .waiting,
                order: next.entry(id)?.order ?? 0,
                directory: directory, path: path,
                createdAt: Int64(time(nil)), pieces: pieces)
            do {
                try c.store?.insert(record)
            } catch {
                throw QueueError(
                    .storage, "The task could not be saved to the queue database: \(error). Nothing was added.")
            }
            c.records[id] = record
            c.state = next
            let launches = perform(actions, &c)
            try Self.takeStorageError(&c)
            return (id, launches)
        }
        launch(launches)
        return id
    }

    /// Pauses a waiting or active task. An active one is stopped with its journal kept, so that
    /// ``resume(_:)`` continues where it stopped, and moves to the front of the queue (as in aria2).
    /// `force` is accepted for aria2's forcePause; both forms stop the transfer at once.
    public func pause(_ id: TaskID, force: Bool = false) throws(QueueError) {
        try change { (c: inout Core) throws(QueueError) in try c.state.pause(id) }
    }

    /// Pauses every waiting and active task.
    public func pauseAll(force: Bool = false) {
        try? change { (c: inout Core) in c.state.pauseAll() }
    }

    /// Puts a paused task back in the waiting queue, at its place.
    public func resume(_ id: TaskID) throws(QueueError) {
        try change { (c: inout Core) throws(QueueError) in try c.state.resume(id) }
    }

    public func resumeAll() {
        try? change { (c: inout Core) in c.state.resumeAll() }
    }

    /// Stops a task (active, waiting or paused) and moves it to the history as `removed`. Its
    /// partial file and journal stay on disk, as with aria2.
    public func remove(_ id: TaskID, force: Bool = false) throws(QueueError) {
        try change { (c: inout Core) throws(QueueError) in try c.state.remove(id) }
    }

    /// Moves a waiting or paused task in the queue and returns its new place (clamped to the queue).
    public func changePosition(_ id: TaskID, _ pos: Int, _ how: PositionOrigin) throws(QueueError) -> Int {
        var place = 0
        try change { (c: inout Core) throws(QueueError) in
            let (p, actions) = try c.state.changePosition(id, pos, how)
            place = p
            return actions
        }
        return place
    }

    // MARK: Reading

    public func snapshot(_ id: TaskID) -> TaskSnapshot? {
        core.withLock { c in c.records[id].map { Self.snapshot($0, c, position: c.state.position(of: id)) } }
    }

    /// The tasks (any status) whose GID starts with `prefix` (hex digits, any case): aria2 takes a
    /// unique prefix of a GID wherever a GID goes.
    public func tasks(withGIDPrefix prefix: String) -> [TaskID] {
        let p = prefix.lowercased()
        return core.withLock { c in c.records.keys.filter { $0.gid.hasPrefix(p) } }
    }

    /// Active tasks, in the order they started.
    public func active() -> [TaskSnapshot] {
        core.withLock { c in
            c.state.activeOrder.compactMap { id in c.records[id].map { Self.snapshot($0, c, position: -1) } }
        }
    }

    /// Waiting and paused tasks in queue order, aria2-style: offset ≥ 0 gives `[offset, offset+count)`;
    /// a negative offset counts from the end (-1 = the last) and the list then runs backwards.
    public func waiting(offset: Int, count: Int) -> [TaskSnapshot] {
        core.withLock { c in
            Self.window(Array(c.state.queue.indices), offset: offset, count: count).compactMap { i in
                c.records[c.state.queue[i]].map { Self.snapshot($0, c, position: i) }
            }
        }
    }

    /// Stopped tasks (complete, error, removed), oldest first; negative offsets as for ``waiting(offset:count:)``.
    public func stopped(offset: Int, count: Int) -> [TaskSnapshot] {
        core.withLock { c in
            Self.window(c.state.history, offset: offset, count: count).compactMap { id in
                c.records[id].map { Self.snapshot($0, c, position: -1) }
            }
        }
    }

    public var settings: QueueSettings { core.withLock { $0.settings } }

    public func globalStat() -> GlobalStat {
        core.withLock { c in
            GlobalStat(
                downloadSpeed: c.live.values.reduce(0) { $0 + Int64($1.progress?.bytesPerSecond ?? 0) },
                numActive: c.state.activeOrder.count,
                numWaiting: c.state.queue.count,
                numStopped: c.state.history.count,
                numStoppedTotal: c.stoppedTotal)
        }
    }

    /// The last storage failure that no call could report (progress and background state writes).
    public var lastStorageError: QueueError? { core.withLock { $0.lastStorageError } }

    /// Stops every active task (journals kept; they stay active in the database, so that the next
    /// open resumes them), stores progress, waits for the downloads to end and closes the database.
    /// `force` is accepted for aria2's forceShutdown; both stop the transfers at once.
    public func shutdown(force: Bool = false) async {
        let first: Bool = core.withLock { c in
            guard !c.closed && c.store != nil else { return false }
            _ = perform(c.state.shutdown(), &c)
            saveProgress(&c, force: true)
            return true
        }
        guard first else { return }
        await withCheckedContinuation { (k: CheckedContinuation<Void, Never>) in
            let now: Bool = core.withLock { c in
                if c.live.isEmpty { return true }
                c.shutdownWaiters.append(k)
                return false
            }
            if now { k.resume() }
        }
        let subscribers = core.withLock { c in
            saveProgress(&c, force: true)
            c.store?.close()
            c.store = nil
            c.closed = true
            defer { c.subscribers = [:] }
            return Array(c.subscribers.values)
        }
        // Outside the lock: finishing runs each stream's onTermination, which takes the lock.
        for s in subscribers { s.finish() }
    }

    // MARK: Carrying out actions

    /// Runs a state change and its actions under the lock, then launches what it started.
    func change(_ body: (inout Core) throws(QueueError) -> [QueueState.Action]) throws(QueueError) {
        // A storage error is thrown after the launches: the tasks `perform` started (made live,
        // their connections withdrawn) were left active and never launched.
        let (launches, storage) = try core.withLock { (c: inout Core) throws(QueueError) -> ([TaskID], QueueError?) in
            try Self.checkOpen(c)
            let actions = try body(&c)
            let launches = perform(actions, &c)
            do throws(QueueError) { try Self.takeStorageError(&c) } catch { return (launches, error) }
            return (launches, nil)
        }
        launch(launches)
        if let storage { throw storage }
    }

    /// Carries out actions under the lock; returns the tasks to launch once the lock is released.
    func perform(_ actions: [QueueState.Action], _ c: inout Core) -> [TaskID] {
        var launches: [TaskID] = []
        let now = Int64(time(nil))
        for action in actions {
            switch action {
            case .start(let id, let grant):
                let options = c.records[id].map { Self.effective($0.options, c.settings) } ?? TaskOptions()
                let live = Live(grant: grant, runsWith: options)
                live.ownSpeed.bytesPerSecond = grant.speed
                live.ownShare.count = grant.connections
                c.live[id] = live
                connectionLender.withdraw(grant.connections)
                launches.append(id)
            case .stop(let id):
                if let task = c.live[id]?.task {
                    task.cancel()
                } else {
                    c.live[id]?.stopRequested = true
                    c.live[id]?.probeInterrupt.set()
                }
            case .status(let id, let status):
                guard var r = c.records[id] else { continue }
                r.status = status
                r.order = c.state.entry(id)?.order ?? r.order
                if status.isStopped {
                    r.finishedAt = now
                    c.stoppedTotal += 1
                    let total = Int64(c.stoppedTotal)
                    store(&c) { s throws(SQLiteError) in try s.setCounter("stopped_total", total) }
                    // Beyond `max-download-result` the oldest results are forgotten, as aria2 does
                    // (exploratory run 3: 1,628 kept where the daemon reports 1000).
                    let gone = c.state.trimHistory()
                    Self.forget(gone, &c)
                    if !gone.isEmpty { store(&c) { s throws(SQLiteError) in try s.delete(gone) } }
                }
                if status == .active {
                    r.errorCode = nil
                    r.errorMessage = nil
                    r.failure = nil
                    r.finishedAt = nil
                }
                c.records[id] = r
                store(&c) { s throws(SQLiteError) in try s.update(r) }
                let event: QueueEvent? =
                    switch status {
                    case .active: .started(id)
                    case .paused: .paused(id)
                    case .removed: .stopped(id)
                    case .complete: .completed(id)
                    case .error: .failed(id)
                    case .waiting: nil
                    }
                if let event { for s in c.subscribers.values { s.yield(event) } }
            case .shrink(let id, let count):
                // Given back to the lender now; the download takes them from it as loans when it
                // sees its lower share (`FetchEngine`), or never, if it ends first.
                guard let held = c.live[id]?.grant.connections, held > count else { continue }
                c.live[id]?.grant.connections = count
                c.live[id]?.ownShare.count = count
                connectionLender.lend(held - count)
            case .reordered:
                let orders = c.state.queue.compactMap { id in c.state.entry(id).map { (id, $0.order) } }
                for (id, order) in orders { c.records[id]?.order = order }
                store(&c) { s throws(SQLiteError) in try s.updateOrders(orders) }
            }
        }
        return launches
    }

    /// Runs a store write, remembering a failure for the calling method to throw.
    /// Drops what the shell keeps of stopped tasks the state has forgotten (the database is the
    /// caller's: each reports its own failure).
    static func forget(_ ids: [TaskID], _ c: inout Core) {
        for id in ids {
            c.records[id] = nil
            c.lastFinished[id] = nil
        }
    }

    func store(_ c: inout Core, _ body: (TaskStore) throws(SQLiteError) -> Void) {
        guard let s = c.store else { return }
        do {
            try body(s)
        } catch {
            let e = QueueError(
                .storage, "The queue database could not be written: \(error). The change is not durable.")
            c.storageError = c.storageError ?? e
            c.lastStorageError = e
        }
    }

    static func takeStorageError(_ c: inout Core) throws(QueueError) {
        if let e = c.storageError {
            c.storageError = nil
            throw e
        }
    }

    static func checkOpen(_ c: Core) throws(QueueError) {
        if c.closed { throw QueueError(.invalidState, "The queue has been shut down; open it again to make changes.") }
    }

    /// Stores completed lengths of running tasks (each at most every `progressSaveInterval` unless forced).
    func saveProgress(_ c: inout Core, force: Bool) {
        let now = monotonicNow()
        var rows: [(TaskID, total: Int64, completed: Int64)] = []
        for (id, live) in c.live where force || now - live.lastSaved >= c.settings.progressSaveInterval {
            guard let r = c.records[id], live.progress != nil else { continue }
            rows.append((id, r.totalLength, r.completedLength))
            c.live[id]?.lastSaved = now
        }
        store(&c) { s throws(SQLiteError) in try s.updateProgress(rows) }
        c.storageError = nil
    }

}

/// The queue's scheduling decisions as a value: tasks, their order and status, and the connections
/// each run was granted of its own. Every event is a `mutating func` that returns the actions the
/// I/O shell (``DownloadQueue``) must carry out. No I/O, no clock: tested exhaustively alone.
///
/// A task is *running* while its download is alive: from `.start` until the shell reports
/// ``downloadEnded(_:_:)``. A paused or removed task may still be running for a moment (stopping);
/// it holds its slot and its own connections until it has ended.
struct QueueState: Sendable, Equatable {
    /// The limits the scheduler enforces. The overall speed limit is not one of them: every
    /// download pays into one live limit, shared out by `SpeedShares` while they run.
    struct Limits: Sendable, Equatable {
        var maxActive: Int
        var connectionBudget: Int
        var defaultConnections: Int

        init(maxActive: Int = 5, connectionBudget: Int = 16, defaultConnections: Int = 8) {
            self.maxActive = maxActive
            self.connectionBudget = connectionBudget
            self.defaultConnections = defaultConnections
        }

        /// The connections of its own each task starts with: the budget shared over the slots,
        /// at least one. The rest of what it asks for it borrows while no one else holds it.
        var ownShare: Int { max(1, connectionBudget / max(1, maxActive)) }
    }

    /// What a task asks for; nil means the queue's default (connections) or no cap (speed).
    struct Want: Sendable, Equatable {
        var connections: Int?
        var maxSpeed: Int64?
        /// The task's own `max-connection-per-server`: no more connections than this, whatever it
        /// asks for (they were granted and withdrawn from the budget, and sat unused).
        var perServer: Int? = nil

        /// The connections it asks for with `defaultConnections` for none, within `perServer`.
        func connections(default d: Int) -> Int { max(1, min(connections ?? d, perServer ?? .max)) }
    }

    /// What the budgets gave one run of a task. Fixed for the run; the connections it borrows and
    /// its share of the overall speed change while it runs.
    struct Grant: Sendable, Equatable {
        /// Connections of its own (see ``Limits/ownShare``).
        var connections: Int
        /// What it asks for: it may borrow up to this many in all while the budget has spare ones
        /// (see `ConnectionLender`); at least `connections`.
        var withLoans: Int
        /// The task's own cap, bytes per second; nil when uncapped.
        var speed: Int64?

        init(connections: Int, withLoans: Int? = nil, speed: Int64? = nil) {
            self.connections = connections
            self.withLoans = max(connections, withLoans ?? connections)
            self.speed = speed
        }
    }

    struct Entry: Sendable, Equatable {
        var status: TaskStatus
        var want: Want
        /// Present while the task's download is alive.
        var running: Grant?
        /// The stored sort key within the task's list (queue, active, history); only the relative
        /// order matters, so most changes write one row, not the whole queue.
        var order: Int = 0
    }

    enum Action: Sendable, Equatable {
        /// Start a download with this grant.
        case start(TaskID, Grant)
        /// Stop the task's download, keeping its journal.
        case stop(TaskID)
        /// The task's status changed: store it and tell subscribers.
        case status(TaskID, TaskStatus)
        /// Queue places were renumbered: store the order of every queued task.
        case reordered
        /// A running task's own connections lowered to this many (the limits changed): its download
        /// holds those above as loans from now on.
        case shrink(TaskID, Int)
    }

    /// How a download ended, as the shell reports it.
    enum Ending: Sendable, Equatable {
        case completed
        case failed
        /// Stopped on request (pause, remove, shutdown); the journal is kept.
        case interrupted
    }

    private(set) var limits: Limits
    private(set) var tasks: [TaskID: Entry] = [:]
    /// Waiting and paused tasks, front first.
    private(set) var queue: [TaskID] = []
    /// Active tasks in the order they started.
    private(set) var activeOrder: [TaskID] = []
    /// Stopped tasks, oldest first.
    private(set) var history: [TaskID] = []
    /// Stopped tasks ever, purged ones included (aria2's numStoppedTotal).
    private(set) var stoppedTotal = 0
    /// False before ``startScheduling()`` and after ``shutdown()``: nothing new starts.
    private(set) var scheduling = false
    /// The next order key for an appended, started or stopped task.
    private var nextOrder = 0
    /// Tasks that were active when the state was stored; their stored status is fixed at start.
    private var restoredActive: [TaskID] = []

    init(limits: Limits) { self.limits = limits }

    // MARK: Restore

    /// A task as stored, for ``init(limits:restoring:)``.
    struct Stored: Sendable, Equatable {
        var id: TaskID
        var status: TaskStatus
        var want: Want
        /// The entry's ``Entry/order``.
        var order: Int
    }

    /// Rebuilds the state after a restart. Tasks that were active go to the front of the queue, in
    /// the order they had started, so that they are the first to start again (and resume).
    init(limits: Limits, restoring stored: [Stored]) {
        self.limits = limits
        let sorted = stored.sorted { ($0.order, $0.id) < ($1.order, $1.id) }
        nextOrder = (sorted.map(\.order).max() ?? -1) + 1
        for s in sorted where s.status == .active {
            tasks[s.id] = Entry(status: .waiting, want: s.want)
            queue.append(s.id)
            restoredActive.append(s.id)
        }
        for s in sorted where s.status.isQueued {
            tasks[s.id] = Entry(status: s.status, want: s.want)
            queue.append(s.id)
        }
        renumberQueue()
        for s in sorted where s.status.isStopped {
            tasks[s.id] = Entry(status: s.status, want: s.want, order: s.order)
            history.append(s.id)
        }
        stoppedTotal = history.count
    }

    // MARK: Queries

    func entry(_ id: TaskID) -> Entry? { tasks[id] }

    /// The task's place in the waiting queue (0 = front); -1 unless waiting or paused.
    func position(of id: TaskID) -> Int {
        guard let e = tasks[id], e.status.isQueued else { return -1 }
        return queue.firstIndex(of: id) ?? -1
    }

    /// Tasks whose download is alive (active ones and ones still stopping).
    var running: [TaskID] { tasks.filter { $0.value.running != nil }.map(\.key).sorted() }

    /// The running tasks' own connections (those they borrow are the lender's count).
    var grantedConnections: Int { tasks.values.reduce(0) { $0 + ($1.running?.connections ?? 0) } }

    // MARK: Events

    /// Lets tasks start (after a restore, once the shell is ready).
    mutating func startScheduling() -> [Action] {
        scheduling = true
        // The store still says active for tasks restored from a crash: correct it, then start.
        let corrected = restoredActive.compactMap { id in
            tasks[id]?.status == .waiting ? Action.status(id, .waiting) : nil
        }
        restoredActive = []
        return [.reordered] + corrected + schedule()
    }

    /// Adds a task at `position` in the queue (nil or past the end: at the end).
    mutating func add(_ id: TaskID, want: Want, paused: Bool, position: Int?) -> [Action] {
        precondition(tasks[id] == nil, "task \(id) added twice")
        var actions: [Action] = []
        if let p = position, p < queue.count {
            tasks[id] = Entry(status: paused ? .paused : .waiting, want: want)
            queue.insert(id, at: max(0, p))
            renumberQueue()
            actions.append(.reordered)
        } else {
            tasks[id] = Entry(status: paused ? .paused : .waiting, want: want, order: takeOrder())
            queue.append(id)
        }
        return actions + schedule()
    }

    /// Pauses a waiting task in place, or stops an active one and puts it at the front of the queue
    /// (as aria2 does). Pausing a paused task does nothing.
    mutating func pause(_ id: TaskID) throws(QueueError) -> [Action] {
        guard var e = tasks[id] else { throw QueueError.notFound(id) }
        switch e.status {
        case .paused:
            return []
        case .waiting:
            e.status = .paused
            tasks[id] = e
            return [.status(id, .paused)] + schedule()
        case .active:
            return stopToFront(id, as: .paused)
        case .complete, .error, .removed:
            throw QueueError(
                .invalidState, "Task \(id.gid) has already stopped (\(e.status.rawValue)), so it cannot be paused.")
        }
    }

    /// Stops an active task's download to start it again at once (its options changed): it goes
    /// to the front of the queue as waiting and starts once its download has ended. Anything else
    /// does nothing.
    mutating func restart(_ id: TaskID) -> [Action] {
        guard let e = tasks[id], e.status == .active, e.running != nil else { return [] }
        return stopToFront(id, as: .waiting)
    }

    /// Stops an active task's download and puts the task first in the queue as `status`.
    private mutating func stopToFront(_ id: TaskID, as status: TaskStatus) -> [Action] {
        let front = frontOrder()
        tasks[id]?.status = status
        tasks[id]?.order = front
        activeOrder.removeAll { $0 == id }
        queue.insert(id, at: 0)
        return [.stop(id), .status(id, status)] + schedule()
    }

    /// Pauses every waiting and active task.
    mutating func pauseAll() -> [Action] {
        let ids = activeOrder + queue
        return ids.flatMap { (try? pause($0)) ?? [] }
    }

    /// Puts a paused task back in the queue at its place. Resuming a waiting or active task does nothing.
    mutating func resume(_ id: TaskID) throws(QueueError) -> [Action] {
        guard var e = tasks[id] else { throw QueueError.notFound(id) }
        switch e.status {
        case .waiting, .active:
            return []
        case .paused:
            e.status = .waiting
            tasks[id] = e
            return [.status(id, .waiting)] + schedule()
        case .complete, .error, .removed:
            throw QueueError(
                .invalidState,
                "Task \(id.gid) has already stopped (\(e.status.rawValue)); add it again to download it once more.")
        }
    }

    mutating func resumeAll() -> [Action] {
        queue.flatMap { (try? resume($0)) ?? [] }
    }

    /// Moves an active, waiting or paused task to the history as removed (stopping its download).
    mutating func remove(_ id: TaskID) throws(QueueError) -> [Action] {
        guard var e = tasks[id] else { throw QueueError.notFound(id) }
        guard !e.status.isStopped else {
            throw QueueError(
                .invalidState,
                "Task \(id.gid) has already stopped (\(e.status.rawValue)); use aria2.removeDownloadResult to forget it.")
        }
        let wasActive = e.status == .active
        e.status = .removed
        tasks[id] = e
        activeOrder.removeAll { $0 == id }
        queue.removeAll { $0 == id }
        enterHistory(id)
        var actions: [Action] = wasActive && e.running != nil ? [.stop(id)] : []
        actions.append(.status(id, .removed))
        return actions + schedule()
    }

    /// The shell reports that a task's download has ended.
    mutating func downloadEnded(_ id: TaskID, _ ending: Ending) -> [Action] {
        guard var e = tasks[id], e.running != nil else { return [] }
        e.running = nil
        tasks[id] = e
        var actions: [Action] = []
        switch (e.status, ending) {
        case (.active, .completed):
            activeOrder.removeAll { $0 == id }
            tasks[id]?.status = .complete
            enterHistory(id)
            actions.append(.status(id, .complete))
        case (.active, .failed):
            activeOrder.removeAll { $0 == id }
            tasks[id]?.status = .error
            enterHistory(id)
            actions.append(.status(id, .error))
        case (.active, .interrupted) where !scheduling:
            // Shut down: it stays active (in the store too), so that the next open resumes it.
            break
        case (.active, .interrupted):
            // Stopped without a request from the queue: back to the front, to start again.
            activeOrder.removeAll { $0 == id }
            tasks[id]?.status = .waiting
            let front = frontOrder()
            tasks[id]?.order = front
            queue.insert(id, at: 0)
            actions.append(.status(id, .waiting))
        case (.paused, .completed), (.waiting, .completed):
            // It finished while being paused: the file is whole, so it is complete, not paused.
            queue.removeAll { $0 == id }
            tasks[id]?.status = .complete
            enterHistory(id)
            actions.append(.status(id, .complete))
        default:
            // Paused or removed while stopping; a failure then is the stop itself, and resuming retries.
            break
        }
        return actions + schedule()
    }

    /// Whether `id` has stopped (removed, most often) while its download has not ended yet.
    func isStopping(_ id: TaskID) -> Bool {
        guard let e = tasks[id] else { return false }
        return e.status.isStopped && e.running != nil
    }

    /// Forgets a stopped task.
    mutating func removeResult(_ id: TaskID) throws(QueueError) {
        guard let e = tasks[id] else { throw QueueError.notFound(id) }
        guard e.status.isStopped, e.running == nil else {
            throw QueueError(.invalidState, "Task \(id.gid) is \(e.status.rawValue), not stopped; remove it first.")
        }
        tasks[id] = nil
        history.removeAll { $0 == id }
    }

    /// Forgets every stopped task whose download has ended; returns them.
    mutating func purgeResults() -> [TaskID] {
        let gone = history.filter { tasks[$0]?.running == nil }
        for id in gone { tasks[id] = nil }
        history.removeAll { tasks[$0] == nil }
        return gone
    }

    /// The most stopped tasks kept, as aria2's `max-download-result` (its default, which the daemon
    /// reports): the oldest whose download has ended are forgotten beyond it.
    static let historyLimit = 1000

    /// Forgets the oldest stopped tasks beyond `limit` whose download has ended; returns them.
    mutating func trimHistory(limit: Int = historyLimit) -> [TaskID] {
        var over = history.count - limit
        guard over > 0 else { return [] }
        var gone: [TaskID] = []
        for id in history where over > 0 && tasks[id]?.running == nil {
            gone.append(id)
            over -= 1
        }
        for id in gone { tasks[id] = nil }
        let forgotten = Set(gone)
        history.removeAll { forgotten.contains($0) }
        return gone
    }

    /// Moves a queued task; returns its new place, clamped to the queue.
    mutating func changePosition(_ id: TaskID, _ pos: Int, _ how: PositionOrigin) throws(QueueError) -> (Int, [Action])
    {
        guard let e = tasks[id] else { throw QueueError.notFound(id) }
        guard e.status.isQueued, let current = queue.firstIndex(of: id) else {
            throw QueueError(
                .invalidState,
                "Task \(id.gid) is \(e.status.rawValue); only waiting or paused tasks have a place in the queue.")
        }
        let target: Int
        switch how {
        case .set: target = pos
        case .current: target = current + pos
        case .end: target = queue.count - 1 + pos
        }
        let clamped = min(max(0, target), queue.count - 1)
        guard clamped != current else { return (current, []) }
        queue.remove(at: current)
        queue.insert(id, at: clamped)
        renumberQueue()
        return (clamped, [.reordered] + schedule())
    }

    /// New wants for a task; a running task keeps its grant until its next start.
    mutating func setWant(_ id: TaskID, _ want: Want) throws(QueueError) {
        guard tasks[id] != nil else { throw QueueError.notFound(id) }
        tasks[id]?.want = want
    }

    /// New limits. Nothing running is stopped: a lower `maxActive` lets no new task start until
    /// fewer run; a higher one starts waiting tasks at once.
    mutating func setLimits(_ l: Limits) -> [Action] {
        limits = l
        // Shares granted under a smaller slot count (or a larger budget) come down to the new one:
        // kept, a raise from 5 to 20 slots left the first five 3 connections each of their own, 33
        // in use for a budget of 16, and the host's cap then left new tasks without any.
        var actions: [Action] = []
        for id in running {
            guard let g = tasks[id]?.running, g.connections > l.ownShare else { continue }
            tasks[id]?.running?.connections = l.ownShare
            actions.append(.shrink(id, l.ownShare))
        }
        return actions + schedule()
    }

    /// Stops every running download without changing any status, so that the stored state still
    /// says active and the next start resumes them. Nothing starts afterwards.
    mutating func shutdown() -> [Action] {
        scheduling = false
        return activeOrder.filter { tasks[$0]?.running != nil }.map { .stop($0) }
    }

    // MARK: Scheduling

    private mutating func enterHistory(_ id: TaskID) {
        let order = takeOrder()
        tasks[id]?.order = order
        history.append(id)
        stoppedTotal += 1
    }

    private mutating func takeOrder() -> Int {
        defer { nextOrder += 1 }
        return nextOrder
    }

    /// An order key before every queued task's.
    private func frontOrder() -> Int {
        (queue.first.flatMap { tasks[$0]?.order } ?? nextOrder) - 1
    }

    private mutating func renumberQueue() {
        for (i, id) in queue.enumerated() { tasks[id]?.order = i - queue.count }
    }

    /// Starts waiting tasks in queue order while a slot is free.
    private mutating func schedule() -> [Action] {
        guard scheduling else { return [] }
        var actions: [Action] = []
        // A task paused and resumed while its download is still stopping waits for that end.
        while running.count < limits.maxActive,
            let next = queue.first(where: { tasks[$0]?.status == .waiting && tasks[$0]?.running == nil }),
            let grant = grant(for: next)
        {
            queue.removeAll { $0 == next }
            activeOrder.append(next)
            tasks[next]?.status = .active
            tasks[next]?.running = grant
            let order = takeOrder()
            tasks[next]?.order = order
            actions += [.start(next, grant), .status(next, .active)]
        }
        return actions
    }

    /// The grant for a task about to start: of its own, the least of what it asks for, the budget's
    /// share for each slot (``Limits/ownShare``) and what the running tasks' own leave, but at least
    /// one; the rest of what it asks for it may borrow.
    ///
    /// A slot always comes with a connection: `max-concurrent-downloads` above the budget runs that
    /// many tasks on one connection each (it ran no more than the budget's count, and a limit raised
    /// while every connection was granted started nothing until a task ended). Shares granted under
    /// an earlier, smaller `maxActive` are kept until those tasks end.
    private func grant(for id: TaskID) -> Grant? {
        guard let e = tasks[id] else { return nil }
        let want = e.want.connections(default: limits.defaultConnections)
        let left = limits.connectionBudget - grantedConnections
        let own = max(1, min(want, limits.ownShare, left))
        return Grant(connections: own, withLoans: want, speed: e.want.maxSpeed)
    }
}

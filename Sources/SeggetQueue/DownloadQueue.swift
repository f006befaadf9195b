import Segget
import Synchronization

/// A durable download manager: tasks queued, scheduled under limits, and kept in SQLite.
///
/// Skeleton: the public surface is final; the bodies arrive in the next commits.
public final class DownloadQueue: Sendable {
    private let state: Mutex<QueueSettings>

    /// Opens (or creates) the database at `databasePath` and restores every task in its last state.
    /// Tasks that were active are scheduled again when ``start()`` is called.
    public init(databasePath: String, settings: QueueSettings) throws(QueueError) {
        state = Mutex(settings)
    }

    /// Begins scheduling: starts restored and queued tasks as limits allow.
    public func start() {}

    /// A new subscription to task events; each access returns a fresh stream that sees every
    /// event from then on (buffering the newest 1,000). It ends at ``shutdown(force:)``.
    public var events: AsyncStream<QueueEvent> { AsyncStream { $0.finish() } }

    /// Adds a task; it is in the database before this returns.
    ///
    /// - Parameters:
    ///   - paused: add it paused (it waits for ``resume(_:)``).
    ///   - position: its place in the waiting queue (0 = front); nil or past the end: the end.
    @discardableResult
    public func add(urls: [String], options: TaskOptions, paused: Bool = false, position: Int? = nil) throws(QueueError) -> TaskID {
        throw QueueError(.storage, "not implemented yet")
    }

    /// Pauses a waiting or active task. An active one is stopped with its journal kept, so that
    /// ``resume(_:)`` continues where it stopped. `force` is accepted for aria2's forcePause; both
    /// forms stop the transfer at once.
    public func pause(_ id: TaskID, force: Bool) throws(QueueError) {}
    public func pauseAll(force: Bool) {}
    /// Puts a paused task back in the waiting queue, at its old place.
    public func resume(_ id: TaskID) throws(QueueError) {}
    public func resumeAll() {}
    /// Stops a task (active, waiting or paused) and moves it to the history as `removed`. Its
    /// partial file and journal stay on disk, as with aria2.
    public func remove(_ id: TaskID, force: Bool) throws(QueueError) {}
    /// Forgets a stopped task (complete, error or removed).
    public func removeResult(_ id: TaskID) throws(QueueError) {}
    /// Forgets every stopped task.
    public func purgeResults() {}
    /// Moves a waiting or paused task in the queue and returns its new place (clamped to the queue).
    public func changePosition(_ id: TaskID, _ pos: Int, _ how: PositionOrigin) throws(QueueError) -> Int { 0 }
    /// Replaces a task's options. Speed and connection changes apply the next time the task starts;
    /// directory and name can change only before the task first started.
    public func changeOptions(_ id: TaskID, _ options: TaskOptions) throws(QueueError) {}

    public func snapshot(_ id: TaskID) -> TaskSnapshot? { nil }
    /// Active tasks, in the order they started.
    public func active() -> [TaskSnapshot] { [] }
    /// Waiting and paused tasks in queue order, aria2-style: offset ≥ 0 gives `[offset, offset+count)`;
    /// a negative offset counts from the end (-1 = last) and the list comes newest-first.
    public func waiting(offset: Int, count: Int) -> [TaskSnapshot] { [] }
    /// Stopped tasks (complete, error, removed), oldest first; negative offsets as for ``waiting(offset:count:)``.
    public func stopped(offset: Int, count: Int) -> [TaskSnapshot] { [] }

    public var settings: QueueSettings { state.withLock { $0 } }
    /// Changes settings. Lowering `maxActive` or the budgets stops nothing: running tasks finish
    /// under the grant they started with, and new starts wait until they fit.
    public func changeSettings(_ s: QueueSettings) throws(QueueError) { state.withLock { $0 = s } }

    public func globalStat() -> GlobalStat {
        GlobalStat(downloadSpeed: 0, numActive: 0, numWaiting: 0, numStopped: 0, numStoppedTotal: 0)
    }

    /// Stops every active task (journals kept, status stays active in the database so that the next
    /// open resumes them), writes progress and closes the database.
    public func shutdown(force: Bool) async {}
}

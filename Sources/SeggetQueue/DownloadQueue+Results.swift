import Segget
import SeggetSystem

extension DownloadQueue {
    /// How long forgetting a stopped task waits for its download to end: a task removed a moment ago
    /// is `removed` at once, but its download takes a moment more to stop (20-90 ms measured), and
    /// aria2 forgets it at once (`aria2p remove(clean=True)`, `segget rm` twice in a row). Short: the
    /// RPC calls are answered one at a time, and every other client waits meanwhile.
    static let stoppingPatience = 0.5

    /// Forgets a stopped task (complete, error or removed), once its download has ended: a task
    /// removed a moment ago is waited for (up to `stoppingPatience`).
    public func removeResult(_ id: TaskID) throws(QueueError) {
        let deadline = monotonicNow() + Self.stoppingPatience
        while true {
            let stopping = try core.withLock { (c: inout Core) throws(QueueError) -> Bool in
                try Self.checkOpen(c)
                if c.state.isStopping(id) { return true }
                try c.state.removeResult(id)
                Self.forget([id], &c)
                do { try c.store?.delete([id]) } catch {
                    throw QueueError(.storage, "The task could not be deleted from the queue database: \(error).")
                }
                return false
            }
            guard stopping else { return }
            guard monotonicNow() < deadline else {
                throw QueueError(
                    .invalidState,
                    "Task \(id.gid) has stopped but its download has not ended yet; try again in a moment.")
            }
            SystemThread.sleep(seconds: 0.01)
        }
    }

    /// Forgets every stopped task, once the downloads of those stopped a moment ago have ended
    /// (waited for up to `stoppingPatience`; any still going then stay).
    public func purgeResults() {
        let deadline = monotonicNow() + Self.stoppingPatience
        while core.withLock({ c in !c.closed && c.state.history.contains { c.state.isStopping($0) } }), monotonicNow() < deadline {
            SystemThread.sleep(seconds: 0.01)
        }
        core.withLock { c in
            guard !c.closed else { return }
            let gone = c.state.purgeResults()
            Self.forget(gone, &c)
            do { try c.store?.delete(gone) } catch {
                c.lastStorageError = QueueError(.storage, "Purging the history failed: \(error).")
            }
        }
    }
}

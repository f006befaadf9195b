import Glibc
import Segget

/// The overall download limit and its time-of-day schedule: one `SharedRateLimit` that every running
/// download pays into, set to the schedule's window for the current minute of the day, else to
/// ``QueueSettings/maxOverallSpeed``, and each task's share of it (`SpeedShares`) as a cap of its
/// own. The queue re-applies both every second while it is open (and at once when the settings
/// change), reading the minute from its clock (local time; tests inject one).
extension DownloadQueue {
    /// The name the schedule is stored under (the `settings` table, schema 2).
    static let scheduleSetting = "speed-schedule"

    /// The overall limit `s` asks for at `minute` of the day; nil: none.
    static func overallLimit(_ s: QueueSettings, atMinute minute: Int) -> Int64? {
        let base = s.maxOverallSpeed.flatMap { $0 > 0 ? $0 : nil }
        guard let schedule = s.speedSchedule else { return base }
        return schedule.limit(atMinute: minute, otherwise: base)
    }

    /// The overall limit in force now (what `getGlobalOption` reports as
    /// `max-overall-download-limit`); nil: none.
    public var currentOverallSpeed: Int64? { overallSpeed.bytesPerSecond }

    /// Sets the overall limit for the clock's current minute and shares it out among the running
    /// tasks (see `SpeedShares`). Running downloads follow at their next received bytes.
    public func applySchedule() {
        let minute = minuteOfDay()
        core.withLock { c in
            // Read under the lock: a `changeSettings` between a read outside it and this write was
            // undone for up to a second.
            let total = Self.overallLimit(c.settings, atMinute: minute)
            overallSpeed.bytesPerSecond = total
            let tasks = c.live.map { id, l in
                SpeedShares.Task(id: id, ownCap: l.grant.speed, rate: l.progress?.bytesPerSecond ?? 0, lastShare: l.speedShare)
            }
            let shares = total.map { SpeedShares.shares(total: $0, tasks: tasks) } ?? [:]
            for (id, l) in c.live {
                c.live[id]?.speedShare = shares[id]
                l.ownSpeed.bytesPerSecond = [l.grant.speed, shares[id]].compactMap { $0 }.min()
            }
        }
    }

    /// Re-applies the schedule every second until the queue is closed.
    func followSchedule() {
        Task.detached { [weak self] in
            while let queue = self, queue.core.withLock({ !$0.closed }) {
                queue.applySchedule()
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// The schedule stored in the database, if any.
    static func storedSchedule(_ text: String?, databasePath: String) throws(QueueError) -> SpeedSchedule? {
        guard let text else { return nil }
        do {
            return try SpeedSchedule(parsing: text)
        } catch {
            throw QueueError(
                .storage, "The speed schedule stored in \(databasePath) cannot be read (\(error)); give --speed-schedule to replace it.")
        }
    }
}

/// Minutes since local midnight now (the TZ environment variable, else /etc/localtime).
func localMinuteOfDay() -> Int {
    var now = time(nil)
    var parts = tm()
    guard localtime_r(&now, &parts) != nil else { return 0 }
    return Int(parts.tm_hour) * 60 + Int(parts.tm_min)
}

/// End-game races held back after a racer failed (see `RaceHolds`).
extension Coordinator {
    mutating func abandonRace(_ id: Int) { scheduler.abandon(id) }

    /// Racer `id` failed (`reason`; the server's `Retry-After`, if any, in `retryAfter`): its chunk is
    /// not raced again before the chunk's backoff and its owner's next attempt (see `RaceHolds`).
    mutating func holdRaces(afterFailureOf id: Int, reason: String, retryAfter: Double?, now: Double) {
        guard let k = scheduler.duplicates[id] else { return }
        let ownerDue = connections.first { scheduler.run(of: $0.id)?.lowerBound == k }?.machine.waitingUntil
        let config = config
        raceHolds.racerFailed(chunk: k, now: now, ownerDue: ownerDue) { failures in
            guard case .wait(let delay, _) = RetryPolicy.decide(
                attempt: failures, reason: reason, base: config.retryWait, retryAfter: retryAfter,
                maxWait: config.maxRetryWait, deadline: nil, now: now, jitter: config.jitter())
            else { return 0 }
            return delay
        }
    }

    /// The connections whose chunk is not raced now: a racer failed on it (see `RaceHolds`).
    func ownersNotRaced(now: Double) -> Set<Int> {
        guard !raceHolds.isEmpty else { return [] }
        return Set(connections.indices.filter { o in
            scheduler.run(of: o).map { raceHolds.isHeld(chunk: $0.lowerBound, now: now) } ?? false
        })
    }
}

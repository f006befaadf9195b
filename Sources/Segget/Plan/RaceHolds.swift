/// Chunks whose end-game races are held back because a racer failed on them.
///
/// A racer (a second copy of the chunk expected to finish last) that fails stops, and used to wait
/// only its own first backoff before it, or another idle connection, raced the same chunk again.
/// But the chunk's owner is usually waiting out a retry of the same failure, and looks like the
/// slowest of all to the end game (its remaining time unknown), so the chunk was raced again and
/// again while the owner backed off: a server that failed every request reaching the file's last
/// 1000 bytes (a 503 with `Retry-After: 10`, a 500, or every answer cut there) was asked for them
/// 216-556 times in 30-50 s at `-n 8` and `-n 16`, where one connection asked 6 times.
///
/// Each failure of a racer on chunk `k` holds every new race of `k` until the later of the chunk's
/// own backoff (as a retry's: doubling with each racer failure on `k`, or what the server's
/// `Retry-After` asked) and the owner's next attempt. A chunk then costs at most one racer request
/// per attempt of its owner, and fewer as its failures grow.
struct RaceHolds: Equatable, Sendable {
    struct Hold: Equatable, Sendable {
        /// Racers that failed on the chunk so far.
        var failures: Int
        /// No new race of the chunk before this.
        var until: Double
    }

    private(set) var holds: [Int: Hold] = [:]

    var isEmpty: Bool { holds.isEmpty }

    /// A racer of chunk `k` failed at `now`. `backoff(n)` is the wait after the chunk's `n`-th racer
    /// failure; `ownerDue` is when the chunk's owner sends its next request (nil: it is not waiting).
    mutating func racerFailed(chunk k: Int, now: Double, ownerDue: Double?, backoff: (_ failures: Int) -> Double) {
        let failures = (holds[k]?.failures ?? 0) + 1
        let until = max(now + max(0, backoff(failures)), ownerDue ?? now, holds[k]?.until ?? now)
        holds[k] = Hold(failures: failures, until: until)
    }

    /// Whether chunk `k` may not be raced at `now`.
    func isHeld(chunk k: Int, now: Double) -> Bool { holds[k].map { now < $0.until } ?? false }

    /// Racers that failed on chunk `k` so far.
    func failures(chunk k: Int) -> Int { holds[k]?.failures ?? 0 }
}

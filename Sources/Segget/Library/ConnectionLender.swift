import Synchronization

/// Connections a group of downloads (a batch) may lend each other: the part of their common budget
/// that no download holds at the moment.
///
/// A batch gives each file in flight an equal share of its budget. Near the end of the list fewer
/// files run than the budget was shared among: a worker that finds no file left lends its share here,
/// and the downloads still running borrow it (one connection at a time, each taking work from a
/// connection of its own that has chunks not yet started) and give it back when they end or have
/// nothing left for it. So the last files of a batch use the connections the finished ones left, and
/// the connections open at once never exceed the budget.
///
/// A daemon lends the other way round: its budget starts here whole, and each task that starts
/// takes its own share out (`withdraw`), even where loans have left less than that: the count goes
/// below zero, and while it is there the downloads that borrowed give their loans back, one at a
/// time each, as the chunks those are on finish (see `Coordinator.recallLoan`). So a task that starts
/// while others hold every connection gets its share within a chunk's time, without a restart.
///
/// Safe from any thread: one atomic count.
public final class ConnectionLender: Sendable {
    private let free: Atomic<Int>

    /// A lender holding `spare` connections (usually none: a batch lends as its workers run out).
    public init(spare: Int = 0) { free = Atomic(max(0, spare)) }

    /// Connections no download holds now; below zero, how many loans the lender is short.
    public var spare: Int { free.load(ordering: .relaxed) }

    /// Takes `count` connections out whether they are spare or lent (a daemon task's own share):
    /// what is lent beyond the rest is called back.
    public func withdraw(_ count: Int) {
        guard count > 0 else { return }
        free.subtract(count, ordering: .acquiringAndReleasing)
    }

    /// Adds `count` connections: a worker's share it no longer uses, or a download's loans given back.
    public func lend(_ count: Int) {
        guard count > 0 else { return }
        free.add(count, ordering: .acquiringAndReleasing)
    }

    /// Takes up to `count` spare connections; returns how many were taken (0 when none are spare).
    public func borrow(upTo count: Int) -> Int {
        guard count > 0 else { return 0 }
        var have = free.load(ordering: .relaxed)
        while have > 0 {
            let take = min(have, count)
            let (exchanged, original) = free.compareExchange(
                expected: have, desired: have - take, ordering: .acquiringAndReleasing)
            if exchanged { return take }
            have = original
        }
        return 0
    }
}

/// A daemon task's own share of its queue's budget, which the queue may lower while the task runs
/// (`max-concurrent-downloads` raised): the download then holds its connections above the new
/// share as loans of the lender (see `Coordinator.lowerOwn`), given back as any loan. Only lowered.
public final class ConnectionShare: Sendable {
    private let own: Atomic<Int>

    public init(_ count: Int) { own = Atomic(max(1, count)) }

    public var count: Int {
        get { own.load(ordering: .relaxed) }
        set { own.store(max(1, newValue), ordering: .relaxed) }
    }
}

extension ConnectionShare: Equatable {
    public static func == (a: ConnectionShare, b: ConnectionShare) -> Bool { a === b }
}

extension ConnectionLender: Equatable {
    /// The same lender (a batch's), not an equal count.
    public static func == (a: ConnectionLender, b: ConnectionLender) -> Bool { a === b }
}

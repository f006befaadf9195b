import Segget
import SeggetSystem

/// How many loops a batch runs on, and when it adds one (see `Batch.runOnLoops`).
extension Batch {
    /// How many loops the run may have: one for fewer than `filesPerLoop` files per loop at once,
    /// with `--fsync` (whose steps wait for the disk on a thread of their own), on one CPU, or where
    /// the batch multiplexes (its files are in flight from the start, on the first loop's
    /// connections: a second loop would open more and get no file); else `batchLoops`.
    func loopLimit(cpus: Int) -> Int {
        guard !base.syncBeforeRename, cpus > 1, !multiplexes else { return 1 }
        return max(1, min(Self.batchLoops, parallelFiles / Self.filesPerLoop))
    }

    /// The fewest files in flight per loop: a second loop opens connections of its own (the first
    /// keeps its), which a short `-j` pays for with nothing to gain (the gain was measured at
    /// `-j 16`); from `-j 8` a batch may take two.
    static let filesPerLoop = 4

    /// Whether a CPU is free for one more loop now: fewer threads of the whole system running or
    /// ready to run, the caller's among them, than `cpus`, or as many. Two loops that hand each
    /// other files wait for each other; beside a program that keeps every CPU busy (one `yes` per
    /// CPU, the benchmark's batch-busy) each waited a scheduler's slice for the other, and 500 files
    /// of 64 KiB took 1.11 times as long as on one loop (15 alternated runs), where on an idle
    /// machine they took 0.90 times as long.
    static func cpuFree(cpus: Int) -> Bool {
        guard let runnable = SystemThread.runnableNow else { return false }
        return runnable <= cpus
    }

    /// How busy the first loop must be (`DownloadLoop.busyFraction`) for a second to be added:
    /// one that waits for its sockets half of the time or more has room for more files, and the
    /// second loop's files would dial connections of their own (`LoopLoad`).
    static let secondLoopBusy = 0.5

    /// The loops of a batch of small files. 500 files of 64 KiB, 16 at a time, 2 CPUs: 0.89-0.97
    /// times the time of one loop with the saves on the writer threads (per-repetition medians of
    /// six runs of 11-21 alternated repetitions, `scripts/bench --scenarios batch-small`); three
    /// loops were 1.06 times two.
    static let batchLoops = 2
}

import Dispatch
import Segget
import SeggetSystem
import Synchronization

extension Batch {
    /// Runs the files, `parallelFiles` at a time, on one `DownloadLoop` on the calling thread: their
    /// probes and their fetches share one driver and its connections (a file's requests reuse those
    /// the files before it left); their blocking steps run one at a time on the loop's steps queue
    /// (the loop thread itself, but with `--fsync`), where this run's bookkeeping (`LoopRun`) lives
    /// too. One file's failure is its own.
    func run(reporter: Reporter, interrupt: InterruptFlag) -> [Outcome] {
        let started = DispatchTime.now().uptimeNanoseconds
        // A file after another allocates and frees the same buffers: keep the pages for the next.
        if entries.count > 1 { Memory.keepFreedMemory() }
        // The steps run on the loop thread (see `DownloadLoop.init`): a file of 64 KiB is mostly
        // steps, and handing each to a thread of their own and back cost about five wakes of another
        // thread per file (500 files, 16 at a time: 3,000-7,800 context switches, against 500-1,400
        // on the loop). With `--fsync`, each finished file's sync could hold up the other files'
        // transfers for as long as the disk takes: there the steps keep a thread of their own.
        let loop = DownloadLoop(
            stepsOnLoop: parallelFiles == 1 || !base.syncBeforeRename, wholeSavesOnWriters: parallelFiles > 1)
        let lender = parallelFiles > 1 && !base.autoConnections && base.connections > connectionsPerFile ? ConnectionLender() : nil
        let run = LoopRun(batch: self, loop: loop, lender: lender, reporter: reporter, interrupt: interrupt)
        loop.steps.async { run.startFiles() }
        loop.run(until: { run.isFinished })
        let outcomes = loop.steps.sync {
            run.outcomes.enumerated().map {
                $0.element ?? Outcome(id: $0.offset + 1, url: entries[$0.offset].url, status: .notStarted)
            }
        }
        reporter.summary(outcomes, seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
        return outcomes
    }
}

/// The state of one batch run on a loop. Used only on the loop's steps queue, but for `isFinished`.
final class LoopRun: @unchecked Sendable {
    let batch: Batch
    let loop: DownloadLoop
    let lender: ConnectionLender?
    let reporter: Reporter
    let interrupt: InterruptFlag
    /// One connection budget per host for the run's files.
    let hostBudget: HostBudget
    /// The side files earlier runs left in the run's directories, read once each (see `StartingNames`).
    let startingNames: StartingNames?

    private var next = 0
    /// The file whose probe takes the next slot in its host's budget: probes take slots in list
    /// order, so that no file waiting for an earlier file's name holds a slot the earlier file
    /// still waits for. `turnPassed`: files past that step (or with no probe); `turnWaiting`: probes
    /// started once their turn comes. The turn also spaces the probes of the first files: a host
    /// that answers 429 past 3 connections refused 2-4 requests of a 20-file batch (host-budget.sh)
    /// where probes all sent at once (the loop alone keeping their order) got 7-13 refused.
    private var turn = 0
    private var turnPassed: Set<Int> = []
    private var turnWaiting: [Int: () -> Void] = [:]
    private var inFlight = 0
    private var names: OrderedNames
    private(set) var outcomes: [Outcome?]
    private var directories: Set<String> = []
    /// Files waiting for an earlier file to report the name it wants (see `OrderedNames`).
    private var waiting: [Int: Probed] = [:]
    private let finished = Atomic<Bool>(false)

    /// A file after its probe: its options and what the probe brought.
    struct Probed {
        var options: DownloadOptions
        var prepared: PreparedDownload?
    }

    init(batch: Batch, loop: DownloadLoop, lender: ConnectionLender?, reporter: Reporter, interrupt: InterruptFlag) {
        self.batch = batch
        self.loop = loop
        self.lender = lender
        self.reporter = reporter
        self.interrupt = interrupt
        hostBudget = HostBudget(maxPerHost: batch.maxConnectionsPerHost)
        startingNames = batch.entries.count > 1 ? StartingNames(files: batch.entries.count) : nil
        names = OrderedNames(count: batch.entries.count)
        outcomes = Array(repeating: nil, count: batch.entries.count)
    }

    /// True once every file has ended; read by the loop thread.
    var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// Starts files while fewer than `parallelFiles` are in flight.
    func startFiles() {
        if batch.entries.isEmpty { return finish() }
        while inFlight < batch.parallelFiles && next < batch.entries.count {
            let k = next
            next += 1
            inFlight += 1
            begin(k)
        }
    }

    /// File `k`: its probe (a request on the loop), when one is made, then its name.
    private func begin(_ k: Int) {
        let opts = batch.options(
            for: batch.entries[k], lender: lender, hostBudget: hostBudget, startingNames: startingNames)
        // The probe's failure is not reported: the download itself retries and gives the real error.
        guard batch.probes(opts) && !interrupt.isSet else {
            passTurn(k)
            return probed(k, Probed(options: opts, prepared: nil))
        }
        let steps = loop.steps
        let probe = { [self] in
            Download(url: batch.entries[k].url, options: opts).prepare(
                on: loop, interrupt: interrupt, onSlot: { steps.async { [self] in passTurn(k) } }
            ) { [self] result in
                passTurn(k)
                probed(k, Probed(options: opts, prepared: try? result.get()))
            }
        }
        if k == turn { probe() } else { turnWaiting[k] = probe }
    }

    /// File `k`'s probe has its slot (or ended, or made none): the next file's probe may take one.
    private func passTurn(_ k: Int) {
        guard k >= turn else { return }
        // The file whose turn it is passes without a stop in the set: a run of one file allocates
        // none (a set's first use has the runtime build its generic type at run time).
        if k == turn { turn += 1 } else { turnPassed.insert(k) }
        while turnPassed.remove(turn) != nil { turn += 1 }
        if let w = turnWaiting.removeValue(forKey: turn) { w() }
    }

    /// Paths are decided in list order, so a rerun picks the same names: whichever report completes
    /// the list's prefix decides it, and the files it decided go on.
    private func probed(_ k: Int, _ p: Probed) {
        let decidedNow = names.wish(batch.wish(k, options: p.options, info: p.prepared?.info), for: k)
        waiting[k] = p
        for i in decidedNow.sorted() {
            if let w = waiting.removeValue(forKey: i) { named(i, w) }
        }
    }

    /// File `k`, named: its download, on the loop.
    private func named(_ k: Int, _ p: Probed) {
        let entry = batch.entries[k]
        let id = k + 1
        let path = names.path(of: k)
        let ready = batch.ready(
            k, path: path, options: p.options, info: p.prepared?.info, reporter: reporter, interrupt: interrupt,
            knownDirectory: { directories.contains($0) }, noteDirectory: { directories.insert($0) })
        switch ready {
        case .ended(let outcome):
            ended(k, outcome)
        case .run(let opts):
            let reporter = reporter
            var progress: (@Sendable (DownloadProgress) -> Void)?
            if reporter.wantsProgress { progress = { reporter.progress(id: id, $0) } }
            Download(url: entry.url, options: opts).run(
                on: loop, progress: progress, events: { reporter.event(id: id, $0) },
                interrupt: interrupt, prepared: p.prepared
            ) { [self] result in
                switch result {
                case .success(let r):
                    reporter.finished(id: id, url: entry.url, r)
                    ended(k, Outcome(id: id, url: entry.url, path: r.path, status: .done(r)))
                case .failure(let e):
                    reporter.failed(id: id, url: entry.url, path: path, e)
                    ended(k, Outcome(id: id, url: entry.url, path: path, status: .failed(e)))
                }
            }
        }
    }

    /// File `k` ended: the next file takes its place, or, with none left, its share of the budget is
    /// lent to the files still running.
    private func ended(_ k: Int, _ outcome: Outcome) {
        outcomes[k] = outcome
        inFlight -= 1
        if next < batch.entries.count {
            // Later, not from inside this file's ending (a long list of files that end at once
            // would otherwise nest as deep as it is long).
            loop.steps.async { [self] in startFiles() }
        } else {
            lender?.lend(batch.connectionsPerFile)
        }
        if inFlight == 0 && next >= batch.entries.count { finish() }
    }

    private func finish() {
        finished.store(true, ordering: .releasing)
        loop.post {}
    }
}

import Dispatch
import Segget
import SeggetSystem
import Synchronization

extension Batch {
    /// `run`, how many loops it had, and the most large downloads it ran at once (`LargeDownloadPlaces`).
    func runOnLoops(
        reporter: Reporter, interrupt: InterruptFlag, cpus: Int = SystemThread.availableCPUs,
        cpuFree: (@Sendable () -> Bool)? = nil, loopBusy: (@Sendable (DownloadLoop) -> Bool)? = nil
    ) -> (outcomes: [Outcome], loops: Int, largePeak: Int) {
        let started = DispatchTime.now().uptimeNanoseconds
        // A file after another allocates and frees the same buffers: keep the pages for the next.
        if entries.count > 1 { Memory.keepFreedMemory() }
        // The steps run on the loop thread (see `DownloadLoop.init`): a file of 64 KiB is mostly
        // steps, and handing each to a thread of their own and back cost about five wakes of another
        // thread per file (500 files, 16 at a time: 3,000-7,800 context switches, against 500-1,400
        // on the loop). With `--fsync`, each finished file's sync could hold up the other files'
        // transfers for as long as the disk takes: there the steps keep a thread of their own.
        let loops = loopLimit(cpus: cpus)
        let loop = DownloadLoop(
            stepsOnLoop: parallelFiles == 1 || !base.syncBeforeRename, wholeSavesOnWriters: parallelFiles > 1,
            http2Sharing: http2Sharing(loops: loops))
        let lender = parallelFiles > 1 && !base.autoConnections && base.connections > connectionsPerFile ? ConnectionLender() : nil
        let run = LoopRun(
            batch: self, loop: loop, loopLimit: loops, lender: lender,
            reporter: reporter, interrupt: interrupt, cpuFree: cpuFree ?? { Self.cpuFree(cpus: cpus) },
            loopBusy: loopBusy ?? { $0.busyFraction >= Self.secondLoopBusy })
        loop.steps.async { run.startFiles(here: 0) }
        loop.run(until: { run.isFinished })
        loop.steps.sync {}
        let outcomes = run.finalOutcomes()
        reporter.summary(outcomes, seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
        return (outcomes, run.loopCount, run.largeDownloadsPeak)
    }
}

/// The state of one batch run on its loops, shared by them: every field below `lock` is read and
/// written under it, by the steps of whichever loop runs a file's next step. Each file stays on the
/// loop it was dealt to; its steps run there (`here` is that loop's index).
final class LoopRun: @unchecked Sendable {
    let batch: Batch
    let lender: ConnectionLender?
    let reporter: Reporter
    let interrupt: InterruptFlag
    /// One connection budget per host for the run's files.
    let hostBudget: HostBudget
    /// The side files earlier runs left in the run's directories, read once each (see `StartingNames`).
    let startingNames: StartingNames?
    let loopLimit: Int

    private let lock = ConditionLock()
    /// The loops, the first being the caller's; a loop is added once and never removed.
    private var loops: [DownloadLoop]
    /// Files in flight on each loop.
    private var filesOn: [Int]
    /// Files of each loop whose request is out (a probe) or whose download runs: each will bring
    /// its loop back to its inbox, without a wake (see `send`).
    private var busyOn: [Int]
    /// Files whose probe is out (counted in `busyOn` until it answers).
    private var probing: Set<Int> = []
    /// The loop each file was dealt to (-1 before it starts).
    private var loopOf: [Int]
    /// A loop's thread is being started (see `addLoop`).
    private var adding = false
    /// Loops other than the first whose threads still run.
    private var threadsRunning = 0
    private var next = 0
    /// The file whose probe takes the next slot in its host's budget: probes take slots in list
    /// order, so that no file waiting for an earlier file's name holds a slot the earlier file
    /// still waits for. `turnPassed`: files past that step (or with no probe); `turnWaiting`: probes
    /// started once their turn comes. The turn also spaces the probes of the first files: a host
    /// that answers 429 past 3 connections refused 2-4 requests of a 20-file batch (host-budget.sh)
    /// where probes all sent at once (the loop alone keeping their order) got 7-13 refused.
    private var turn = 0
    private var turnPassed: Set<Int> = []
    private var turnWaiting: [Int: (loop: Int, probe: @Sendable () -> Void)] = [:]
    private var inFlight = 0
    /// Files that gave their place in `inFlight` back while they wait for their name, their whole
    /// body in memory and no connection held (see `probed`); each still ends through `ended`.
    private var released: Set<Int> = []
    /// Files at once: `parallelFiles`; where the batch multiplexes, `parallelFilesOverHTTP2` from
    /// the start, back to `parallelFiles` for good at the first answer not over HTTP/2 or of a large
    /// file (`Batch.isLarge`). Files started beyond `parallelFiles` probe for their first bytes only
    /// (`Batch.speculative`), and a large one downloads in one of `places` (see `LargeDownloadPlaces`).
    private var inFlightCap: Int
    /// Whether the run's files still share HTTP/2 connections: from the start where the batch
    /// multiplexes, until the first answer not over HTTP/2 or of a large file.
    private var multiplexing: Bool
    private var places: LargeDownloadPlaces
    /// Files whose large download holds one of `places`, and files waiting for one, with their probe.
    private var inPlace: Set<Int> = []
    private var parked: [Int: (probed: Probed, loop: Int)] = [:]
    private var names: OrderedNames
    /// The paths the files would get if no server named them, claimed in list order as the files
    /// start (see `Batch.finishedEarlier`).
    private var guessedNames: OutputNames
    private var outcomes: [Outcome?]
    private var directories: Set<String> = []
    /// Files whose probe ended, waiting for an earlier file to report the name it wants (see
    /// `OrderedNames`).
    private var waiting: [Int: Probed] = [:]
    /// Files that reported the name they want: at the head of their probe's answer (see
    /// `answered`), else when the probe ended.
    private var wished: [Bool]
    private let finished = Atomic<Bool>(false)

    /// A file after its probe: its options and what the probe brought.
    struct Probed {
        var options: DownloadOptions
        var prepared: PreparedDownload?
        /// The probe's failure: the download's own probe counts it as its first attempt.
        var failure: SeggetError?
    }

    /// Asked before a loop is added (see `Batch.cpuFree`, `Batch.secondLoopBusy`), at most every
    /// `loadCheckInterval`: whether a CPU is free, and whether the first loop is busy.
    private let cpuFree: @Sendable () -> Bool
    private let loopBusy: @Sendable (DownloadLoop) -> Bool
    private var lastLoadCheck = -Double.infinity
    static let loadCheckInterval = 0.05

    init(
        batch: Batch, loop: DownloadLoop, loopLimit: Int, lender: ConnectionLender?, reporter: Reporter,
        interrupt: InterruptFlag, cpuFree: @escaping @Sendable () -> Bool = { true },
        loopBusy: @escaping @Sendable (DownloadLoop) -> Bool = { _ in true }
    ) {
        self.cpuFree = cpuFree
        self.loopBusy = loopBusy
        self.batch = batch
        self.lender = lender
        self.reporter = reporter
        self.interrupt = interrupt
        self.loopLimit = max(1, loopLimit)
        inFlightCap = batch.parallelFilesOverHTTP2
        places = LargeDownloadPlaces(places: batch.parallelFiles)
        hostBudget = HostBudget(maxPerHost: batch.maxConnectionsPerHost)
        multiplexing = batch.multiplexes
        startingNames = batch.entries.count > 1 ? StartingNames(files: batch.entries.count) : nil
        let outNames = batch.planPaths ? batch.outNamePaths : []
        names = OrderedNames(count: batch.entries.count, reserving: outNames)
        guessedNames = OutputNames(reserving: outNames)
        outcomes = Array(repeating: nil, count: batch.entries.count)
        wished = Array(repeating: false, count: batch.entries.count)
        loopOf = Array(repeating: -1, count: batch.entries.count)
        loops = [loop]
        filesOn = [0]
        busyOn = [0]
    }

    /// True once every file has ended; read by the loop threads.
    var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// How many loops the run has had (tests).
    var loopCount: Int { lock.withLock { loops.count } }

    /// Every file's outcome (nil: not started), once the first loop returned: waits for the threads
    /// of the others to end.
    func finalOutcomes() -> [Outcome] {
        lock.withLock {
            while threadsRunning > 0 { lock.wait() }
            return outcomes.enumerated().map {
                $0.element ?? Outcome(id: $0.offset + 1, url: batch.entries[$0.offset].url, status: .notStarted)
            }
        }
    }

    private func loop(_ l: Int) -> DownloadLoop { lock.withLock { loops[l] } }

    /// Runs `work` on loop `l`'s steps: at once when that is where the caller runs (`here`), else
    /// posted there, with a wake only when nothing of its own brings that loop back to its inbox
    /// soon (`busyOn`). Decided and posted under the lock, which the loop's own files take to stop
    /// being busy: it either sees the work in its inbox afterwards or is woken for it.
    private func send(_ l: Int, here: Int, _ work: @escaping @Sendable () -> Void) {
        if l == here { return work() }
        lock.withLock { loops[l].post(work, wake: busyOn[l] == 0) }
    }

    /// Starts files while fewer than `parallelFiles` are in flight, each on the loop with the fewest.
    /// On two loops, a file whose turn it is takes its probe's slot here, in list order, when its
    /// host has one free: its loop then sends the probe at once, and the next file's turn has come
    /// without a pass of that loop (a turn handed from loop to loop a pass at a time made two loops
    /// slower than one); a probe started later takes a free slot at once too (`slotNowIfFree`). On
    /// one loop the turn passes as the loop grants the slots: taken early, the slots of 100 files of
    /// 4 MiB from a capped server made the batch 1.10 times as long (7 alternated runs; not
    /// explained yet).
    func startFiles(here: Int) {
        if batch.entries.isEmpty { return finish() }
        let begun = lock.withLock { () -> [Begun] in
            var begun: [Begun] = []
            while inFlight < inFlightCap && next < batch.entries.count {
                let k = next
                next += 1
                inFlight += 1
                // The loop with the fewest files, this one where it has no more than the others:
                // a file that takes the place of one that ended here costs no hand-over.
                let fewest = filesOn.min() ?? 0
                let l = filesOn.indices.contains(here) && filesOn[here] == fewest ? here : filesOn.firstIndex(of: fewest) ?? 0
                filesOn[l] += 1
                loopOf[k] = l
                var opts = batch.options(
                    for: batch.entries[k], lender: lender, hostBudget: hostBudget, startingNames: startingNames)
                if batch.speculative(inFlight: inFlight - 1) { opts.probeLimit = Batch.speculativeProbeBytes }
                // A file an earlier run finished needs no probe to be known (see `finishedEarlier`).
                let probes = batch.probes(opts) && !interrupt.isSet && !batch.finishedEarlier(k, options: opts, guesses: &guessedNames)
                var slot: ProbeSlot?
                if loops.count > 1 && k == turn && probes,
                    let taken = Download(url: batch.entries[k].url, options: opts).takeProbeSlot()
                {
                    slot = taken
                    advanceTurn(past: k, here: here)
                }
                begun.append(Begun(file: k, loop: l, options: opts, probes: probes, slot: slot))
            }
            return begun
        }
        for b in begun { send(b.loop, here: here) { [self] in begin(b) } }
    }

    /// A file dealt to a loop, with its options and, where it took one, its probe's slot.
    private struct Begun: Sendable {
        var file: Int
        var loop: Int
        var options: DownloadOptions
        var probes: Bool
        var slot: ProbeSlot?
    }

    /// File `k`: its probe (a request on its loop), when one is made, then its name.
    private func begin(_ b: Begun) {
        let (k, here, opts) = (b.file, b.loop, b.options)
        // The probe's failure is not reported here: the download counts it as its probe's first
        // attempt, and retries (after the wait it asks for) or ends with it.
        guard b.probes else {
            passTurn(k, here: here)
            return probed(k, Probed(options: opts, prepared: nil), here: here)
        }
        let fileLoop = loop(here)
        let probe = { @Sendable [self] in
            Download(url: batch.entries[k].url, options: opts).prepare(
                on: fileLoop, interrupt: interrupt, slot: b.slot, slotNowIfFree: loopCount > 1,
                onSlot: { [self] in passTurn(k, here: here) },
                onFileName: { [self] name in answered(k, serverName: name, options: opts) }
            ) { [self] result in
                passTurn(k, here: here)
                let failure: SeggetError? = if case .failure(let e) = result { e } else { nil }
                probed(k, Probed(options: opts, prepared: try? result.get(), failure: failure), here: here)
            }
        }
        let now = lock.withLock { () -> Bool in
            if b.slot != nil || k == turn {
                probing.insert(k)
                busyOn[here] += 1
                return true
            }
            turnWaiting[k] = (here, probe)
            return false
        }
        if now { probe() }
    }

    /// File `k`'s probe has its slot (or ended, or made none): the next file's probe may take one.
    private func passTurn(_ k: Int, here: Int) {
        let inline = lock.withLock { advanceTurn(past: k, here: here, inlineOnOneLoop: true) }
        inline?()
    }

    /// `passTurn`, under the lock: the turn moves past `k` and every file after it already past; the
    /// probe waiting for the turn that came, if any, is posted to its loop, even this one (no
    /// nesting of one file's turn in another's: its slot may be taken at once), while busyOn counts
    /// only what was there before it. The loop's own thread posts with no wake (`DownloadLoop.post`).
    @discardableResult
    private func advanceTurn(past k: Int, here: Int, inlineOnOneLoop: Bool = false) -> (@Sendable () -> Void)? {
        guard k >= turn else { return nil }
        // The file whose turn it is passes without a stop in the set: a run of one file allocates
        // none (a set's first use has the runtime build its generic type at run time).
        if k == turn { turn += 1 } else { turnPassed.insert(k) }
        while turnPassed.remove(turn) != nil { turn += 1 }
        guard let next = turnWaiting.removeValue(forKey: turn) else { return nil }
        probing.insert(turn)
        busyOn[next.loop] += 1
        // On one loop no slot is taken at once (`slotNowIfFree`), so the probe cannot pass the turn
        // on from inside this call: the caller starts it, after the lock, as before two loops.
        if inlineOnOneLoop && loops.count == 1 { return next.probe }
        loops[next.loop].post(next.probe, wake: next.loop == here || busyOn[next.loop] == 1)
        return nil
    }

    /// Paths are decided in list order, so a rerun picks the same names: whichever report completes
    /// the list's prefix decides it, and the files it decided whose probes ended go on, each on its
    /// own loop. A file reports when its probe ends, unless the head of the probe's answer reported
    /// already (`answered`); a file whose path was decided then goes on now.
    private func probed(_ k: Int, _ p: Probed, here: Int) {
        if p.prepared?.broughtWhole == true { addLoop() }
        let (decided, freed, more) = lock.withLock { () -> ([(file: Int, probed: Probed, loop: Int)], Bool, Bool) in
            if probing.remove(k) != nil { busyOn[here] -= 1 }
            learnProtocol(p.prepared?.info, whole: p.prepared?.broughtWhole == true, url: batch.entries[k].url)
            waiting[k] = p
            let decided = wished[k]
                ? takeWaiting(k < names.decided ? [k] : [])
                : wish(k, options: p.options, serverName: p.prepared?.info.suggestedFileName)
            // Whole in memory, waiting for an earlier file's name, it holds no connection: its place
            // goes to the next file, up to `parallelFiles` such (1 MiB each at most). Kept, 330 files
            // through 200 ms and 1 % loss idled a tenth of their places so (a late answer's timeout).
            let freed = waiting[k] != nil && p.prepared?.broughtWhole == true && p.options.mirrors.isEmpty
                && released.count < batch.parallelFiles
            if freed {
                released.insert(k)
                inFlight -= 1
            }
            return (decided, freed, next < batch.entries.count)
        }
        for (i, w, l) in decided { send(l, here: here) { [self] in named(i, w, here: l) } }
        // The place goes to the next file, or, with none left, its share is lent to those running.
        if freed && more {
            loop(here).steps.async { [self] in startFiles(here: here) }
        } else if freed {
            lender?.lend(batch.connectionsPerFile)
        }
    }

    /// The head of file `k`'s probe's answer gave the name the server wants for it, before the body
    /// came (on its loop's thread, in a pass): the file reports it now, so that its path and those
    /// of the files after it are decided while the bodies come, and each file goes on as soon as
    /// its probe ends. Reported only when the probe ended, 300 files of a batch over HTTP/2 (every
    /// body coming at once) waited for the slowest file before them, and then went on all at once.
    private func answered(_ k: Int, serverName: String, options: DownloadOptions) {
        let decided = lock.withLock { () -> [(file: Int, probed: Probed, loop: Int)] in
            guard !wished[k] else { return [] }
            return wish(k, options: options, serverName: serverName)
        }
        // Posted to the files' loops (this one's included: not from inside its pass).
        for (i, w, l) in decided { send(l, here: -1) { [self] in named(i, w, here: l) } }
    }

    /// Under the lock: file `k` reports the name it wants, once; the files this decides whose probes
    /// ended, taken from `waiting`.
    private func wish(_ k: Int, options: DownloadOptions, serverName: String?) -> [(file: Int, probed: Probed, loop: Int)] {
        wished[k] = true
        return takeWaiting(names.wish(batch.wish(k, options: options, serverName: serverName), for: k))
    }

    /// Under the lock: those of `files` whose probes ended, taken from `waiting`, with their loops.
    private func takeWaiting(_ files: some Sequence<Int>) -> [(file: Int, probed: Probed, loop: Int)] {
        files.compactMap { i in waiting.removeValue(forKey: i).map { (i, $0, loopOf[i]) } }
    }

    /// Whether file `k`, named, downloads now: where the batch multiplexes, a large file takes one
    /// of `places` (one whose probe asked for all of it, started while places were free, without
    /// waiting), or waits in `parked` for one.
    private func takesPlace(_ k: Int, _ p: Probed, here: Int) -> Bool {
        guard batch.multiplexes, Batch.isLarge(totalBytes: p.prepared?.info.totalBytes, whole: p.prepared?.broughtWhole == true) else { return true }
        return lock.withLock {
            inPlace.insert(k)
            guard p.options.probeLimit != nil else {
                places.enter()
                return true
            }
            if places.ask(k) { return true }
            parked[k] = (p, here)
            return false
        }
    }

    /// The most large downloads that ran at once (tests).
    var largeDownloadsPeak: Int { lock.withLock { places.peak } }

    /// Under the lock: what an answer says of the files at once (see `inFlightCap`) and, under
    /// `--max-connections-per-host`, of the requests at once to its host (see
    /// `Batch.requestsPerHostOverHTTP2`).
    private func learnProtocol(_ info: RemoteFileInfo?, whole: Bool, url: String) {
        guard multiplexing, let info else { return }
        if !info.overHTTP2 || Batch.isLarge(totalBytes: info.totalBytes, whole: whole) {
            multiplexing = false
            inFlightCap = batch.parallelFiles
            if batch.requestsPerHostOverHTTP2 != nil { hostBudget.dropHostCaps() }
        } else if let streams = batch.requestsPerHostOverHTTP2 {
            hostBudget.setCap(streams, forHostOf: url)
        }
    }

    /// File `k`, named: its download, on its loop (`placed`: it has its place among the large).
    private func named(_ k: Int, _ p: Probed, here: Int, placed: Bool = false) {
        guard placed || takesPlace(k, p, here: here) else { return }
        let entry = batch.entries[k]
        let id = k + 1
        let path = lock.withLock { names.path(of: k) }
        let ready = batch.ready(
            k, path: path, options: p.options, info: p.prepared?.info, reporter: reporter, interrupt: interrupt,
            knownDirectory: { dir in self.lock.withLock { self.directories.contains(dir) } },
            noteDirectory: { dir in self.lock.withLock { _ = self.directories.insert(dir) } })
        switch ready {
        case .ended(let outcome):
            ended(k, outcome, here: here)
        case .run(let opts):
            lock.withLock { busyOn[here] += 1 }
            let reporter = reporter
            var progress: (@Sendable (DownloadProgress) -> Void)?
            if reporter.wantsProgress { progress = { reporter.progress(id: id, $0) } }
            Download(url: entry.url, options: opts).run(
                on: loop(here), progress: progress, events: { reporter.event(id: id, $0) },
                interrupt: interrupt, prepared: p.prepared, probeFailed: p.failure
            ) { [self] result in
                switch result {
                case .success(let r):
                    reporter.finished(id: id, url: entry.url, r)
                    ended(k, Outcome(id: id, url: entry.url, path: r.path, status: .done(r)), here: here, ranDownload: true)
                case .failure(let e):
                    reporter.failed(id: id, url: entry.url, path: path, e)
                    ended(k, Outcome(id: id, url: entry.url, path: path, status: .failed(e)), here: here, ranDownload: true)
                }
            }
        }
    }

    /// File `k` ended: the next file takes its place, or, with none left, its share of the budget is
    /// lent to the files still running.
    private func ended(_ k: Int, _ outcome: Outcome, here: Int, ranDownload: Bool = false) {
        let (more, last, placed, wasReleased) = lock.withLock { () -> (Bool, Bool, [(Int, Probed, Int)], Bool) in
            if ranDownload { busyOn[here] -= 1 }
            let placed = inPlace.remove(k) == nil ? [] : places.release().compactMap { i in
                parked.removeValue(forKey: i).map { (i, $0.probed, $0.loop) }
            }
            outcomes[k] = outcome
            let wasReleased = released.remove(k) != nil
            if !wasReleased { inFlight -= 1 }
            filesOn[loopOf[k]] -= 1
            let more = next < batch.entries.count
            return (more, inFlight == 0 && released.isEmpty && !more, placed, wasReleased)
        }
        for (i, p, l) in placed { send(l, here: here) { [self] in named(i, p, here: l, placed: true) } }
        if more {
            // Later, not from inside this file's ending (a long list of files that end at once
            // would otherwise nest as deep as it is long).
            loop(here).steps.async { [self] in startFiles(here: here) }
        } else if !wasReleased {  // a place given back lends nothing: the file that took it holds its share
            lender?.lend(batch.connectionsPerFile)
        }
        if last { finish() }
    }

    /// A loop more, on a thread of its own, while the run has fewer than `loopLimit`; from then on
    /// every loop saves its whole files itself. Without a thread the run goes on with its loops.
    private func addLoop() {
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        let check = lock.withLock { () -> Bool in
            guard !adding, loops.count < loopLimit, !isFinished, now - lastLoadCheck >= Self.loadCheckInterval else { return false }
            lastLoadCheck = now
            adding = true
            return true
        }
        guard check else { return }
        guard loopBusy(lock.withLock { loops[0] }), cpuFree() else { return lock.withLock { adding = false } }
        let first = lock.withLock { () -> DownloadLoop in
            threadsRunning += 1
            return loops[0]
        }
        let loop = DownloadLoop(stepsOnLoop: true, wholeSavesOnWriters: false, http2Sharing: batch.http2Sharing(loops: loopLimit))
        // The first loop's files move over as they end: each loop keeps its part of the
        // connections, so the two keep no more open than the first did.
        let share = max(4, 16 / loopLimit)
        loop.keepConnections(share)
        first.keepConnections(share)
        do {
            try SystemThread.detach { [self] in
                loop.run(until: { self.isFinished })
                lock.withLock {
                    threadsRunning -= 1
                    lock.broadcast()
                }
            }
        } catch {
            return lock.withLock {
                adding = false
                threadsRunning -= 1
                lock.broadcast()
            }
        }
        first.wholeSavesOnWriters = false
        lock.withLock {
            loops.append(loop)
            filesOn.append(0)
            busyOn.append(0)
            adding = false
        }
        // A run that ended meanwhile does not wait a poll's length for the new loop to notice.
        if isFinished { loop.post {} }
    }

    private func finish() {
        finished.store(true, ordering: .releasing)
        for loop in lock.withLock({ loops }) { loop.post {} }
    }
}

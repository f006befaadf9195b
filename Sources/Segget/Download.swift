import Dispatch
import SeggetCurl
import SeggetJournal
import SeggetSystem
import SeggetVerify

/// One file to fetch: probe, plan, fetch over parallel ranges, verify, and publish atomically.
///
/// The data lives in `NAME.segget-part` beside the target and a journal in `NAME.segget-journal`
/// records finished chunks, so that running the same download again (after Ctrl-C, `kill -9`, a
/// crash or a power cut) continues where it stopped. The file appears under its final name only
/// when it is complete and verified.
///
/// One attempt is a short pipeline: probe → open the partial download (``PartialDownload``) → fetch →
/// verify → publish. An attempt that learns the download must start over returns a restart
/// (``DownloadRestart``) and ``AttemptPlan`` decides what the next attempt does.
public final class Download: @unchecked Sendable {
    public let url: String
    public let options: DownloadOptions

    public init(url: String, options: DownloadOptions = DownloadOptions()) {
        self.url = url
        self.options = options
    }

    /// Runs the download on the calling thread and returns when the file is in place.
    ///
    /// It is a `DownloadLoop` of one, run on the calling thread: the same probe, attempts, restarts,
    /// renewals and engine as every download of a batch or of the daemon.
    ///
    /// - Parameters:
    ///   - progress: called on the download thread a few times a second.
    ///   - events: notices, retries and re-dials, on the download thread or the loop's steps queue.
    ///   - interrupt: set it from anywhere to stop; the journal is saved and `.interrupted` thrown.
    public func run(
        progress: (@Sendable (DownloadProgress) -> Void)? = nil,
        events: (@Sendable (DownloadEvent) -> Void)? = nil,
        interrupt: InterruptFlag = InterruptFlag()
    ) throws(SeggetError) -> DownloadResult {
        let loop = DownloadLoop(stepsOnLoop: true)
        let outcome = LoopOutcome<DownloadResult>()
        run(on: loop, progress: progress, events: events, interrupt: interrupt) { result in
            outcome.set(result)
            loop.post {}
        }
        loop.run(until: { outcome.isSet })
        return try outcome.get()
    }

    /// What every attempt of one `run` shares.
    struct AttemptContext {
        let started: Double
        let progress: (@Sendable (DownloadProgress) -> Void)?
        let events: (@Sendable (DownloadEvent) -> Void)?
        let interrupt: InterruptFlag
        /// This run's slots in its host's budget.
        var hostShare: HostShare? = nil
    }

    // MARK: One attempt

    /// The part of an attempt between the probe and the fetch: names the file, saves one the probe
    /// brought whole, opens the partial download (resuming when the journal and data agree with the
    /// server), starts the hasher and sets up the engine, on `driver` (a `DownloadLoop`'s).
    func beginFetch(
        _ plan: AttemptPlan, probe: ProbeResult, mirrors: [FetchSource], deadline: Deadline?, driver: TransferDriver,
        whole: WholeSaving = .here, metalink: MetalinkFacts = MetalinkFacts(), _ context: AttemptContext
    ) throws(SeggetError) -> AttemptStart {
        var probe = probe
        let events = context.events
        // The URL the journal records: this attempt's, a renewed link once the first one expired; for
        // a mirror standing in, the main URL (the download is the main URL's, and a rerun with it back
        // finds it finished or continues it).
        let url = isStandIn(plan) ? self.url : plan.url ?? self.url
        // A probe transfer held for the fetch ends with the attempt unless the fetch continued it.
        let held = probe.held
        var handedOn = false
        defer {
            if !handedOn {
                // Ended mid-answer unless the fetch continued it: the server counts it a moment longer.
                held?.release(counting: context.hostShare)
            }
        }
        let final: String
        if let pinned = plan.outputPath { final = pinned } else { final = try outputPath(probe: standInNamed(probe, plan)) }
        let paths = PartialDownload.Paths(final: final)
        try refuseSpecialFile(at: final)
        try refuseDirectory(at: final)
        try refuseSideFileName(final)
        if let old = adoptRenamedPartial(paths: paths, url: url, probe: probe, plan: plan) {
            // The probe looked for side files under the new name only; there are some now.
            probe.absent = AbsentSideFiles()
            events?(.notice("an earlier run of this URL saved its partial download as \(old); the server now names the file \(paths.final), so it continues under that name."))
        }
        let expected = expectedDigests(probe) + metalink.digests.filter { d in !options.checksums.contains { $0.algorithm == d.algorithm } }
        let ranged = probe.acceptsRanges && probe.totalLength != nil && !plan.stream
        if let size = options.expectedLength, let total = probe.totalLength, total != size {
            throw SeggetError(.protocolViolation, "\(URLParts.shown(probe.finalURL)) serves \(total) bytes, but the Metalink says the file has \(size); it is not the file the Metalink describes. Try another of its URLs.", retryAdvice: .never)
        }
        let pieces = ranged ? (options.pieces ?? metalink.pieces).flatMap { p in probe.totalLength.flatMap { p.fits(size: $0) ? p : nil } } : nil
        if whole != .never, metalink.pieces == nil, let save = try wholeSave(probe: probe, paths: paths, expected: expected, deadline: deadline, context) {
            if whole == .elsewhere { return .saveWhole(save) }
            if let result = try save.save() {
                reportProbeBroughtEverything(total: save.total, received: save.total, connections: options.connections, context)
                return .finished(.finished(result))
            }
        }
        let finalExists = try checkOutputPath(paths.final)
        if !options.force, finalExists, let size = try finishedByAnEarlierRun(paths: paths, url: url, probe: probe, expected: expected, standIn: isStandIn(plan) ? plan.url : nil) {
            events?(.notice("\(paths.final) was already completed by an earlier run."))
            var result = DownloadResult(
                path: paths.final, bytes: size, resumedBytes: size, receivedBytes: 0, seconds: 0,
                connections: 0, verified: [], usedRanges: probe.acceptsRanges)
            result.finishedEarlier = true
            return .finished(.finished(result))
        }
        if finalExists && !options.force {
            let advice = options.ofDaemon
                ? "the daemon never overwrites a file: remove it, or give the task another name (the out option)."
                : options.ofList
                ? "pass --skip-existing to count the files already on disk as done (a list run again after it stopped), --force to overwrite them, or give the file another name (out= in an input file)."
                : "pass --force to overwrite it, or -o to choose another name."
            if !options.ofDaemon, FinishedMark.finishedFromAnotherURL(at: paths.final, url: url) {
                // The mark names another URL (another file, or this one's link signed again or
                // renewed): counting it done (--skip-existing) may keep the wrong bytes.
                throw SeggetError(.fileSystem, "\(paths.final) already exists, finished by an earlier segget run from a URL other than this one (another file, or the same file under a link since signed again); pass --force to download it again from this URL, or give this one another name (\(options.ofList ? "out= in an input file" : "-o")).")
            }
            throw SeggetError(.fileSystem, "\(paths.final) already exists; \(advice)")
        }
        if !ranged, let why = probe.noRangesReason {
            events?(.notice("\(why); downloading over one connection from the start."))
        }

        // Open the partial download: resume when the journal and data agree with the server, else start over.
        // With piece hashes, chunks line up with pieces (see `PiecePlan`).
        let chunkSize = pieces.map { PiecePlan.chunkSize(pieceLength: $0.length, requested: options.chunkSize) } ?? options.chunkSize
        let partial = try PartialDownload.open(
            paths: paths, url: url, probe: probe, ranged: ranged, fresh: plan.fresh, chunkSize: chunkSize,
            mustResume: plan.mustResume, standIn: isStandIn(plan) ? plan.url : nil,
            sameFile: SameFileEvidence(urls: [self.url] + options.mirrors, bytesChecked: !expected.isEmpty || pieces != nil),
            events: events)
        var hasher: PrefixHasher?
        defer {
            if !handedOn {
                hasher?.cancel()
                partial.close()
            }
        }
        let chunks = ChunkPlan(totalLength: probe.totalLength ?? 0, chunkSize: partial.chunkSize)
        let resumedBytes = partial.resumedBytes(plan: chunks)
        if resumedBytes > 0 {
            events?(.notice("resuming: \(Format.bytes(resumedBytes)) of \(Format.bytes(chunks.totalLength)) already downloaded."))
        }
        if ranged, let idle = Self.connectionsWithoutWork(
            left: chunks.totalLength - resumedBytes, chunkSize: partial.chunkSize, connections: options.connections)
        {
            events?(.notice("chunks of \(Format.bytes(partial.chunkSize)) cut the \(Format.bytes(chunks.totalLength - resumedBytes)) left into \(idle.chunks), so \(idle.chunks) of the \(options.connections) connections have work (a chunk is one connection's; a smaller chunk size spreads the file over more)."))
        }
        // Without ranges, the probe's answer is the whole file's: where it was held, the fetch's
        // stream continues it after the bytes it brought (see `FetchEngine.continueProbe`).
        let streamContinues = !ranged && partial.isNew && probe.held?.isSettled == false
        if ranged { try partial.placeProbePrefix(probe.prefix, plan: chunks) }
        if streamContinues { try partial.placeStreamPrefix(probe.prefix) }
        hasher = try makeHasher(for: expected, partial: partial)
        // With piece hashes the whole-file hash takes only bytes whose piece matched, read back
        // from the file: bytes from memory may be a bad mirror's, fetched again later.
        if let hasher, partial.isNew, ranged || streamContinues, !probe.prefix.isEmpty, pieces == nil {
            hasher.offer(probe.prefix, at: 0)
        }
        let probeBytes = ranged || streamContinues ? Int64(probe.prefix.count) : 0
        let probeReceived = probe.prefix.count
        probe.prefix = []  // in the file now, and the hasher's until it hashed them

        let start = makeFetch(
            probe: probe, probeReceived: probeReceived, ranged: ranged, mirrors: mirrors, partial: partial, plan: chunks,
            hasher: hasher, driver: driver, deadline: deadline, pieces: pieces, context)
        handedOn = true
        let stage = FetchStage(
            probe: probe, paths: paths, expected: expected, ranged: ranged, partial: partial, plan: chunks,
            resumedBytes: resumedBytes, probeBytes: probeBytes, hasher: hasher, start: start, hostShare: context.hostShare)
        // A stand-in's validators are its own server's words for the file, not the main URL's.
        stage.serverVersion = isStandIn(plan) ? nil : FinishedMark.version(of: probe, url: url)
        return .fetch(stage)
    }

    /// The rest of an attempt once its engine stopped (with `failure`, or nil when every byte is in
    /// the file): verify, then publish. The caller closes `stage` after.
    func endFetch(_ stage: FetchStage, failure: (any Error)?, _ context: AttemptContext) throws(SeggetError) -> AttemptOutcome {
        let fetched: Fetched
        switch stage.start {
        case .fetched(let f):
            fetched = f
        case .engine(let engine, let started):
            switch try fetchEnded(engine, failure: failure, started: started, stage: stage) {
            case .restart(.linkExpired(var expired)):
                expired.resumedAtStart = stage.resumedBytes
                return .restart(.linkExpired(expired), spent: engine.spent)
            case .restart(let restart):
                // From zero: what the attempt received (the probe's bytes in the file too) is fetched again.
                return .restart(restart, spent: engine.spent, thrownAway: engine.receivedBytes + stage.probeBytes)
            case .fetched(let result): fetched = result
            }
        }
        let partial = stage.partial
        // Verify before the file gets its final name. The data sync runs meanwhile: it waits on the
        // disk while the hash tail uses the CPU.
        let earlySync = stage.hasher != nil && options.syncBeforeRename ? partial.syncInBackground() : nil
        defer { earlySync?.wait() }
        let verified = try verify(hasher: stage.hasher, expected: stage.expected, length: fetched.length, partial: partial, probe: stage.probe, sources: fetched.sources)
        let hashing = stage.hasher?.statistics
        if let hashing { traceHashing(hashing, length: fetched.length) }

        // Publish: rename into place and drop the journal; with --fsync, sync before and the directory after.
        try partial.publish(syncing: options.syncBeforeRename, replacing: options.force, mark: (url, verified, stage.serverVersion))
        // A resumed file's probe bytes were not written (its first chunk is usually done): received,
        // not needed. So `receivedBytes - refetchedBytes == bytes - resumedBytes` holds in every case.
        var tally = fetched.tally
        if !partial.isNew { tally.refetchedBytes += stage.probeBytes }
        var result = DownloadResult(
            path: stage.paths.final, bytes: fetched.length, resumedBytes: stage.resumedBytes - fetched.rejectedBytes,
            receivedBytes: fetched.receivedBytes + stage.probeBytes, seconds: monotonicSeconds() - fetched.started,
            connections: fetched.connections, verified: verified, usedRanges: stage.ranged, tally: tally,
            hashing: hashing, pieces: stage.engine?.pieceChecks?.report)
        result.servedAtOnce = fetched.servedAtOnce
        return .finished(result)
    }

    /// What a Metalink adds to an attempt that the download's options do not have: the piece hashes
    /// and digests of a Metalink that the first answer pointed to (Metalink/HTTP).
    struct MetalinkFacts: Sendable {
        var pieces: PieceHashes?
        var digests: [ExpectedDigest] = []
    }

    /// Where each of `expectedDigests(probe)` (and a Metalink's) came from, for a mismatch's message.
    func digestOrigin(_ probe: ProbeResult) -> DigestOrigin {
        DigestOrigin(given: options.checksums, reprDigest: probe.reprDigest, digest: probe.digest, contentMD5: probe.contentMD5)
    }

    /// The digests to check: those the user gave, then those the server announced for algorithms the
    /// user did not name (with `verifyServerDigests`).
    func expectedDigests(_ probe: ProbeResult) -> [ExpectedDigest] {
        var expected = options.checksums
        if options.verifyServerDigests {
            for d in ServerDigests.parse(reprDigest: probe.reprDigest, digest: probe.digest, contentMD5: probe.contentMD5)
            where !expected.contains(where: { $0.algorithm == d.algorithm }) {
                expected.append(d)
            }
        }
        return expected
    }

    /// Where a chunk size above the default leaves some of `connections` without work from the
    /// start: a chunk is one connection's work, and `left` bytes make fewer chunks than connections.
    /// (The idle ones race no chunk blindly: see `Coordinator`'s racer rate.) Nil otherwise, and for
    /// the default chunk size, where only a small file does that.
    public static func connectionsWithoutWork(left: Int64, chunkSize: Int64, connections: Int) -> (chunks: Int, idle: Int)? {
        guard chunkSize > DownloadOptions().chunkSize, left > 0, chunkSize > 0 else { return nil }
        let chunks = Int((left + chunkSize - 1) / chunkSize)
        return chunks < connections ? (chunks, connections - chunks) : nil
    }

}

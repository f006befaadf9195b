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
    /// - Parameters:
    ///   - progress: called on the download thread a few times a second.
    ///   - events: notices, retries and re-dials, on the download thread.
    ///   - interrupt: set it from anywhere to stop; the journal is saved and `.interrupted` thrown.
    ///   - prepared: what ``prepare(pool:)`` learnt about this URL moments ago: the first attempt
    ///     starts from it instead of probing again (restarts probe afresh).
    ///   - pool: kept-alive connections to reuse, and to leave for the next download on this thread.
    public func run(
        progress: (@Sendable (DownloadProgress) -> Void)? = nil,
        events: (@Sendable (DownloadEvent) -> Void)? = nil,
        interrupt: InterruptFlag = InterruptFlag(),
        prepared: PreparedDownload? = nil,
        pool: ConnectionPool? = nil
    ) throws(SeggetError) -> DownloadResult {
        guard (1...128).contains(options.connections) else {
            throw SeggetError(.usage, "the number of connections must be between 1 and 128 (got \(options.connections)).")
        }
        guard options.chunkSize >= 16 * 1024 && options.chunkSize <= 1 << 30 else {
            throw SeggetError(.usage, "the chunk size must be between 16 KiB and 1 GiB.")
        }
        var prepared = prepared?.url == url ? prepared : nil
        // The probe's slot in the host's budget, if it prepared, stays held for the first range.
        let share = prepared?.hostShare ?? options.hostBudget?.share(for: url)
        defer { share?.sync(inFlight: 0) }
        let context = AttemptContext(
            started: monotonicSeconds(), pool: pool, progress: progress, events: events, interrupt: interrupt,
            hostShare: share)
        var plan = AttemptPlan(fresh: !options.resume)
        var renewals = RenewalCount()
        // Before the first renewal: what the run found on disk, and what earlier attempts received.
        var resumedAtStart: Int64?
        var receivedBefore: Int64 = 0
        while true {
            let outcome = try attempt(plan, prepared: prepared, context)
            prepared = nil
            switch outcome {
            case .finished(var result):
                if let resumedAtStart {
                    // The whole run, not its last attempt.
                    result.resumedBytes = resumedAtStart
                    result.receivedBytes += receivedBefore
                    result.seconds = monotonicSeconds() - context.started
                }
                return result
            case .restart(.linkExpired(var expired)):
                // A new link of the same file, proven before the next attempt resumes from the journal.
                expired.url = plan.url ?? url
                if resumedAtStart == nil { resumedAtStart = expired.resumedAtStart }
                receivedBefore += expired.receivedBytes
                let renewed = try renew(expired, count: &renewals, context)
                plan = plan.renewed(url: renewed.url, outputPath: expired.outputPath)
                prepared = renewed
            case .restart(let restart):
                let (next, notice) = try plan.next(after: restart)
                events?(.notice(notice))
                plan = next
            }
        }
    }

    /// What every attempt of one `run` shares.
    struct AttemptContext {
        let started: Double
        let pool: ConnectionPool?
        let progress: (@Sendable (DownloadProgress) -> Void)?
        let events: (@Sendable (DownloadEvent) -> Void)?
        let interrupt: InterruptFlag
        /// This run's slots in its host's budget.
        var hostShare: HostShare? = nil
    }

    // MARK: One attempt

    private func attempt(
        _ plan: AttemptPlan, prepared: PreparedDownload?, _ context: AttemptContext
    ) throws(SeggetError) -> AttemptOutcome {
        let events = context.events
        // The URL of this attempt: a renewed link once the first one expired.
        let url = plan.url ?? self.url
        // Probe. One multi handle for the probe and the fetch: the probe's connection is kept alive for
        // the first range instead of a new one being opened.
        let multi = prepared?.multi ?? context.pool?.multi ?? MultiHandle()
        let deadline = options.timeout.map { Deadline(limit: $0, from: context.started) }
        var probe: ProbeResult
        if let prepared {
            probe = prepared.probe
        } else {
            let ask = probeBytes(fresh: plan.fresh, stream: plan.stream)
            if let share = context.hostShare, !share.waitForSlot(interrupt: context.interrupt) {
                throw SeggetError(.interrupted, "interrupted")
            }
            do {
                probe = try probeWithRetries(
                    url: url, multi: multi, firstBytes: ask.bytes, deadline: deadline, events: events,
                    interrupt: context.interrupt, hostShare: context.hostShare)
            } catch {
                // A rerun of a download whose link expired: renew it as if it had expired now.
                if let expired = expiredBeforeStart(error, plan: plan, url: url) { return .restart(.linkExpired(expired)) }
                throw error
            }
            probe.noJournalAt = ask.noJournalAt
        }
        switch try beginFetch(plan, probe: probe, deadline: deadline, driver: nil, multi: multi, context) {
        case .finished(let outcome):
            return outcome
        case .fetch(let stage):
            defer { stage.close() }
            var failure: (any Error)?
            if let engine = stage.engine {
                do { try engine.run() } catch { failure = error }
            }
            return try endFetch(stage, failure: failure, context)
        }
    }

    /// The part of an attempt between the probe and the fetch: names the file, saves one the probe
    /// brought whole, opens the partial download (resuming when the journal and data agree with the
    /// server), starts the hasher and sets up the engine, on `driver` when given (a `DownloadLoop`'s).
    func beginFetch(
        _ plan: AttemptPlan, probe: ProbeResult, deadline: Deadline?, driver: TransferDriver?, multi: MultiHandle,
        _ context: AttemptContext
    ) throws(SeggetError) -> AttemptStart {
        var probe = probe
        let events = context.events
        // The URL of this attempt: a renewed link once the first one expired.
        let url = plan.url ?? self.url
        // A probe transfer held for the fetch ends with the attempt unless the fetch continued it.
        let held = probe.held
        var handedOn = false
        defer {
            if !handedOn {
                // Ended mid-answer unless the fetch continued it: the server counts it a moment longer.
                if held?.isSettled == false { context.hostShare?.cancelled(1) }
                held?.release()
            }
        }
        let final: String
        if let pinned = plan.outputPath { final = pinned } else { final = try outputPath(probe: probe) }
        let paths = PartialDownload.Paths(final: final)
        let expected = expectedDigests(probe)
        let ranged = probe.acceptsRanges && probe.totalLength != nil && !plan.stream
        if let whole = try publishWhole(probe: probe, ranged: ranged, paths: paths, expected: expected, deadline: deadline, context) {
            return .finished(.finished(whole))
        }
        let finalExists = try checkOutputPath(paths.final)
        if !options.force, finalExists, let size = PartialDownload.finishedEarlier(paths: paths, url: url) {
            events?(.notice("\(paths.final) was already completed by an earlier run."))
            return .finished(.finished(DownloadResult(
                path: paths.final, bytes: size, resumedBytes: size, receivedBytes: 0, seconds: 0,
                connections: 0, verified: [], usedRanges: probe.acceptsRanges)))
        }
        if finalExists && !options.force {
            throw SeggetError(.fileSystem, "\(paths.final) already exists; pass --force to overwrite it, or -o to choose another name.")
        }
        if !ranged, let why = probe.noRangesReason {
            events?(.notice("\(why); downloading over one connection from the start."))
        }

        // Open the partial download: resume when the journal and data agree with the server, else start over.
        let partial = try PartialDownload.open(
            paths: paths, url: url, probe: probe, ranged: ranged, fresh: plan.fresh, chunkSize: options.chunkSize,
            mustResume: plan.mustResume, events: events)
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
        if ranged { try partial.placeProbePrefix(probe.prefix, plan: chunks) }
        hasher = try makeHasher(for: expected, partial: partial)
        if let hasher, partial.isNew, ranged, !probe.prefix.isEmpty {
            probe.prefix.withUnsafeBytes { hasher.offer($0, at: 0) }
        }
        probe.prefix = []  // in the file (and the hasher) now; give the memory back

        let start = makeFetch(
            probe: probe, ranged: ranged, partial: partial, plan: chunks, hasher: hasher, multi: multi, driver: driver,
            deadline: deadline, context)
        handedOn = true
        return .fetch(FetchStage(
            probe: probe, paths: paths, expected: expected, ranged: ranged, partial: partial, plan: chunks,
            resumedBytes: resumedBytes, hasher: hasher, start: start, hostShare: context.hostShare))
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
                return .restart(.linkExpired(expired))
            case .restart(let restart): return .restart(restart)
            case .fetched(let result): fetched = result
            }
        }
        let partial = stage.partial
        // Verify before the file gets its final name. The data sync runs meanwhile: it waits on the
        // disk while the hash tail uses the CPU.
        let earlySync = stage.hasher != nil && options.syncBeforeRename ? partial.syncInBackground() : nil
        defer { earlySync?.wait() }
        let verified = try verify(hasher: stage.hasher, expected: stage.expected, length: fetched.length, partial: partial)

        // Publish: rename into place and drop the journal; with --fsync, sync before and the directory after.
        try partial.publish(syncing: options.syncBeforeRename)
        return .finished(DownloadResult(
            path: stage.paths.final, bytes: fetched.length, resumedBytes: stage.resumedBytes - fetched.rejectedBytes,
            receivedBytes: fetched.receivedBytes, seconds: monotonicSeconds() - fetched.started,
            connections: fetched.connections, verified: verified, usedRanges: stage.ranged))
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
}

import Dispatch
import SeggetCurl
import SeggetSystem

/// Used by one thread at a time: made on a `DownloadLoop`'s steps queue, run on its loop thread,
/// read once more on the steps queue after the loop is done with it.
extension FetchEngine: @unchecked Sendable {}

extension Download {
    /// Probes like ``probe()`` (one attempt, no retries) but asks for the file's first chunk too and
    /// keeps everything for ``run(on:progress:events:interrupt:prepared:completion:)``: a request on `loop` beside its other downloads, without a thread of its own. `completion` is
    /// called once, on the loop's steps queue.
    ///
    /// With a `hostBudget`, it waits (on the loop, without blocking it) for a slot of its host first,
    /// until `interrupt` is set, and calls `onSlot` on the loop thread once it has one, before the
    /// request goes out.
    ///
    /// With a `slot` (``takeProbeSlot()``), the probe has its slot already: it goes out at once, and
    /// `onSlot` is not called. With `slotNowIfFree`, a slot free at once is taken before `prepare`
    /// returns, and `onSlot` is called then, on the calling thread (a batch on two loops: the next
    /// file's probe, maybe on the other loop, need not wait for a pass of this one; see `LoopRun`).
    ///
    /// `onFileName` hears, on the loop thread and at most once, the file name the server's answer
    /// gives (`RemoteFileInfo.suggestedFileName`) as soon as the answer's head is in, before its
    /// body: a batch decides its paths from it while the bodies still come (see `LoopRun`). Not
    /// called for an answer that is not the file's (an error, a redirect), nor after `completion`.
    public func prepare(
        on loop: DownloadLoop, interrupt: InterruptFlag = InterruptFlag(), slot: ProbeSlot? = nil,
        slotNowIfFree: Bool = false, onSlot: (@Sendable () -> Void)? = nil,
        onFileName: (@Sendable (String) -> Void)? = nil,
        completion: @escaping @Sendable (Result<PreparedDownload, SeggetError>) -> Void
    ) {
        let began = monotonicSeconds()
        let deadline = options.timeout.map { Deadline(limit: $0, from: began) }
        let ask = probeBytes(fresh: !options.resume, stream: false)
        let share = slot.map(\.share) ?? options.hostBudget?.share(for: url)
        let warmUp = warmUp(probeBytes: ask.bytes, slotHeld: slot != nil)
        // After the warm-up's look at the slots the host's other downloads hold, not before.
        let slotNow = slotNowIfFree && slot == nil && !interrupt.isSet
            && share?.reserveFirst() == true
        let held = slot != nil || slotNow
        let onLoopSlot: (@Sendable () -> Void)? = held ? nil : onSlot
        loop.post { [self] in
            loop.probe(
                self, firstBytes: ask.bytes, deadline: deadline, retrying: false, events: nil, interrupt: interrupt,
                hostShare: share, slotHeld: held, warmUp: warmUp, onSlot: onLoopSlot, onFileName: onFileName
            ) { result in
                let result = result.mapError { e in
                    var e = e
                    e.takenForHostLimit = self.refusedByHost(e, share: share)
                    return e
                }
                let prepared = result.map { p in
                    var p = p
                    p.absent = ask.absent
                    return PreparedDownload(url: self.url, probe: p, hostShare: share, startedAt: began)
                }
                loop.steps.async { completion(prepared) }
            }
        }
        if slotNow { onSlot?() }
    }

    /// Takes a slot in the host's budget for this download's probe now, if one is free; nil where
    /// the probe must wait for one (on its loop, in turn). Without a budget, a slot that holds
    /// nothing. For a batch that takes its files' slots in list order as it starts them (`LoopRun`),
    /// whichever loop then sends the probe.
    public func takeProbeSlot() -> ProbeSlot? {
        guard let budget = options.hostBudget else { return ProbeSlot(share: nil) }
        let share = budget.share(for: url)
        guard share.reserveFirst() else { return nil }
        return ProbeSlot(share: share)
    }

    /// Sends one probing request as ``probe()`` does, as a request on `loop` beside its other
    /// downloads. `completion` is called once, on the loop's steps queue.
    public func probe(on loop: DownloadLoop, completion: @escaping @Sendable (Result<RemoteFileInfo, SeggetError>) -> Void) {
        loop.post { [self] in
            loop.probe(self, firstBytes: 1, deadline: nil, retrying: false, events: nil, interrupt: InterruptFlag()) { result in
                let info = result.map { RemoteFileInfo($0, url: self.url) }
                loop.steps.async { completion(info) }
            }
        }
    }

    /// Runs the download with its attempts, restarts and renewals on `loop`: its requests beside the other downloads
    /// there (sharing their connections), its blocking steps on the loop's steps queue. Returns at
    /// once; `completion` is called once, on the steps queue. `progress` and `events` are called on
    /// the loop thread, or on the steps queue.
    public func run(
        on loop: DownloadLoop,
        progress: (@Sendable (DownloadProgress) -> Void)? = nil,
        events: (@Sendable (DownloadEvent) -> Void)? = nil,
        interrupt: InterruptFlag = InterruptFlag(),
        prepared: PreparedDownload? = nil,
        probeFailed: SeggetError? = nil,
        completion: @escaping @Sendable (Result<DownloadResult, SeggetError>) -> Void
    ) {
        guard (1...128).contains(options.connections) else {
            let e = SeggetError(.usage, "the number of connections must be between 1 and 128 (got \(options.connections)).")
            return loop.steps.async { completion(.failure(e)) }
        }
        guard options.chunkSize >= 16 * 1024 && options.chunkSize <= 1 << 30 else {
            let e = SeggetError(.usage, "the chunk size must be between 16 KiB and 1 GiB.")
            return loop.steps.async { completion(.failure(e)) }
        }
        let prepared = prepared?.url == url ? prepared : nil
        // The probe's slot in the host's budget, if it prepared, stays held for the first range.
        let share = prepared?.hostShare ?? options.hostBudget?.share(for: url)
        let context = AttemptContext(
            // From the first look at the file where one was made (`prepare`), failed or not.
            started: prepared?.startedAt ?? probeFailed?.probeStartedAt ?? monotonicSeconds(), progress: progress, events: events, interrupt: interrupt,
            hostShare: share)
        attempts(
            AttemptPlan(fresh: !options.resume), prepared: prepared, probeFailed: prepared == nil ? probeFailed : nil, on: loop,
            context, LoopRenewals()
        ) { result in
            share?.sync(inFlight: 0)
            completion(result)
        }
    }

    /// Attempts from `plan` on, each restart probing afresh (a link that expired renewed first),
    /// until one finishes or fails.
    private func attempts(
        _ plan: AttemptPlan, prepared: PreparedDownload?, probeFailed: SeggetError? = nil, on loop: DownloadLoop,
        _ context: AttemptContext, _ renewals: LoopRenewals,
        completion: @escaping @Sendable (Result<DownloadResult, SeggetError>) -> Void
    ) {
        attempt(plan, prepared: prepared, probeFailed: probeFailed, on: loop, context) { [self] plan, outcome in
            switch outcome {
            case .failure(let e):
                let failed = plan.url ?? url
                if let next = nextSource(after: plan, failed: failed, error: e) {
                    // Its bytes stay in the file for the next source (resumed there): its requests
                    // count, not as bytes fetched twice.
                    var spent = e.spent ?? RequestTally()
                    spent.refetchedBytes = 0
                    renewals.earlier.add(spent)
                    let why = e.message.hasSuffix(".") ? String(e.message.dropLast()) : e.message
                    let whose = options.expectedLength != nil ? "the Metalink's URL" : failed == url ? "the URL" : "the mirror"
                    let then = options.expectedLength != nil ? "trying its next URL," : next == url ? "trying the main URL again, with its retries," : "trying the mirror"
                    context.events?(.notice("\(whose) \(URLParts.shown(failed)) failed (\(why)); \(then) \(URLParts.shown(next))."))
                    return attempts(plan.trying(next, after: failed), prepared: nil, on: loop, context, renewals, completion: completion)
                }
                // The whole run's cost: the attempts before this one's too.
                completion(.failure(renewals.earlier.onto(e)))
            case .success(.finished(var result)):
                renewals.earlier.onto(&result)
                if let resumedAtStart = renewals.resumedAtStart {
                    // The whole run, not its last attempt.
                    result.resumedBytes = resumedAtStart
                    result.receivedBytes += renewals.receivedBefore
                }
                // The whole run: from its first request (a first look made before it, a probe and
                // its retries' waits) to its end. The fetch's own time alone said "saved in 0.0 s,
                // 310 MiB/s" after 6 s of a 503's Retry-After.
                if result.seconds > 0 || result.receivedBytes > 0 { result.seconds = monotonicSeconds() - context.started }
                completion(.success(result))
            case .success(.restart(let restart, var spent, _)) where isStandIn(plan):
                // Kept as it was for the next source (resumed there), not thrown away.
                spent.refetchedBytes = 0
                renewals.earlier.add(spent)
                // Starting over would drop what the main URL's runs fetched: kept for a rerun.
                let why: String
                switch restart {
                case .rangesIgnored(let reason): why = "stopped honouring byte ranges (\(reason))"
                case .resourceChanged(let reason): why = "changed its file during the download (\(reason))"
                case .linkExpired: why = "answered as an expired link does"
                }
                let e = renewals.earlier.onto(SeggetError.standInCannot(plan.url ?? url, why, continuing: "the partial download"))
                if let next = nextSource(after: plan, failed: plan.url ?? url, error: e) {
                    context.events?(.notice("\(e.message) Trying \(next == url ? "the main URL again" : "the mirror \(URLParts.shown(next))")."))
                    return attempts(plan.trying(next, after: plan.url ?? url), prepared: nil, on: loop, context, renewals, completion: completion)
                }
                completion(.failure(e))
            case .success(.restart(.linkExpired(var expired), let spent, _)):
                renewals.earlier.add(spent)
                // A new link of the same file, proven before the next attempt resumes from the journal.
                // The renewer may wait (a command, a daemon client): off the loop and its steps queue.
                expired.url = plan.url ?? url
                if renewals.resumedAtStart == nil { renewals.resumedAtStart = expired.resumedAtStart }
                renewals.receivedBefore += expired.receivedBytes
                let expiredNow = expired
                DispatchQueue.global().async { [self] in
                    let newURL: String
                    do throws(SeggetError) {
                        newURL = try renewedLink(expiredNow, count: &renewals.count, context)
                    } catch {
                        return loop.steps.async { completion(.failure(renewals.earlier.onto(error))) }
                    }
                    // The new link's probe is a request of the loop's driver, as every other.
                    let deadline = options.timeout.map { Deadline(limit: $0, from: context.started) }
                    loop.post { [self] in
                        loop.probe(
                            self, url: newURL, firstBytes: 1, deadline: deadline, retrying: true, events: context.events,
                            interrupt: context.interrupt
                        ) { probed in
                            loop.steps.async { [self] in
                                let renewed: PreparedDownload
                                do throws(SeggetError) {
                                    renewed = try checkRenewed(expiredNow, newURL: newURL, probed: probed, context)
                                } catch {
                                    return completion(.failure(renewals.earlier.onto(error)))
                                }
                                let next = plan.renewed(url: renewed.url, outputPath: expiredNow.outputPath)
                                attempts(next, prepared: renewed, on: loop, context, renewals, completion: completion)
                            }
                        }
                    }
                }
            case .success(.restart(let restart, let spent, let thrownAway)):
                renewals.earlier.add(spent, thrownAway: thrownAway)
                do throws(SeggetError) {
                    let (next, notice) = try plan.next(after: restart)
                    context.events?(.notice(notice))
                    attempts(next, prepared: nil, on: loop, context, renewals, completion: completion)
                } catch {
                    completion(.failure(renewals.earlier.onto(error)))
                }
            }
        }
    }

    /// One attempt on `loop`, as `attempt(_:prepared:_:)` runs it on one thread: probe (on the loop,
    /// unless `prepared`), the steps up to the fetch (steps queue), the fetch (loop), verify and
    /// publish (steps queue). `done` is called on the steps queue with the plan it ran.
    private func attempt(
        _ plan: AttemptPlan, prepared: PreparedDownload?, probeFailed: SeggetError? = nil, on loop: DownloadLoop,
        _ context: AttemptContext, done attemptDone: @escaping @Sendable (AttemptPlan, Result<AttemptOutcome, SeggetError>) -> Void
    ) {
        // A mirror standing in on another host: its requests count in that host's budget, not the
        // main URL's (the run's share stays with the main URL for the attempts after).
        let standInShare: HostShare? =
            if isStandIn(plan), let standing = plan.url, HostBudget.key(for: standing) != HostBudget.key(for: url) {
                options.hostBudget?.share(for: standing)
            } else {
                nil
            }
        let context = standInShare.map { share in
            var c = context
            c.hostShare = share
            return c
        } ?? context
        let done: @Sendable (AttemptPlan, Result<AttemptOutcome, SeggetError>) -> Void = { [standInShare] plan, result in
            standInShare?.sync(inFlight: 0)
            attemptDone(plan, result)
        }
        let deadline = options.timeout.map { Deadline(limit: $0, from: context.started) }
        // A file the probe brought whole is saved on a writer thread where the loop serves many
        // downloads (a batch, the daemon): the others go on meanwhile. For a download of one, on its
        // steps, at once.
        let firstWhole: WholeSaving = loop.wholeSavesOnWriters ? .elsewhere : .here
        // The mirrors join the fetch as their probes agree (`MirrorJoin`); `join` is nil without mirrors.
        @Sendable func setUp(_ probe: ProbeResult, _ mirrors: [FetchSource], _ metalink: MetalinkFacts, whole: WholeSaving, join: MirrorJoin?) {
            // However the attempt ends, the mirrors still probing are let go, and what they answer is not heard.
            let done: @Sendable (AttemptPlan, Result<AttemptOutcome, SeggetError>) -> Void = { plan, result in
                if let join { loop.post { join.end() } }
                done(plan, result)
            }
            do throws(SeggetError) {
                switch try beginFetch(
                    plan, probe: probe, mirrors: mirrors, deadline: deadline, driver: loop.driver, whole: whole, metalink: metalink, context)
                {
                case .finished(let outcome):
                    done(plan, .success(outcome))
                case .saveWhole(let save):
                    StagedWriter.saveWhole { [self] in
                        let saved = Result { () throws(SeggetError) in try save.save() }
                        loop.steps.async { [self] in
                            switch saved {
                            case .success(let result?):
                                reportProbeBroughtEverything(total: save.total, received: save.total, connections: options.connections, context)
                                done(plan, .success(.finished(result)))
                            case .success(nil):
                                // The usual path looks at what is there; the probe's transfer was let go.
                                var probe = probe
                                probe.held = nil
                                setUp(probe, mirrors, metalink, whole: .never, join: join)
                            case .failure(let error):
                                done(plan, .failure(error.costing(probe.spent).knowing(length: probe.totalLength)))
                            }
                        }
                    }
                case .fetch(let stage):
                    guard let engine = stage.engine else {
                        return done(plan, end(stage, failure: nil, context))
                    }
                    loop.post {
                        loop.join(engine) { error in
                            // At once, on the loop: a mirror's probe answering while the file is checked
                            // and published must not reach the engine that ended.
                            join?.end()
                            let failure = error.map(SendableError.init)
                            loop.steps.async { [self] in done(plan, end(stage, failure: failure?.error, context)) }
                        }
                        join?.attach(engine)
                    }
                }
            } catch {
                // What the probe cost goes with a failure before any fetch (a digest of the bytes it
                // brought, a file already there).
                done(plan, .failure(error.costing(probe.spent).knowing(length: probe.totalLength)))
            }
        }
        let fetchWith: @Sendable (ProbeResult) -> Void = { [self] probe in
            guard probe.acceptsRanges, probe.totalLength != nil, !plan.stream else {
                return setUp(probe, [], MetalinkFacts(), whole: firstWhole, join: nil)
            }
            // What the first answer's Link fields add (Metalink/HTTP), then the mirrors, probed all at
            // once on the loop while the fetch starts from the main URL: each joins it once its probe
            // agrees. A mirror slow to answer held the whole download up for its answer (20 s for one
            // that never answered, for a file the main URL served in 0.1 s).
            //
            // Not with piece hashes: there the fetch waits for the probes, as before, but not for long
            // (`mirrorPatience`). The probe's first bytes are hashed as the fetch starts, and a main
            // URL serving bad ones would be the only source when its piece fails, which ends the
            // download ("every server of the file served bytes that failed their piece hashes")
            // before a good mirror could join.
            metalinkHTTP(probe: probe, on: loop, deadline: deadline, events: context.events) { [self] found in
                // A stand-in that redirected is not its own mirror.
                let urls = sourceURLs(main: probe, adding: found.mirrors, failed: plan.failedSources + [plan.url].compactMap { $0 })
                guard !urls.isEmpty else { return setUp(probe, [], found.facts, whole: firstWhole, join: nil) }
                let verifiable = options.pieces != nil || found.facts.pieces != nil
                let join = MirrorJoin(following: context.interrupt)
                let events = context.events.map { events in { @Sendable (e: DownloadEvent) in if !join.isOver { events(e) } } }
                loop.post { [self] in
                    probeMirrors(
                        urls, on: loop, main: probe, verifiable: verifiable, deadline: deadline, events: events,
                        interrupt: join.interrupt,
                        patience: verifiable ? Self.mirrorPatience(mainProbeSeconds: probe.firstAnswerSeconds) : nil,
                        each: verifiable ? nil : { join.add($0) }, spent: { join.count($0) }
                    ) { kept in
                        // With piece hashes every mirror is there from the start, spread over the
                        // connections; what their probes cost is counted with the main URL's.
                        guard verifiable else { return }
                        var withMirrors = probe
                        withMirrors.tally = withMirrors.tally + join.takeUnreported()
                        let counted = withMirrors
                        loop.steps.async { setUp(counted, kept, found.facts, whole: firstWhole, join: nil) }
                    }
                }
                if !verifiable { setUp(probe, [], found.facts, whole: firstWhole, join: join) }
            }
        }
        if let prepared {
            loop.steps.async { fetchWith(prepared.probe) }
            return
        }
        let ask = probeBytes(fresh: plan.fresh, stream: plan.stream)
        // The URL of this attempt: a renewed link once the first one expired.
        let url = plan.url ?? self.url
        let warmUp = warmUp(probeBytes: ask.bytes, url: url)
        // A Metalink's other URLs come before retries of this one.
        let retrying = untriedSource(after: plan, failed: url) == nil
        // A mirror standing in on another host gets none of the main URL's credentials, as a mirror
        // does (`probeMirrors`), nor do the fetch's requests to it.
        let withoutCredentials = isStandIn(plan) && URLParts(url)?.host != URLParts(self.url)?.host
        var bare = options
        bare.transfer = transfer(toward: url)
        let prober = withoutCredentials ? Download(url: self.url, options: bare) : self
        loop.post { [self] in
            loop.probe(
                prober, url: url, firstBytes: ask.bytes, deadline: deadline, retrying: retrying, waitsOutHostLimit: true,
                events: context.events, interrupt: context.interrupt, hostShare: context.hostShare, warmUp: warmUp, after: probeFailed
            ) { result in
                loop.steps.async { [self] in
                    switch result {
                    case .success(var probe):
                        probe.absent = ask.absent
                        if withoutCredentials { probe.credentialsDropped = true }
                        fetchWith(probe)
                    case .failure(let e):
                        // A rerun of a download whose link expired: renew it as if it had expired now.
                        if !isStandIn(plan), let expired = expiredBeforeStart(e, plan: plan, url: url) {
                            return done(plan, .success(.restart(.linkExpired(expired), spent: e.spent ?? RequestTally())))
                        }
                        var failed = plan
                        failed.probeFailed = true
                        done(failed, .failure(e))
                    }
                }
            }
        }
    }

    /// `endFetch`, then the stage closed.
    private func end(_ stage: FetchStage, failure: (any Error)?, _ context: AttemptContext) -> Result<AttemptOutcome, SeggetError> {
        defer { stage.close() }
        do throws(SeggetError) {
            return .success(try endFetch(stage, failure: failure, context))
        } catch {
            // What the attempt cost, said with its failure (a digest mismatch, a publish that failed
            // and the fetch's own failures alike).
            let length = stage.probe.totalLength
            switch stage.start {
            case .engine(let engine, _): return .failure(error.costing(engine.spent).knowing(length: length))
            case .fetched(let f): return .failure(error.costing(f.tally).knowing(length: length))
            }
        }
    }
}

/// What the attempts of one run on a loop carry from one to the next about renewed links and what
/// the attempts before cost; used by one attempt at a time (on the steps queue, or the renewal's
/// thread between two attempts).
private final class LoopRenewals: @unchecked Sendable {
    var count = RenewalCount()
    var earlier = EarlierAttempts()
    /// Before the first renewal: what the run found on disk, and what earlier attempts received.
    var resumedAtStart: Int64?
    var receivedBefore: Int64 = 0
}

/// An engine's stop, handed from the loop thread to the steps queue.
private struct SendableError: @unchecked Sendable {
    let error: any Error
}

/// The outcome of work run on a `DownloadLoop` for a caller that waits for it on the loop's thread
/// (`Download.run`, `Download.stream`): set once from the steps queue, read by the loop thread.
final class LoopOutcome<Value>: @unchecked Sendable {
    private let lock = ConditionLock()
    private var outcome: Result<Value, SeggetError>?

    func set(_ result: Result<Value, SeggetError>) { lock.withLock { outcome = result } }
    var isSet: Bool { lock.withLock { outcome != nil } }
    func get() throws(SeggetError) -> Value {
        guard let o = lock.withLock({ outcome }) else {
            throw SeggetError(.internalError, "the download loop stopped before the download ended.")
        }
        return try o.get()
    }
}

/// A slot in its host's budget taken for a probe before the probe reached its loop
/// (``Download/takeProbeSlot()``).
public struct ProbeSlot: Sendable {
    let share: HostShare?
}

extension Download {
    /// Whether other downloads of this run hold slots of `url`'s host now, beyond `own` of this one's.
    func othersHoldHost(of url: String, besides own: Int) -> Bool {
        (options.hostBudget?.held(for: url) ?? 0) > own
    }

    /// The connections to warm beside this download's probe for `probeBytes` of `url` (see
    /// `ConnectionWarmUp`): the host counts as shared when other downloads of this run hold slots of
    /// it now (besides the probe's own, where it is `slotHeld`), or its budget caps it below this
    /// download's connections.
    func warmUp(probeBytes: Int, url: String? = nil, slotHeld: Bool = false) -> ConnectionWarmUp {
        let url = url ?? self.url
        let shared = othersHoldHost(of: url, besides: slotHeld ? 1 : 0)
            || (options.hostBudget?.cap(for: url) ?? Int.max) < options.connections
        var rule = ConnectionWarmUp(
            connections: options.connections, autoConnections: options.autoConnections,
            multiplexed: options.transfer.http2 && (options.transfer.multiplexed || DownloadLoop.benchmarkRangesAsStreams),
            mirrors: options.mirrors.count, sharedHost: shared, probeBytes: probeBytes)
        rule.shortestRoundTrip = options.warmUpMinRoundTrip
        return rule
    }
}

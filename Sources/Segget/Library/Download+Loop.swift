import SeggetCurl

/// Used by one thread at a time: made on a `DownloadLoop`'s steps queue, run on its loop thread,
/// read once more on the steps queue after the loop is done with it.
extension FetchEngine: @unchecked Sendable {}

extension Download {
    /// Probes like ``prepare(pool:)`` (one attempt, no retries, the file's first chunk too), as a
    /// request on `loop` beside its other downloads, without a thread of its own. `completion` is
    /// called once, on the loop's steps queue.
    public func prepare(
        on loop: DownloadLoop, completion: @escaping @Sendable (Result<PreparedDownload, SeggetError>) -> Void
    ) {
        let deadline = options.timeout.map { Deadline(limit: $0, from: monotonicSeconds()) }
        let ask = probeBytes(fresh: !options.resume, stream: false)
        loop.post { [self] in
            loop.probe(self, firstBytes: ask.bytes, deadline: deadline, retrying: false, events: nil, interrupt: InterruptFlag()) { result in
                let prepared = result.map { p in
                    var p = p
                    p.noJournalAt = ask.noJournalAt
                    return PreparedDownload(url: self.url, probe: p, multi: loop.driver.multi)
                }
                loop.steps.async { completion(prepared) }
            }
        }
    }

    /// Sends one probing request as ``probe()`` does, as a request on `loop` beside its other
    /// downloads. `completion` is called once, on the loop's steps queue.
    public func probe(on loop: DownloadLoop, completion: @escaping @Sendable (Result<RemoteFileInfo, SeggetError>) -> Void) {
        loop.post { [self] in
            loop.probe(self, firstBytes: 1, deadline: nil, retrying: false, events: nil, interrupt: InterruptFlag()) { result in
                let info = result.map(RemoteFileInfo.init)
                loop.steps.async { completion(info) }
            }
        }
    }

    /// Runs the download as ``run(progress:events:interrupt:prepared:pool:)`` does, with the same
    /// attempts, restarts, errors and result, but on `loop`: its requests beside the other downloads
    /// there (sharing their connections), its blocking steps on the loop's steps queue. Returns at
    /// once; `completion` is called once, on the steps queue. `progress` and `events` are called on
    /// the loop thread, or on the steps queue.
    public func run(
        on loop: DownloadLoop,
        progress: (@Sendable (DownloadProgress) -> Void)? = nil,
        events: (@Sendable (DownloadEvent) -> Void)? = nil,
        interrupt: InterruptFlag = InterruptFlag(),
        prepared: PreparedDownload? = nil,
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
        let context = AttemptContext(
            started: monotonicSeconds(), pool: nil, progress: progress, events: events, interrupt: interrupt)
        attempts(AttemptPlan(fresh: !options.resume), prepared: prepared?.url == url ? prepared : nil, on: loop, context, completion: completion)
    }

    /// Attempts from `plan` on, each restart probing afresh, until one finishes or fails.
    private func attempts(
        _ plan: AttemptPlan, prepared: PreparedDownload?, on loop: DownloadLoop, _ context: AttemptContext,
        completion: @escaping @Sendable (Result<DownloadResult, SeggetError>) -> Void
    ) {
        attempt(plan, prepared: prepared, on: loop, context) { [self] plan, outcome in
            switch outcome {
            case .failure(let e):
                completion(.failure(e))
            case .success(.finished(let result)):
                completion(.success(result))
            case .success(.restart(let restart)):
                do throws(SeggetError) {
                    let (next, notice) = try plan.next(after: restart)
                    context.events?(.notice(notice))
                    attempts(next, prepared: nil, on: loop, context, completion: completion)
                } catch {
                    completion(.failure(error))
                }
            }
        }
    }

    /// One attempt on `loop`, as `attempt(_:prepared:_:)` runs it on one thread: probe (on the loop,
    /// unless `prepared`), the steps up to the fetch (steps queue), the fetch (loop), verify and
    /// publish (steps queue). `done` is called on the steps queue with the plan it ran.
    private func attempt(
        _ plan: AttemptPlan, prepared: PreparedDownload?, on loop: DownloadLoop, _ context: AttemptContext,
        done: @escaping @Sendable (AttemptPlan, Result<AttemptOutcome, SeggetError>) -> Void
    ) {
        let deadline = options.timeout.map { Deadline(limit: $0, from: context.started) }
        let fetchWith: @Sendable (ProbeResult) -> Void = { [self] probe in
            do throws(SeggetError) {
                switch try beginFetch(plan, probe: probe, deadline: deadline, driver: loop.driver, multi: loop.driver.multi, context) {
                case .finished(let outcome):
                    done(plan, .success(outcome))
                case .fetch(let stage):
                    guard let engine = stage.engine else {
                        return done(plan, end(stage, failure: nil, context))
                    }
                    loop.post {
                        loop.join(engine) { error in
                            let failure = error.map(SendableError.init)
                            loop.steps.async { [self] in done(plan, end(stage, failure: failure?.error, context)) }
                        }
                    }
                }
            } catch {
                done(plan, .failure(error))
            }
        }
        if let prepared {
            loop.steps.async { fetchWith(prepared.probe) }
            return
        }
        let ask = probeBytes(fresh: plan.fresh, stream: plan.stream)
        loop.post { [self] in
            loop.probe(self, firstBytes: ask.bytes, deadline: deadline, retrying: true, events: context.events, interrupt: context.interrupt) {
                result in
                loop.steps.async {
                    switch result {
                    case .success(var probe):
                        probe.noJournalAt = ask.noJournalAt
                        fetchWith(probe)
                    case .failure(let e):
                        done(plan, .failure(e))
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
            return .failure(error)
        }
    }
}

/// An engine's stop, handed from the loop thread to the steps queue.
private struct SendableError: @unchecked Sendable {
    let error: any Error
}

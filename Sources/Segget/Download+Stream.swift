import SeggetCurl
import SeggetSystem
import SeggetVerify

/// How a download into a stream is shaped (see ``Download/stream(to:settings:progress:events:interrupt:)``).
public struct StreamSettings: Sendable, Equatable {
    /// The reorder window: the most bytes held in memory, received but not yet handed on because
    /// bytes before them are still on their way (the connections' staging buffers included, while
    /// that leaves `minimumWindow` for reordering). Connections further ahead pause until the reader
    /// takes more. At least `minimumWindow` and 4 chunks; used in whole MiB.
    public var window: Int64 = StreamSettings.defaultWindow
    /// The stream starts at this byte of the file (a stream that failed after N bytes continues
    /// with `from = N`). Needs a server that honours byte ranges.
    public var from: Int64 = 0

    public static let defaultWindow: Int64 = 64 << 20
    public static let minimumWindow: Int64 = 4 << 20

    public init(window: Int64 = StreamSettings.defaultWindow, from: Int64 = 0) {
        self.window = window
        self.from = from
    }
}

/// What a download into a stream delivered.
public struct StreamResult: Sendable, Equatable {
    /// Bytes handed to the output, from `from` on.
    public var bytes: Int64
    /// The first byte of the file the stream began at.
    public var from: Int64
    /// Bytes received from the network (more than `bytes` when retried or raced).
    public var receivedBytes: Int64
    public var seconds: Double
    public var connections: Int
    /// Digests that were checked, as "ALGORITHM=hex".
    public var verified: [String]
    public var usedRanges: Bool
    /// The most bytes the reorder window held at once.
    public var peakWindowBytes: Int64
}

extension Download {
    /// Downloads into `output`, in order, over `options.connections` connections, holding at most
    /// `settings.window` bytes in memory: a connection whose bytes would not fit pauses until the
    /// reader takes more (it is never dropped, and its pause does not count against it as slowness).
    ///
    /// `output` is called on a thread of its own with consecutive pieces of the file (each valid only
    /// during the call); it may block (a slow reader) and may throw (a reader gone away), which ends
    /// the download with a `.fileSystem` error. Digests in `options.checksums` (and those the server
    /// announces) are checked against exactly the bytes handed on, after the last of them: a mismatch
    /// throws `.verification`, but the bytes are out already. Nothing is written to disk: there is no
    /// journal, and a stream that failed after N bytes continues with `settings.from = N`.
    public func stream(
        to output: @escaping (UnsafeRawBufferPointer) throws -> Void,
        settings: StreamSettings = StreamSettings(),
        progress: (@Sendable (DownloadProgress) -> Void)? = nil,
        events: (@Sendable (DownloadEvent) -> Void)? = nil,
        interrupt: InterruptFlag = InterruptFlag()
    ) throws(SeggetError) -> StreamResult {
        guard (1...128).contains(options.connections) else {
            throw SeggetError(.usage, "the number of connections must be between 1 and 128 (got \(options.connections)).")
        }
        guard settings.window >= max(StreamSettings.minimumWindow, 4 * options.chunkSize) else {
            throw SeggetError(.usage, "the stream window must be at least \(Format.bytes(max(StreamSettings.minimumWindow, 4 * options.chunkSize))) (4 MiB and 4 chunks).")
        }
        guard settings.from >= 0 else { throw SeggetError(.usage, "the stream's start offset must not be negative.") }
        if settings.from > 0 && !options.checksums.isEmpty {
            throw SeggetError(.usage, "a checksum covers the whole file; it cannot be checked on a stream that starts at byte \(settings.from).")
        }
        let started = monotonicSeconds()
        let deadline = options.timeout.map { Deadline(limit: $0, from: started) }
        // A loop of one on this thread, as for `run`: the probe, then the engine, on its driver.
        let loop = DownloadLoop(stepsOnLoop: true)
        let probed = LoopOutcome<ProbeResult>()
        loop.post { [self] in
            loop.probe(self, firstBytes: 1, deadline: deadline, retrying: true, events: events, interrupt: interrupt, holdsWholeAnswer: true) {
                probed.set($0)
            }
        }
        loop.run(until: { probed.isSet })
        let probe = try probed.get()
        let ranged = probe.acceptsRanges && probe.totalLength != nil
        // A server without ranges answered with the whole file: the stream continues that answer
        // after its first byte, one request for the file (see `FetchEngine.continueProbe`).
        let continued = !ranged && settings.from == 0 && probe.held?.isSettled == false ? probe.held : nil
        if continued == nil { probe.held?.release() }
        defer { continued?.release() }
        if settings.from > 0 {
            guard ranged, let total = probe.totalLength else {
                throw SeggetError(.protocolViolation, "the server does not honour byte ranges, so the stream cannot start at byte \(settings.from); stream it from the start.")
            }
            guard settings.from <= total else {
                throw SeggetError(.usage, "the stream cannot start at byte \(settings.from): the file has \(total) bytes.")
            }
        }
        if !ranged, let why = probe.noRangesReason {
            events?(.notice("\(why); streaming over one connection."))
        }
        let expected = settings.from > 0 ? [] : expectedDigests(probe)
        let plan = ChunkPlan(totalLength: probe.totalLength ?? 0, chunkSize: options.chunkSize)
        // A file download meets a length past the disk's first (exit 5); a stream has no disk, and its
        // schedule is a flag per chunk: a server that announced 2^48 bytes held it in a loop past
        // --timeout, one of 2^62 bytes made it abort allocating 4 TB.
        if ranged, plan.chunkCount > Self.maximumStreamChunks {
            throw SeggetError(.protocolViolation, "the server announces \(plan.totalLength) bytes (\(Format.bytes(plan.totalLength))), more than a stream plans in \(Self.maximumStreamChunks) chunks of \(Format.bytes(plan.chunkSize)); if the length is real, give a larger --chunk-size.")
        }
        let sink = StreamSink(
            capacity: Self.reorderCapacity(window: settings.window, connections: ranged ? options.connections : 1),
            start: settings.from,
            algorithms: Array(Set(expected.map(\.algorithm))).sorted { $0.rawValue < $1.rawValue }, output: output)
        do {
            try sink.startEmitting()
        } catch {
            throw SeggetError(.internalError, "could not start the stream's output thread: \(error).")
        }
        defer { sink.stop() }

        // Into the sink through the page cache, with no checkpoints (there is no journal).
        func streamSettings(ranged: Bool) -> FetchSettings {
            var s = self.fetchSettings(
                ranged: ranged, chunkSize: options.chunkSize, totalLength: probe.totalLength, deadline: deadline, hashing: false)
            s.writePath = .pageCache
            s.checkpointInterval = 0
            return s
        }
        var fetchSettings = streamSettings(ranged: ranged)
        // Work in file order, in runs short enough that every connection's run fits in half the
        // window at once: the connections then rarely wait for the one at the head.
        fetchSettings.maxRunChunks = Self.streamRunChunks(
            window: settings.window, connections: fetchSettings.connections, chunkSize: options.chunkSize)
        var target = FetchTarget(
            url: probe.finalURL, totalLength: probe.totalLength, ranged: ranged, etag: probe.etag,
            lastModified: probe.lastModified, ifRange: ranged ? probe.ifRangeValidator : nil)
        target.mainWithoutCredentials = probe.credentialsDropped
        // The mirrors are probed beside the stream, which starts from the main URL at once: each joins
        // it once its probe agrees (as a download's do). Probed first, a mirror that never answered
        // held the stream up for its probe's timeout (20 s for 8 MiB the main URL sent in 0.02 s).
        let join = ranged && !options.mirrors.isEmpty ? MirrorJoin(following: interrupt) : nil
        defer { join?.end() }
        if let join {
            let heard = events.map { events in { @Sendable (e: DownloadEvent) in if !join.isOver { events(e) } } }
            loop.post { [self] in
                probeMirrors(on: loop, main: probe, deadline: deadline, events: heard, interrupt: join.interrupt, each: { join.add($0) }) { _ in }
            }
        }
        let from = settings.from
        var partialChunks: [Int: Int64] = [:]
        if ranged, from > 0, from < plan.totalLength {
            let k = plan.chunk(containing: from)
            if plan.byteRange(ofChunk: k).lowerBound < from { partialChunks[k] = from }
        }
        let engine = FetchEngine(
            target: target, settings: fetchSettings, data: sink, journal: nil, plan: plan,
            isFinished: { plan.byteRange(ofChunk: $0).upperBound <= from }, interrupt: interrupt,
            partialChunks: partialChunks, driver: loop.driver)
        engine.streamGate = sink
        var probeBytes = 0
        if let continued {
            do {
                try probe.prefix.withUnsafeBytes { (raw) throws(Errno) in try sink.write(raw, at: 0) }
                engine.adoptable = continued
                probeBytes = probe.prefix.count
            } catch {
                continued.release()
            }
        }
        engine.onProgress = progress.map { p in { p($0) } }
        engine.onEvent = events.map { e in { e($0) } }
        let ended = LoopResults(count: 1)
        loop.post {
            // Ended, the engine takes no mirror: one whose probe agrees later is not heard.
            loop.join(engine) { error in
                join?.end()
                ended.set(0, error)
            }
            join?.attach(engine)
        }
        loop.run(until: { ended.allSet })
        var error = ended.values[0]
        var fetched = engine
        if let ignored = error as? RangesIgnored, ranged, sink.outputFailure == nil {
            // The server stopped honouring ranges after the probe: one plain stream from byte 0, as
            // a file download starts over, the sink keeping only what it has not handed on or holds
            // (a stream used to end here with exit 7, even with nothing handed on yet).
            let handed = sink.handedOn
            let skipped = handed > 0 ? " (the \(handed) bytes handed on already are not handed on again)" : ""
            events?(.notice("the server stopped honouring byte ranges (\(ignored.reason)); streaming over one connection from the start\(skipped)."))
            // The main URL alone (a mirror's ranges are no use to a plain stream), without ranges.
            var plainTarget = target
            plainTarget.ranged = false
            plainTarget.ifRange = nil
            plainTarget.mirrors = []
            let plain = FetchEngine(
                target: plainTarget, settings: streamSettings(ranged: false), data: sink, journal: nil, plan: plan, isFinished: { _ in false },
                interrupt: interrupt, driver: loop.driver)
            plain.streamGate = sink
            plain.onProgress = engine.onProgress
            plain.onEvent = engine.onEvent
            let again = LoopResults(count: 1)
            loop.post { loop.join(plain) { again.set(0, $0) } }
            loop.run(until: { again.allSet })
            error = again.values[0]
            fetched = plain
        }
        if let error {
            let handed = sink.stopAndWait()
            throw Self.streamError(error, sink: sink, handedOn: handed)
        }
        let usedRanges = fetched === engine && ranged
        let length = usedRanges ? plan.totalLength : fetched.streamLength
        do {
            try sink.finish(length: length)
        } catch {
            throw Self.streamError(error, sink: sink, handedOn: sink.handedOn)
        }
        if let total = probe.totalLength, length != total {
            throw SeggetError(.protocolViolation, "the server sent \(length) bytes but announced \(total).")
        }
        let verified = try Self.checkDigests(
            sink.digests(), expected: expected, name: "the stream",
            afterMismatch: "Every byte was already handed on: discard what was made of them.", origin: digestOrigin(probe))
        return StreamResult(
            bytes: length - from, from: from, receivedBytes: engine.receivedBytes + (fetched === engine ? 0 : fetched.receivedBytes) + Int64(probeBytes),
            seconds: monotonicSeconds() - started, connections: max(engine.connectionsUsed, fetched.connectionsUsed), verified: verified,
            usedRanges: usedRanges, peakWindowBytes: sink.peakHeld)
    }

    /// The reorder ring inside a window of `window` bytes: what the connections' staging buffers and
    /// the writer's queue may hold is counted in the window too, so that every received byte the
    /// stream holds fits in it; in whole blocks, at least `StreamSettings.minimumWindow`.
    static func reorderCapacity(window: Int64, connections: Int) -> Int64 {
        let buffer = StagedWriter.bufferSize(connections: connections)
        let staging = Int64((connections + StagedWriter.maxInFlight(bufferSize: buffer)) * buffer)
        let ring = max(StreamSettings.minimumWindow, window - staging)
        return ring / StreamSink.blockSize * StreamSink.blockSize
    }

    /// The most chunks a stream's schedule holds: 16 TiB at the default 1 MiB chunk, a few
    /// megabytes of flags and milliseconds of planning.
    static let maximumStreamChunks = 1 << 24

    /// Chunks per run of work: every connection's run together in half the window, at least one chunk.
    static func streamRunChunks(window: Int64, connections: Int, chunkSize: Int64) -> Int {
        max(1, Int(window / (2 * Int64(max(1, connections)) * chunkSize)))
    }

    /// What ended a stream early, as a sentence that says how far it got and how to continue.
    static func streamError(_ error: any Error, sink: StreamSink, handedOn: Int64) -> SeggetError {
        let continuing = handedOn > sink.start
            ? " \(handedOn - sink.start) bytes of the stream were handed on; a stream from byte \(handedOn) (--stream-from \(handedOn)) continues it."
            : ""
        if let failure = sink.outputFailure {
            if let e = failure as? Errno, e == .brokenPipe {
                return SeggetError(.fileSystem, "the stream's reader went away (broken pipe) after \(handedOn - sink.start) bytes; the download stopped.")
            }
            if let e = failure as? Errno, e == .interrupted {
                // The output gave up on a reader that took nothing while a stop was asked for.
                return SeggetError(.interrupted, "interrupted while the stream's reader was not reading.\(continuing)")
            }
            if let e = failure as? SeggetError { return e }
            if let e = failure as? Errno, e == .fileTooLarge {
                return SeggetError(.fileSystem, "could not write the stream: \(FileTooLarge.reason(directory: nil, size: nil, stream: true)).\(continuing)")
            }
            return SeggetError(.fileSystem, "could not write the stream: \(failure).\(continuing)")
        }
        switch error {
        case let e as SeggetError where e.kind == .interrupted:
            return SeggetError(.interrupted, "interrupted.\(continuing)")
        case let e as SeggetError:
            // The same command streams again from the first byte: what continues a stream is
            // --stream-from (`continuing`), not a rerun. "run the same command to resume later" said otherwise.
            let later = handedOn > sink.start ? "continue it later" : "stream it again later"
            let message = e.message
                .replacing(NextStep.resumeLaterOrRaiseRetries.cli, with: "raise --retries, or \(later)")
                .replacing(Deadline.continueOrRaise, with: "raise --timeout, or \(later)")
            return SeggetError(e.kind, "\(message)\(continuing)", httpStatus: e.httpStatus)
        case let e as ResourceChanged:
            return SeggetError(.protocolViolation, "the file changed on the server while it was streamed (\(e.reason)); stream it again from the start.")
        case let e as RangesIgnored:
            return SeggetError(.protocolViolation, "the server stopped honouring byte ranges (\(e.reason)); stream it again with -n 1.\(continuing)")
        default:
            return SeggetError(.internalError, "unexpected error: \(error)")
        }
    }
}

import Glibc
import SeggetCurl
import SeggetJournal
import SeggetSystem
import SeggetVerify

/// What a finished fetch reports to the rest of the attempt.
struct Fetched {
    /// The file's length: the plan's, or what a stream delivered.
    let length: Int64
    let receivedBytes: Int64
    /// Bytes kept from an earlier run that failed their check and were fetched again.
    let rejectedBytes: Int64
    let connections: Int
    /// The most answers served at once (see `DownloadResult.servedAtOnce`).
    var servedAtOnce: Int? = nil
    /// When the fetch began (monotonic seconds), for the result's duration.
    let started: Double
    /// What the probe and the fetch cost the servers.
    let tally: RequestTally
    /// The URLs that wrote bytes into the file in this fetch (`FetchEngine.sourcesThatServed`).
    var sources: [String] = []
}

/// How the fetch step ended: every byte is in the file, or the download must start over.
enum FetchStep {
    case fetched(Fetched)
    case restart(DownloadRestart)
}

/// How the fetch of an attempt starts: the probe brought every byte, or an engine fetches the rest
/// (made at `started`, monotonic seconds).
enum FetchStart {
    case fetched(Fetched)
    case engine(FetchEngine, started: Double)
}

/// How an attempt goes on after `Download.beginFetch`: it ended there, the probe brought the whole
/// file and it is saved elsewhere (`WholeSaving.elsewhere`), or it fetches.
enum AttemptStart {
    case finished(AttemptOutcome)
    case saveWhole(WholeSave)
    case fetch(FetchStage)
}

/// Where `Download.beginFetch` saves a file the probe brought whole.
enum WholeSaving {
    /// At once, on the calling thread.
    case here
    /// Not: it returns `.saveWhole`, and the caller runs the save (on a writer thread).
    case elsewhere
    /// Never: the usual path, with a part file (after a save that found it must run).
    case never
}

/// What an attempt holds open from the opening of its partial download to its end: the part file
/// and journal, the hasher, the probe's held transfer, and the fetch. `close()` lets go of them.
final class FetchStage: @unchecked Sendable {
    let probe: ProbeResult
    let paths: PartialDownload.Paths
    let expected: [ExpectedDigest]
    let ranged: Bool
    let partial: PartialDownload
    let plan: ChunkPlan
    let resumedBytes: Int64
    /// Bytes of the probe's answer placed in the file before the fetch (received in this run too).
    let probeBytes: Int64
    let hasher: PrefixHasher?
    let start: FetchStart
    /// The run's slots in its host's budget: a held transfer ended unfinished is counted cancelled.
    let hostShare: HostShare?
    /// The version of the server's file the download fetches, for the finished file's mark (see
    /// `FinishedMark.serverVersion`); nil where its answer had no validators or came from a stand-in.
    var serverVersion: UInt64?

    init(
        probe: ProbeResult, paths: PartialDownload.Paths, expected: [ExpectedDigest], ranged: Bool, partial: PartialDownload,
        plan: ChunkPlan, resumedBytes: Int64, probeBytes: Int64 = 0, hasher: PrefixHasher?, start: FetchStart,
        hostShare: HostShare? = nil
    ) {
        self.probeBytes = probeBytes
        self.hostShare = hostShare
        self.probe = probe
        self.paths = paths
        self.expected = expected
        self.ranged = ranged
        self.partial = partial
        self.plan = plan
        self.resumedBytes = resumedBytes
        self.hasher = hasher
        self.start = start
    }

    /// The engine, when the probe did not bring everything.
    var engine: FetchEngine? {
        if case .engine(let e, _) = start { return e }
        return nil
    }

    /// Ends what the attempt held, in the order an attempt on one thread always did.
    func close() {
        hasher?.cancel()
        partial.close()
        // Ended mid-answer unless the fetch continued it: the server counts it a moment longer.
        probe.held?.release(counting: hostShare)
    }
}

extension Download {
    /// Sets up the engine that fetches the partial download's missing chunks, on `driver` (a
    /// `DownloadLoop`'s, shared with other downloads).
    func makeFetch(
        probe: ProbeResult, probeReceived: Int, ranged: Bool, mirrors: [FetchSource], partial: PartialDownload, plan: ChunkPlan, hasher: PrefixHasher?,
        driver: TransferDriver, deadline: Deadline?, pieces: PieceHashes? = nil, _ context: AttemptContext
    ) -> FetchStart {
        var settings = fetchSettings(
            ranged: ranged, chunkSize: partial.chunkSize, totalLength: probe.totalLength, deadline: deadline,
            hashing: hasher != nil, hostShare: context.hostShare)
        settings.probeFirstAnswer = probe.firstAnswerSeconds
        // Beyond the slot this download's own probe holds.
        settings.contendedHost = othersHoldHost(of: probe.finalURL, besides: 1)
        settings.warmUps = probe.warmUps
        settings.probeTally = probe.spent
        // The probe's bytes (its prefix, taken out of the probe once in the file) came first,
        // from the same speed cap: charged to it when the fetch starts. Read from the probe, after
        // the prefix was cleared, this was 0, and at --max-speed 1k a 100,000-byte file's 64 KiB
        // probe and the rest came in at once.
        settings.probePrefixBytes = probeReceived
        if Self.probeFetchedEverything(
            ranged: ranged, isNew: partial.isNew, chunkCount: plan.chunkCount, trusted: partial.trusted?.setCount ?? 0,
            // Piece checks run in the engine, as mirrors do.
            mirrors: options.mirrors.count + (pieces == nil ? 0 : 1), interrupted: context.interrupt.isSet,
            deadlinePassed: deadline.map { monotonicSeconds() >= $0.at } ?? false)
        {
            reportProbeBroughtEverything(total: plan.totalLength, received: Int64(probeReceived), connections: options.connections, context)
            return .fetched(Fetched(
                length: plan.totalLength, receivedBytes: 0, rejectedBytes: 0, connections: options.connections,
                started: monotonicSeconds(), tally: probe.spent))
        }
        var target = FetchTarget(
            url: probe.finalURL, totalLength: probe.totalLength, ranged: ranged, etag: probe.etag,
            lastModified: probe.lastModified, ifRange: ranged ? probe.ifRangeValidator : nil)
        target.mainWithoutCredentials = probe.credentialsDropped
        if ranged { target.mirrors = mirrors }
        let trusted = partial.trusted
        let engine = FetchEngine(
            target: target, settings: settings, data: partial.data, journal: partial.journal, plan: plan,
            isFinished: { trusted?[$0] ?? false }, interrupt: context.interrupt,
            partialChunks: partial.partial.mapValues(\.upTo), driver: driver)
        engine.onProgress = context.progress.map { p in { p($0) } }
        engine.onEvent = context.events.map { e in { e($0) } }
        engine.onPrefix = hasher.map { h in { h.advance(to: $0) } }
        // Not with piece hashes: a lent buffer may hold a bad mirror's bytes (see `checkPieces`).
        if pieces == nil { engine.writer.lend = hasher.map { h in { h.lend($0, at: $1, footprint: $2, release: $3) } } }
        engine.progressSlots = partial.progress
        // The probe's transfer, held open, becomes the first request of a new download.
        if partial.isNew {
            engine.adoptable = probe.held
        } else {
            // Not continued: ended now, not after the download, which would hold it uncounted.
            probe.held?.release(counting: context.hostShare)
        }
        engine.continueChecksums(of: partial.partial)
        engine.recordKeptPartials(partial.partial)
        // Every chunk kept from an earlier run is read back and checked behind the download.
        if let voucher = partial.voucher(plan: plan) { engine.vouch(with: voucher) }
        // Each piece is hashed once its bytes are in the file; a bad one is fetched again elsewhere.
        if let pieces, let geometry = PiecePlan(pieces: pieces, plan: plan) {
            engine.checkPieces(geometry, probeBytesFromMain: partial.isNew)
        }
        if options.syncBeforeRename {
            // A head start on the final fdatasync, off the fetch thread. Not without --fsync: on a
            // disk slower than the network, writeback started during the download made buffered
            // writes wait for it (1 GiB on a 400 MB/s disk: 4.9-6.2 s instead of 1.3-2.2 s), while
            // the kernel left alone writes the page cache back after the download.
            let length = plan.totalLength
            engine.onWriteback = { partial.startWriteback(length: length) }
        }
        return .engine(engine, started: monotonicSeconds())
    }

    /// What the end of `engine`'s run (with `failure`, nil when every chunk is written) means for the
    /// attempt: what was fetched, a restart, or the error to report.
    func fetchEnded(_ engine: FetchEngine, failure: (any Error)?, started: Double, stage: FetchStage) throws(SeggetError) -> FetchStep {
        let plan = stage.plan
        switch failure {
        case nil:
            break
        case let restart as RangesIgnored:
            return .restart(.rangesIgnored(reason: restart.reason))
        case let restart as ResourceChanged:
            return .restart(.resourceChanged(reason: restart.reason))
        case let e as SeggetError:
            // Without a journal (a server that sends no byte ranges) a rerun cannot continue, and starts
            // over: the part file, as long as the whole file, is only in the way. It was kept, and an
            // interruption said "N MiB saved; run the same command to resume".
            if !stage.ranged && stage.partial.journal == nil {
                stage.partial.discard()
                if e.kind == .interrupted {
                    throw SeggetError(.interrupted, "interrupted after \(Format.bytes(engine.finishedBytesForReport))\(stage.probe.totalLength.map { " of \(Format.bytes($0))" } ?? ""); the server sends no byte ranges, so a download of it cannot continue where it stopped: a rerun starts over (nothing was kept).")
                }
                throw e
            }
            // The written bitmap is already exact; make it durable too, so that even a reboot keeps it.
            stage.partial.checkpoint()
            if e.kind == .interrupted {
                // What the rerun keeps, read back as it will read it (whole chunks and progress slots).
                let done = stage.ranged ? stage.partial.bytesKeptForRerun(plan: plan) ?? engine.finishedBytesForReport : engine.finishedBytesForReport
                throw SeggetError(.interrupted, "interrupted with \(Format.bytes(done)) of \(Format.bytes(plan.totalLength)) saved; run the same command to resume.")
            }
            if stage.ranged, stage.partial.journal != nil, let status = LinkExpiry.status(of: e) {
                let probe = stage.probe
                // The link that served the first requests stopped working: renew it (see `renew`). What
                // is done is what the next attempt keeps: whole chunks and the progress slots' parts.
                return .restart(.linkExpired(LinkExpired(
                    url: probe.finalURL, status: status,
                    bytesDone: stage.partial.bytesKeptForRerun(plan: plan) ?? engine.finishedBytesForReport,
                    identity: ObjectIdentity(probe), outputPath: stage.partial.paths.final,
                    receivedBytes: engine.receivedBytes)))
            }
            throw e
        case let other?:
            throw SeggetError(.internalError, "unexpected error: \(other)")
        }
        let length = stage.ranged ? plan.totalLength : engine.streamLength
        if let total = stage.probe.totalLength, length != total {
            throw SeggetError(.protocolViolation, "the server sent \(length) bytes but announced \(total); run the command again.")
        }
        return .fetched(Fetched(
            length: length, receivedBytes: engine.receivedBytes, rejectedBytes: engine.rejectedBytes,
            connections: engine.connectionsUsed,
            servedAtOnce: engine.core.mostServedAtOnce > 0 ? engine.core.mostServedAtOnce : nil, started: started,
            tally: engine.spent, sources: engine.sourcesThatServed))
    }

    /// Whether the probe brought the whole file, so that the fetch has nothing left to do: a new
    /// partial download (nothing kept from an earlier run waits to be vouched for) whose every chunk
    /// the probe's bytes cover, with no mirrors to probe. Then no engine is started: no writer thread,
    /// no staging buffers, no second (`O_DIRECT`) descriptor, for a file that is already written.
    /// An interrupt or a passed deadline goes through the engine, which reports it as always.
    static func probeFetchedEverything(
        ranged: Bool, isNew: Bool, chunkCount: Int, trusted: Int, mirrors: Int, interrupted: Bool, deadlinePassed: Bool
    ) -> Bool {
        ranged && isNew && chunkCount > 0 && trusted == chunkCount && mirrors == 0 && !interrupted && !deadlinePassed
    }

    /// A file no larger than this is written through the page cache even when the write path is
    /// adaptive: memory takes all of it at once, while `O_DIRECT` makes the download wait for the
    /// device at its end (the last buffers must be on the disk before the file is done), which a batch
    /// pays once per file. 100 files of 4 MiB, 16 at a time, on a disk that writes 400–500 MiB/s: a
    /// median of 1.04 s through the page cache against 1.24 s adaptive (wget2 1.00 s), 5 alternated runs.
    static let pageCacheFileLimit: Int64 = 32 << 20

    func fetchSettings(
        ranged: Bool, chunkSize: Int64, totalLength: Int64?, deadline: Deadline?, hashing: Bool, hostShare: HostShare? = nil
    ) -> FetchSettings {
        var settings = FetchSettings()
        settings.transfer = options.transfer
        settings.connections = ranged ? options.connections : 1
        settings.autoConnections = options.autoConnections
        if ranged, let lender = options.lender, !options.autoConnections,
            options.connectionsWithLoans > options.connections || options.ownShare != nil
        {
            settings.connections = min(options.connectionsWithLoans, 128)
            settings.initialConnections = options.connections
            settings.lender = lender
            settings.borrowAtStart = options.ofDaemon
            settings.ownShare = options.ownShare
        }
        settings.hostShare = hostShare
        settings.speedLimits = [options.sharedSpeedLimit, options.ownSpeedLimit].compactMap { $0 }
        settings.retries = options.retries
        settings.retryWait = options.retryWait
        settings.connectTimeoutName = options.ofDaemon ? "connect-timeout" : "--connect-timeout"
        settings.deadline = deadline
        settings.maxRetryWait = options.maxRetryWait
        settings.maxSpeed = options.maxSpeed
        settings.redialSlow = options.redialSlowConnections
        settings.endGame = options.endGame
        settings.checkpointInterval = options.checkpointInterval
        settings.writePath = options.writePath
        if options.writePath == .adaptive, let total = totalLength, total <= Self.pageCacheFileLimit {
            settings.writePath = .pageCache
        }
        if hashing {
            // The hasher takes the bytes in file order: runs in file order, short enough that the
            // connections' runs fit its memory window together, keep it fed from memory.
            settings.maxRunChunks = Self.hashRunChunks(chunkSize: chunkSize, connections: options.connections)
        }
        return settings
    }

    /// The hasher that follows the download's finished prefix, when there are digests to check.
    func makeHasher(for expected: [ExpectedDigest], partial: PartialDownload) throws(SeggetError) -> PrefixHasher? {
        guard !expected.isEmpty else { return nil }
        do {
            let hasher = try PrefixHasher(
                path: partial.paths.part,
                algorithms: Array(Set(expected.map(\.algorithm))).sorted { $0.rawValue < $1.rawValue },
                direct: options.writePath == .direct,
                memoryWindow: Self.hashWindow(connections: options.connections))
            if Self.tracing {
                let start = monotonicSeconds()
                hasher.trace(every: 64 << 20) { line in
                    try? FileDescriptor.standardError.writeAll("[\(Format.fixed(monotonicSeconds() - start, 2))] \(line)\n")
                }
            }
            return hasher
        } catch {
            throw SeggetError(.fileSystem, "could not open \(partial.paths.part) for hashing: \(error).")
        }
    }

    /// Finishes hashing and compares every expected digest; a mismatch discards the partial download.
    /// Returns the checks that passed, as "ALGORITHM=hex".
    func verify(
        hasher: PrefixHasher?, expected: [ExpectedDigest], length: Int64, partial: PartialDownload, probe: ProbeResult,
        sources: [String] = []
    ) throws(SeggetError) -> [String] {
        guard let hasher else { return [] }
        hasher.advance(to: length)
        let digests: [DigestAlgorithm: [UInt8]]
        do {
            digests = try hasher.finish(length: length)
        } catch {
            throw SeggetError(.fileSystem, "could not read back \(partial.paths.part) to verify it: \(error).")
        }
        do {
            return try Self.checkDigests(
                digests, expected: expected, name: partial.paths.final,
                afterMismatch: Self.afterMismatch(sources: sources, main: probe.finalURL), origin: digestOrigin(probe))
        } catch {
            partial.discard()
            throw error
        }
    }

    /// What a whole-file digest mismatch says after the digests: where mirrors wrote bytes, the
    /// servers the bytes came from (the main URL always: the probe's first bytes are its), since a
    /// rerun would mix them again: a mirror that serves other bytes of the same length and dates is
    /// caught only by the digest.
    static func afterMismatch(sources: [String], main: String) -> String {
        let mirrors = sources.filter { $0 != main }
        guard !mirrors.isEmpty else { return "The download was discarded; \(NextStep.fetchAfresh.cli)." }
        let from: [String] = ["\(URLParts.shown(main))"] + mirrors.map { "the mirror \(URLParts.shown($0))" }
        let listed = from.dropLast().joined(separator: ", ") + " and " + from.last!
        return "The download was discarded. Its bytes came from \(listed): one of them may serve other bytes with the same length and dates, and a rerun would mix them again; \(NextStep.findBadMirror.cli)."
    }

    /// `SEGGET_DEBUG` is set: the hash's progress and where it took its bytes from go to stderr.
    static let tracing = getenv("SEGGET_DEBUG") != nil

    /// With `SEGGET_DEBUG`, says on stderr where the hash took its bytes from.
    func traceHashing(_ h: HashStatistics, length: Int64) {
        guard Self.tracing else { return }
        let line = "hash: \(h.fromMemory) of \(length) bytes hashed from memory, \(h.readBack) read back from the file "
            + "(\(h.fellOut) fell out of the window; at most \(h.peakMemory) bytes of memory kept)\n"
        try? FileDescriptor.standardError.writeAll(line)
    }

    /// Compares the computed `digests` with every expected one; returns the checks that passed, as
    /// "ALGORITHM=hex", or throws for the first mismatch, its message ending with `afterMismatch`.
    ///
    /// `origin` names where an expected digest came from (see `DigestOrigin`), said in the message.
    static func checkDigests(
        _ digests: [DigestAlgorithm: [UInt8]], expected: [ExpectedDigest], name: String, afterMismatch: String,
        origin: DigestOrigin? = nil
    ) throws(SeggetError) -> [String] {
        var verified: [String] = []
        for e in expected {
            let got = digests[e.algorithm] ?? []
            guard got == e.bytes else {
                let from = origin?.of(e)
                let source = from.map { " (\($0.phrase))" } ?? ""
                let advice = from?.field.map { " Where the server's \($0) field is what is wrong, \(NextStep.skipServerDigest.cli)" } ?? ""
                let after = (afterMismatch.isEmpty ? "" : " " + afterMismatch) + advice
                throw SeggetError(.verification, "\(e.algorithm.displayName) mismatch for \(name): expected \(e.hex)\(source), got \(hexString(got)).\(after)")
            }
            verified.append("\(e.algorithm.displayName)=\(e.hex)")
        }
        return verified
    }

    /// Reads the file at `path` from disk and checks it against `expected` (see `checkDigests`),
    /// hashing it once for all their algorithms: what a finished download checked again, a repaired
    /// file and `segget verify` share. A file that cannot be read is a file-system error, its message
    /// `unreadable` followed by the reason.
    public static func checkFile(
        at path: String, expected: [ExpectedDigest], unreadable: String, afterMismatch: String
    ) throws(SeggetError) -> [String] {
        let digests: [DigestAlgorithm: [UInt8]]
        do {
            digests = try digestFile(path: path, algorithms: Array(Set(expected.map(\.algorithm))))
        } catch {
            throw SeggetError(.fileSystem, unreadable.isEmpty ? "\(error)" : "\(unreadable): \(error).")
        }
        return try checkDigests(digests, expected: expected, name: path, afterMismatch: afterMismatch)
    }

    /// How much memory the hasher may keep of the bytes lent to it (see `PrefixHasher`): a run of
    /// 8 MiB and two staging buffers per connection, at most `hashWindowLimit`. Connections fetch
    /// runs in file order, so each one's bytes wait until the runs before them are complete: at one
    /// speed, the held bytes peak near `connections - 1` runs. The memory is the staging buffers
    /// themselves, taken as bytes arrive.
    static func hashWindow(connections: Int) -> Int {
        let n = max(1, connections)
        return min(hashWindowLimit, n * ((8 << 20) + 2 * StagedWriter.bufferSize(connections: n)))
    }

    /// The most memory a hasher keeps, so that a verified download at `-n 8` stays within 96 MiB.
    static let hashWindowLimit = 48 << 20

    /// How many chunks each connection is handed at a time while hashing behind the download: about
    /// 8 MiB, less where the connections' runs would not fit the hash window together (6 MiB at
    /// `-n 8`), at least 4 chunks. Longer runs cost more hash-window memory (what does not fit is
    /// read back from the file); shorter ones cost a request (one round trip of idle connection)
    /// per run.
    static func hashRunChunks(chunkSize: Int64, connections: Int) -> Int {
        let run = min(Int64(8 << 20), Int64(hashWindow(connections: connections) / max(1, connections)))
        return max(4, Int(run / max(1, chunkSize)))
    }
}

import Dispatch
import Glibc
import SeggetCurl
import SeggetJournal
import SeggetVerify

/// One file to fetch: probe, plan, fetch over parallel ranges, verify, and publish atomically.
///
/// The data lives in `NAME.segget-part` beside the target and a journal in `NAME.segget-journal`
/// records finished chunks, so that running the same download again (after Ctrl-C, `kill -9`, a
/// crash or a power cut) continues where it stopped. The file appears under its final name only
/// when it is complete and verified.
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
        let started = monotonicSeconds()
        var restarts = 0
        var forceFresh = !options.resume
        var forceStream = false
        var prepared = prepared?.url == url ? prepared : nil
        while true {
            do {
                defer { prepared = nil }
                return try attempt(
                    started: started, fresh: forceFresh, stream: forceStream, prepared: prepared, pool: pool, progress: progress,
                    events: events, interrupt: interrupt)
            } catch let e as RangesIgnored {
                guard !forceStream else {
                    throw SeggetError(.protocolViolation, "the server ignored byte ranges even for a single stream; giving up.")
                }
                events?(.notice("\(e.reason); starting over with one connection from the start."))
                forceStream = true
                forceFresh = true
            } catch let e as ResourceChanged {
                restarts += 1
                if restarts > 2 {
                    throw SeggetError(.protocolViolation, "the file keeps changing on the server (\(e.reason)); giving up. Try again later.")
                }
                events?(.notice("the file changed on the server (\(e.reason)); starting over from zero."))
                forceFresh = true
            } catch let e as SeggetError {
                throw e
            } catch {
                throw SeggetError(.internalError, "unexpected error: \(error)")
            }
        }
    }

    // MARK: One attempt

    private func attempt(
        started: Double, fresh: Bool, stream: Bool, prepared: PreparedDownload?, pool: ConnectionPool?,
        progress: (@Sendable (DownloadProgress) -> Void)?,
        events: (@Sendable (DownloadEvent) -> Void)?, interrupt: InterruptFlag
    ) throws -> DownloadResult {
        // One multi handle for the probe and the fetch: the probe's connection is kept alive for the
        // first range instead of a new one being opened.
        let multi = prepared?.multi ?? pool?.multi ?? MultiHandle()
        let deadline = options.timeout.map { Deadline(limit: $0, from: started) }
        var probe = try prepared?.probe
            ?? probeWithRetries(
                multi: multi, firstBytes: probeBytes(fresh: fresh, stream: stream), deadline: deadline, events: events,
                interrupt: interrupt)
        let finalPath = try resolveOutputPath(probe: probe)
        let partPath = finalPath + ".segget-part"
        let journalPath = finalPath + ".segget-journal"
        let progressPath = finalPath + ".segget-progress"
        if !options.force, let size = PosixFile.fileSize(path: finalPath), PosixFile.fileSize(path: partPath) == nil,
            PosixFile.fileSize(path: journalPath) != nil, finishedEarlier(journalPath: journalPath, size: size)
        {
            // An earlier run renamed the file into place and was stopped before removing its journal.
            try? PosixFile.remove(path: journalPath)
            try? PosixFile.remove(path: progressPath)
            events?(.notice("\(finalPath) was already completed by an earlier run."))
            return DownloadResult(
                path: finalPath, bytes: size, resumedBytes: size, receivedBytes: 0, seconds: 0,
                connections: 0, verified: [], usedRanges: probe.acceptsRanges)
        }
        if PosixFile.fileSize(path: finalPath) != nil && !options.force {
            throw SeggetError(.fileSystem, "\(finalPath) already exists; pass --force to overwrite it, or -o to choose another name.")
        }
        var expected = options.checksums
        if options.verifyServerDigests {
            for d in ServerDigests.parse(reprDigest: probe.reprDigest, digest: probe.digest, contentMD5: probe.contentMD5)
            where !expected.contains(where: { $0.algorithm == d.algorithm }) {
                expected.append(d)
            }
        }
        let ranged = probe.acceptsRanges && probe.totalLength != nil && !stream
        if !ranged, let why = probe.noRangesReason {
            events?(.notice("\(why); downloading over one connection from the start."))
        }

        // Storage: resume when the journal and data agree with the server, else start over.
        var storage: Storage
        if ranged, let total = probe.totalLength {
            let chunkSize = options.chunkSize
            if !fresh, let resumed = try openForResume(probe: probe, total: total, partPath: partPath, journalPath: journalPath, events: events) {
                storage = resumed
            } else {
                try? PosixFile.remove(path: progressPath)
                // A file the probe brought whole needs no journal: there is nothing to resume.
                storage = try createFresh(
                    probe: probe, total: total, chunkSize: chunkSize, partPath: partPath, journalPath: journalPath,
                    withJournal: Int64(probe.prefix.count) < total)
                storage.isNew = true
            }
            if let journal = storage.journal {
                // Read what an earlier run recorded (trusted only in the same boot), then start afresh.
                if journal.openedInSameBoot, let trusted = storage.trusted {
                    let plan = ChunkPlan(totalLength: total, chunkSize: storage.chunkSize)
                    let recorded = ProgressSlots.read(path: progressPath, journal: journal.header, plan: plan)
                        .filter { !trusted[$0.key] }
                    let (kept, rejected) = ChunkVoucher.keepMatchingPartials(recorded, data: storage.data, plan: plan)
                    if rejected > 0 {
                        events?(.notice("\(rejected) partly written chunk\(rejected == 1 ? "" : "s") in \(partPath) did not match the recorded checksum; fetching \(rejected == 1 ? "it" : "them") from the start."))
                    }
                    storage.partial = kept
                }
                storage.progress = try? ProgressSlots.create(path: progressPath, journal: journal.header)
            }
        } else {
            if !fresh, PosixFile.fileSize(path: journalPath) != nil {
                events?(.notice("the server cannot resume a partial download; starting over."))
            }
            storage = try createFresh(probe: probe, total: probe.totalLength ?? 0, chunkSize: options.chunkSize, partPath: partPath, journalPath: journalPath, withJournal: false)
        }
        defer {
            // Background writeback and syncs use the data file; let them finish before closing it.
            Self.writebackQueue.sync {}
            storage.progress?.close()
            storage.journal?.close()
            storage.data.close()
        }
        let plan = ChunkPlan(totalLength: probe.totalLength ?? 0, chunkSize: storage.chunkSize)
        let resumedBytes = storage.trusted.map { bitmap in
            (0..<plan.chunkCount).reduce(Int64(0)) { $0 + (bitmap[$1] ? Int64(plan.byteRange(ofChunk: $1).count) : 0) }
        } ?? 0
        if resumedBytes > 0 {
            events?(.notice("resuming: \(Format.bytes(resumedBytes)) of \(Format.bytes(plan.totalLength)) already downloaded."))
        }
        if ranged { try placeProbePrefix(probe.prefix, in: &storage, plan: plan) }

        let hasher: PrefixHasher?
        if expected.isEmpty {
            hasher = nil
        } else {
            do {
                hasher = try PrefixHasher(
                    path: partPath, algorithms: Array(Set(expected.map(\.algorithm))).sorted { $0.rawValue < $1.rawValue },
                    direct: options.writePath == .direct,
                    memoryWindow: Self.hashWindow(
                        connections: options.connections,
                        runBytes: Int64(Self.hashRunChunks(chunkSize: storage.chunkSize)) * storage.chunkSize))
            } catch {
                throw SeggetError(.fileSystem, "could not open \(partPath) for hashing: \(error).")
            }
        }
        defer { hasher?.cancel() }
        if let hasher, storage.isNew, ranged, !probe.prefix.isEmpty {
            probe.prefix.withUnsafeBytes { hasher.offer($0, at: 0) }
        }
        probe.prefix = []  // in the file (and the hasher) now; give the memory back

        var settings = FetchSettings()
        settings.transfer = options.transfer
        settings.connections = ranged ? options.connections : 1
        settings.autoConnections = options.autoConnections
        settings.retries = options.retries
        settings.retryWait = options.retryWait
        settings.deadline = deadline
        settings.maxRetryWait = options.maxRetryWait
        settings.maxSpeed = options.maxSpeed
        settings.redialSlow = options.redialSlowConnections
        settings.endGame = options.endGame
        settings.checkpointInterval = options.checkpointInterval
        settings.writePath = options.writePath
        if hasher != nil {
            // The hasher reads the file front to back; keep the finished prefix growing with the
            // download (runs of about 8 MiB in file order) so that little is left to hash at the end.
            settings.maxRunChunks = Self.hashRunChunks(chunkSize: storage.chunkSize)
        }
        var target = FetchTarget(
            url: probe.finalURL, totalLength: probe.totalLength, ranged: ranged, etag: probe.etag,
            lastModified: probe.lastModified, ifRange: ranged ? probe.ifRangeValidator : nil)
        target.mainWithoutCredentials = probe.credentialsDropped
        if ranged { target.mirrors = probeMirrors(main: probe, deadline: deadline, events: events) }
        let trusted = storage.trusted
        let engine = FetchEngine(
            target: target, settings: settings, data: storage.data, journal: storage.journal, plan: plan,
            isFinished: { trusted?[$0] ?? false }, interrupt: interrupt, multi: multi,
            partialChunks: storage.partial.mapValues(\.upTo))
        engine.onProgress = progress.map { p in { p($0) } }
        engine.onEvent = events.map { e in { e($0) } }
        engine.onPrefix = hasher.map { h in { h.advance(to: $0) } }
        engine.writer.onFlush = hasher.map { h in { h.offer($0, at: $1) } }
        engine.progressSlots = storage.progress
        engine.continueChecksums(of: storage.partial)
        if !storage.isNew, let journal = storage.journal, let kept = trusted {
            // Every chunk kept from an earlier run is read back and checked behind the download, in
            // file order. (A new file's chunks, the probe's included, were written by this run.)
            let claims = (0..<plan.chunkCount).filter { kept[$0] }.map {
                ChunkVoucher.Claim(chunk: $0, crc: journal.chunkCRCs[$0])
            }
            if !claims.isEmpty { engine.vouch(with: ChunkVoucher(data: storage.data, plan: plan, claims: claims)) }
        }
        if options.syncBeforeRename {
            // A head start on the final fdatasync, off the fetch thread. Not without --fsync: on a
            // disk slower than the network, writeback started during the download made buffered
            // writes wait for it (1 GiB on a 400 MB/s disk: 4.9-6.2 s instead of 1.3-2.2 s), while
            // the kernel left alone writes the page cache back after the download.
            let file = UncheckedBox(storage.data)
            let length = plan.totalLength
            engine.onWriteback = { Self.writebackQueue.async { file.value.startWriteback(0..<length) } }
        }
        let fetchStarted = monotonicSeconds()
        do {
            try engine.run()
        } catch let e as SeggetError {
            // The written bitmap is already exact; make it durable too, so that even a reboot keeps it.
            try? storage.journal?.checkpoint(syncingData: storage.data)
            if e.kind == .interrupted {
                let done = engine.finishedBytesForReport
                throw SeggetError(.interrupted, "interrupted with \(Format.bytes(done)) of \(Format.bytes(plan.totalLength)) saved; run the same command to resume.")
            }
            throw e
        }
        let length = ranged ? plan.totalLength : engine.streamLength
        if let total = probe.totalLength, length != total {
            throw SeggetError(.protocolViolation, "the server sent \(length) bytes but announced \(total); run the command again.")
        }

        // Verify before the file gets its final name. The data sync runs meanwhile: it waits on the
        // disk while the hash tail uses the CPU.
        var verified: [String] = []
        let earlySync = DispatchSemaphore(value: 0)
        if hasher != nil && options.syncBeforeRename {
            let file = UncheckedBox(storage.data)
            Self.writebackQueue.async {
                try? file.value.sync()
                earlySync.signal()
            }
        } else {
            earlySync.signal()
        }
        defer { earlySync.wait() }
        if let hasher {
            hasher.advance(to: length)
            let digests: [DigestAlgorithm: [UInt8]]
            do {
                digests = try hasher.finish(length: length)
            } catch {
                throw SeggetError(.fileSystem, "could not read back \(partPath) to verify it: \(error).")
            }
            for e in expected {
                let got = digests[e.algorithm] ?? []
                if got != e.bytes {
                    storage.journal?.close()
                    storage.journal = nil
                    try? PosixFile.remove(path: partPath)
                    try? PosixFile.remove(path: journalPath)
                    try? PosixFile.remove(path: progressPath)
                    throw SeggetError(.verification, "\(e.algorithm.displayName) mismatch for \(finalPath): expected \(e.hex), got \(hexString(got)). The download was discarded; the next run fetches it afresh.")
                }
                verified.append("\(e.algorithm.displayName)=\(e.hex)")
            }
        }

        // Publish: rename into place and drop the journal; with --fsync, sync before and the directory after.
        do {
            if options.syncBeforeRename { try storage.data.sync() }
            try PosixFile.rename(from: partPath, to: finalPath)
            // The journal goes at once; a run killed before this line is recognised as finished.
            storage.journal?.close()
            storage.journal = nil
            try? PosixFile.remove(path: journalPath)
            try? PosixFile.remove(path: progressPath)
            if options.syncBeforeRename { try? PosixFile.syncDirectory(containing: finalPath) }
        } catch {
            throw SeggetError(.fileSystem, "could not move the finished download to \(finalPath): \(error).")
        }
        return DownloadResult(
            path: finalPath, bytes: length, resumedBytes: resumedBytes - engine.rejectedBytes, receivedBytes: engine.receivedBytes,
            seconds: monotonicSeconds() - fetchStarted, connections: settings.connections, verified: verified,
            usedRanges: ranged)
    }

    /// True when the journal left beside a finished file describes this download and that file's size.
    private func finishedEarlier(journalPath: String, size: Int64) -> Bool {
        guard let (journal, _) = try? Journal.open(path: journalPath, currentBootID: Journal.currentBootID()) else {
            return false
        }
        defer { journal.close() }
        return journal.header.url == URLParts.redactingCredentials(url) && journal.header.totalLength == size
    }

    // MARK: Probe

    private static let writebackQueue = DispatchQueue(label: "segget.writeback")

    /// How much memory the hasher may keep of freshly written bytes so that it need not read them back
    /// (see `PrefixHasher`): what the connections have in flight in their in-order runs plus 16 MiB
    /// of slack, at most 24 MiB, so that a verified download stays within 64 MiB. It is touched only
    /// as it fills. What falls out of it is read back through the page cache, where the adaptive
    /// writer left whatever the disk could not take at once.
    static func hashWindow(connections: Int, runBytes: Int64) -> Int {
        Int(min(24 << 20, Int64(connections) * runBytes + (16 << 20)))
    }

    /// How many chunks each connection is handed at a time while hashing behind the download: about
    /// 8 MiB. Longer runs cost more hash-window memory; shorter ones cost a request (one round trip
    /// of idle connection) per run.
    static func hashRunChunks(chunkSize: Int64) -> Int {
        max(4, Int((8 << 20) / chunkSize))
    }

    private func probeWithRetries(
        multi: MultiHandle, firstBytes: Int, deadline: Deadline?, events: (@Sendable (DownloadEvent) -> Void)?,
        interrupt: InterruptFlag
    ) throws(SeggetError) -> ProbeResult {
        let prober = Prober(options: options.transfer, firstBytes: firstBytes, multi: multi, deadline: deadline)
        var attempt = 0
        while true {
            do {
                return try prober.probe(url: url)
            } catch {
                attempt += 1
                let retryable: Bool
                switch error.retryAdvice {
                case .never: retryable = false
                case .once: retryable = attempt == 1
                case .mayChange:
                    retryable = error.kind == .network
                        || (error.kind == .httpStatus && [408, 429, 500, 502, 503, 504].contains(error.httpStatus ?? 0))
                }
                guard retryable, attempt <= options.retries, !interrupt.isSet else { throw error }
                let delay: Double
                var reason = error.message
                switch RetryPolicy.decide(
                    attempt: attempt, reason: error.message, base: options.retryWait, retryAfter: error.retryAfter,
                    maxWait: options.maxRetryWait, deadline: deadline, now: monotonicSeconds(), jitter: .random(in: 0.5...1.5))
                {
                case .giveUp(let message):
                    throw SeggetError(.network, message)
                case .wait(let seconds, let note):
                    delay = seconds
                    if let note { reason = "\(RetryPolicy.sentence(reason).dropLast()); \(note)" }
                }
                if error.retryAdvice == .once {
                    reason = "\(RetryPolicy.sentence(reason).dropLast()); trying once more"
                }
                events?(.retry(connection: 0, attempt: attempt, delay: delay, reason: reason))
                let until = monotonicSeconds() + delay
                while monotonicSeconds() < until {
                    if interrupt.isSet { throw SeggetError(.interrupted, "interrupted before the download started.") }
                    usleep(50_000)
                }
            }
        }
    }

    /// Probes each mirror; keeps those that agree with the main URL on length and validators.
    private func probeMirrors(main: ProbeResult, deadline: Deadline?, events: (@Sendable (DownloadEvent) -> Void)?) -> [FetchSource] {
        var kept: [FetchSource] = []
        let mainHost = URLParts(url)?.host
        for m in options.mirrors {
            let prober = Prober(options: URLParts(m)?.host == mainHost ? options.transfer : options.transfer.withoutCredentials(), deadline: deadline)
            let shown = URLParts.redactingCredentials(m)
            let p: ProbeResult
            do {
                p = try prober.probe(url: m)
            } catch {
                events?(.notice("dropping mirror \(shown): \(error.message)"))
                continue
            }
            if !p.acceptsRanges || p.totalLength != main.totalLength {
                events?(.notice("dropping mirror \(shown): \(p.acceptsRanges ? "its length \(p.totalLength ?? -1) differs from \(main.totalLength ?? -1)" : "it does not serve byte ranges")."))
                continue
            }
            if let a = main.etag, let b = p.etag, a != b {
                events?(.notice("dropping mirror \(shown): its ETag \(b) differs from \(a)."))
                continue
            }
            if let a = main.lastModified, let b = p.lastModified, a != b {
                events?(.notice("dropping mirror \(shown): its Last-Modified differs (\(b) vs \(a))."))
                continue
            }
            // Credentials given for the main URL go to a mirror only on the same host.
            let sameHost = URLParts(p.finalURL)?.host == URLParts(url)?.host
            kept.append(FetchSource(url: p.finalURL, etag: p.etag, lastModified: p.lastModified, ifRange: p.ifRangeValidator, withoutCredentials: !sameHost))
        }
        return kept
    }

    // MARK: Paths

    private func resolveOutputPath(probe: ProbeResult) throws(SeggetError) -> String {
        if let o = options.outputPath {
            guard !o.isEmpty else { throw SeggetError(.usage, "the output path is empty.") }
            if isDirectory(o) {
                throw SeggetError(.fileSystem, "\(o) is a directory; use -d \(o) to save into it, or give a file name with -o.")
            }
            let dir = parentDirectory(of: o)
            guard isDirectory(dir) else {
                throw SeggetError(.fileSystem, "the directory \(dir) does not exist; create it or choose another output path.")
            }
            return o
        }
        let dir = options.directory ?? "."
        if !isDirectory(dir) {
            if PosixFile.fileSize(path: dir) != nil {
                throw SeggetError(.fileSystem, "\(dir) is not a directory.")
            }
            do {
                try FileSystem.makeDirectory(dir, permissions: 0o755)
            } catch {
                throw SeggetError(.fileSystem, "could not create the directory \(dir): \(error).")
            }
        }
        return OutputNames.join(dir, FileName.sanitize(probe.suggestedFileName))
    }

    // MARK: Storage

    struct Storage {
        var data: PosixFile
        var journal: Journal?
        var trusted: ChunkBitmap?
        var chunkSize: Int64
        var progress: ProgressSlots? = nil
        /// Chunks partly written by an earlier run (same boot; their bytes still match their checksum)
        /// or by the probe.
        var partial: [Int: PartialChunk] = [:]
        /// Created by this run (nothing to resume).
        var isNew = false
    }

    /// The most a probe asks for (`Range: bytes=0-…`): the first chunk, at most 1 MiB. A file no larger
    /// is downloaded by the probe alone; a larger one starts with these bytes in place. The cost is the
    /// time the first chunk takes before the other connections start (62 ms at 16 MiB/s).
    static let probePrefixLimit: Int64 = 1 << 20

    /// What the probe asks for: the first chunk (at most `probePrefixLimit`), or one byte where they
    /// would be wasted: a stream, or a journal at the likely output path (a resume, whose first chunk
    /// is usually done; a name that only `Content-Disposition` gives is not foreseen).
    func probeBytes(fresh: Bool, stream: Bool) -> Int {
        if stream { return 1 }
        if !fresh {
            let name = options.outputPath ?? OutputNames.join(options.directory, FileName.sanitize(FileName.fromURLPath(url)))
            if PosixFile.fileSize(path: name + ".segget-journal") != nil { return 1 }
        }
        return Int(min(options.chunkSize, Self.probePrefixLimit))
    }

    /// Writes the first bytes the probe brought into a new data file and counts the chunks they
    /// cover as finished (journal bits after the write, like any chunk); a partly covered chunk is
    /// continued from where they end.
    private func placeProbePrefix(_ prefix: [UInt8], in storage: inout Storage, plan: ChunkPlan) throws {
        guard storage.isNew, !prefix.isEmpty else { return }
        do {
            try prefix.withUnsafeBytes { try storage.data.write($0, at: 0) }
        } catch {
            throw FetchEngine.writeError(error)
        }
        var covered = storage.trusted ?? ChunkBitmap(count: plan.chunkCount)
        for k in 0..<plan.chunkCount {
            let r = plan.byteRange(ofChunk: k)
            let upTo = min(r.upperBound, Int64(prefix.count))
            guard upTo > r.lowerBound else { break }
            let crc = CRC32C.checksum(prefix[Int(r.lowerBound)..<Int(upTo)])
            if upTo < r.upperBound {
                storage.partial[k] = PartialChunk(upTo: upTo, crc: crc)
                break
            }
            covered.set(k)
            try? storage.journal?.markWritten(chunk: k, crc: crc)
        }
        storage.trusted = covered
    }

    private func openForResume(
        probe: ProbeResult, total: Int64, partPath: String, journalPath: String,
        events: (@Sendable (DownloadEvent) -> Void)?
    ) throws -> Storage? {
        let opened: (journal: Journal, trusted: ChunkBitmap)
        do {
            opened = try Journal.open(path: journalPath, currentBootID: Journal.currentBootID())
        } catch .missing {
            if PosixFile.fileSize(path: partPath) != nil {
                events?(.notice("found \(partPath) without its journal, so its contents cannot be trusted; starting over."))
            }
            return nil
        } catch .damaged(.unsupportedVersion(let version)) {
            events?(.notice("the journal \(journalPath) has unsupported version \(version) (another segget wrote it; this one reads journal format \(JournalCodec.currentVersion) only); starting over."))
            return nil
        } catch .damaged(let why) {
            events?(.notice("the journal \(journalPath) is damaged (\(why.shortDescription)); starting over."))
            return nil
        } catch {
            events?(.notice("the journal \(journalPath) could not be read (\(error)); starting over."))
            return nil
        }
        let h = opened.journal.header
        func restart(_ why: String) -> Storage? {
            opened.journal.close()
            events?(.notice("\(why); starting over."))
            return nil
        }
        if h.url != URLParts.redactingCredentials(url) {
            return restart("the partial download came from another URL (\(h.url))")
        }
        if h.totalLength != total {
            return restart("the file on the server changed size (\(h.totalLength) → \(total) bytes)")
        }
        if probe.etag == nil && probe.lastModified == nil {
            return restart("the server sends neither ETag nor Last-Modified, so it cannot prove the file is unchanged")
        }
        if h.etag != probe.etag || h.lastModified != probe.lastModified {
            return restart("the file changed on the server since the last run (ETag/Last-Modified differ)")
        }
        guard let size = PosixFile.fileSize(path: partPath) else {
            return restart("the partial data file \(partPath) is missing")
        }
        if size != total {
            return restart("the partial data file \(partPath) has \(size) bytes instead of \(total)")
        }
        let data: PosixFile
        do {
            data = try PosixFile.open(path: partPath, mode: .openExisting)
        } catch {
            opened.journal.close()
            throw SeggetError(.fileSystem, "could not open \(partPath) to resume: \(error).")
        }
        try lockExclusively(data, path: partPath)
        return Storage(data: data, journal: opened.journal, trusted: opened.trusted, chunkSize: h.chunkSize)
    }

    private func createFresh(
        probe: ProbeResult, total: Int64, chunkSize: Int64, partPath: String, journalPath: String, withJournal: Bool
    ) throws -> Storage {
        // Refuse to clobber the partial file of a download that is running right now.
        if let existing = try? PosixFile.open(path: partPath, mode: .openExisting) {
            try lockExclusively(existing, path: partPath)
            existing.close()
        }
        do {
            try PosixFile.remove(path: journalPath)
            try PosixFile.remove(path: partPath)
        } catch {
            throw SeggetError(.fileSystem, "could not remove the old partial download \(partPath): \(error).")
        }
        if total > 0, let free = try? PosixFile.freeSpace(directoryOf: partPath), free < total {
            throw SeggetError(.fileSystem, "not enough space: the file needs \(Format.bytes(total)) but only \(Format.bytes(free)) is free in \(parentDirectory(of: partPath)). Free some space and run the command again.")
        }
        let data: PosixFile
        do {
            data = try PosixFile.open(path: partPath, mode: .createExclusive(permissions: 0o644))
        } catch {
            throw SeggetError(.fileSystem, Self.createMessage(partPath, error))
        }
        try lockExclusively(data, path: partPath)
        if total > 0 {
            do {
                try data.preallocate(length: total)
            } catch {
                data.close()
                try? PosixFile.remove(path: partPath)
                if error == .noSpace {
                    throw SeggetError(.fileSystem, "not enough space for \(Format.bytes(total)) in \(parentDirectory(of: partPath)). Free some space and run the command again.")
                }
                throw SeggetError(.fileSystem, "could not reserve \(Format.bytes(total)) for \(partPath): \(error).")
            }
        }
        guard withJournal else { return Storage(data: data, journal: nil, trusted: nil, chunkSize: chunkSize) }
        let header = JournalHeader(
            url: url, finalURL: probe.finalURL, totalLength: total, chunkSize: chunkSize, etag: probe.etag,
            lastModified: probe.lastModified, bootID: Journal.currentBootID(), createdAt: Int64(time(nil)))
        do {
            let journal = try Journal.create(path: journalPath, header: header)
            return Storage(data: data, journal: journal, trusted: nil, chunkSize: chunkSize)
        } catch {
            data.close()
            throw SeggetError(.fileSystem, "could not create the journal \(journalPath): \(error).")
        }
    }

    private static func createMessage(_ path: String, _ error: Errno) -> String {
        switch error {
        case .fileExists, .tooManySymbolicLinkLevels: "\(path) appeared while segget was creating it (a symbolic link?); refusing to write through it."
        case .permissionDenied, .notPermitted: "permission denied writing \(path); choose another directory with -d or -o."
        case .readOnlyFileSystem: "\(parentDirectory(of: path)) is on a read-only file system; choose another directory with -d or -o."
        case .noSuchFileOrDirectory: "the directory of \(path) does not exist."
        case .noSpace: "the disk is full; free some space and run the command again."
        default: "could not create \(path): \(error)."
        }
    }

    private func lockExclusively(_ file: PosixFile, path: String) throws(SeggetError) {
        do {
            try file.tryLockExclusively()
        } catch {
            file.close()
            throw SeggetError(.fileSystem, "another segget is already downloading into \(path); wait for it or stop it first.")
        }
    }
}

func isDirectory(_ path: String) -> Bool {
    FileSystem.isDirectory(path)
}

func parentDirectory(of path: String) -> String {
    FileSystem.directoryName(of: path)
}

import SeggetJournal
import SeggetSystem
import SeggetVerify

/// Hashes groups of pieces (see `PiecePlan`) read back from the data file, behind the download, and
/// hands the results to the loop: each group, and the pieces of it that did not match. Reading
/// and hashing run one group per step on `WorkerPool.readBack`, beside the hasher of the whole file
/// and the check of a resume's chunks; the bytes come from the page cache where they were just
/// written (the writer's own buffers are the `verify` branch's path to the whole-file hasher; this
/// stays apart and simple).
final class PieceHasher: @unchecked Sendable {
    private let data: BlockStorage
    private let geometry: PiecePlan
    private let lock = ConditionLock()
    // Guarded by `lock`.
    private var queue: [Int] = []
    private var results: [(group: Int, bad: [Int])] = []
    private var stepping = false
    private var stopping = false
    /// Bytes read back and hashed.
    private var hashed: Int64 = 0

    init(data: BlockStorage, geometry: PiecePlan) {
        self.data = data
        self.geometry = geometry
    }

    /// Queues group `g` for hashing.
    func check(_ g: Int) {
        let start: Bool = lock.withLock {
            guard !stopping else { return false }
            queue.append(g)
            guard !stepping else { return false }
            stepping = true
            return true
        }
        if start { WorkerPool.readBack.async { [self] in step() } }
    }

    /// The results since the last call.
    func take() -> [(group: Int, bad: [Int])] {
        lock.withLock {
            defer { results.removeAll(keepingCapacity: true) }
            return results
        }
    }

    var bytesHashed: Int64 { lock.withLock { hashed } }

    /// Stops hashing and waits until no step reads the file any more.
    func stop() {
        lock.withLock {
            stopping = true
            queue.removeAll()
            while stepping { lock.wait() }
        }
    }

    private func step() {
        let g: Int? = lock.withLock {
            guard !stopping, !queue.isEmpty else {
                stepping = false
                lock.broadcast()
                return nil
            }
            return queue.removeFirst()
        }
        guard let g else { return }
        let bad = Self.badPieces(geometry.pieces(ofGroup: g), of: geometry, in: data)
        lock.withLock {
            results.append((g, bad))
            hashed += geometry.byteRange(ofGroup: g).count64
        }
        WorkerPool.readBack.async { [self] in step() }
    }

    /// The pieces of `range` whose bytes in `data` do not hash to their digest (one that cannot be
    /// read counts as not matching).
    static func badPieces(_ range: Range<Int>, of geometry: PiecePlan, in data: BlockStorage) -> [Int] {
        let pieces = geometry.pieces
        let size = geometry.plan.totalLength
        let digester = Digester(pieces.algorithm)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var bad: [Int] = []
        for p in range {
            let bytes = pieces.byteRange(of: p, size: size)
            var at = bytes.lowerBound
            var complete = true
            while at < bytes.upperBound {
                let want = Int(min(Int64(buffer.count), bytes.upperBound - at))
                guard let got = try? data.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: at), got > 0 else {
                    complete = false
                    break
                }
                digester.update(UnsafeRawBufferPointer(rebasing: buffer[0..<got]))
                at += Int64(got)
            }
            let digest = digester.finalize()
            if !complete || !pieces.matches(p, digest: digest) { bad.append(p) }
        }
        return bad
    }
}

extension Range<Int64> {
    /// The number of bytes, as an `Int64`.
    var count64: Int64 { upperBound - lowerBound }
}

/// A download's piece checks: the ledger (what is decided) and the hasher (what reads), with the
/// sources' URLs for messages and what the result reports.
final class PieceChecks {
    var ledger: PieceLedger
    let hasher: PieceHasher
    let sourceURLs: [String]
    /// Sources demoted for serving bad pieces, in the order they were.
    var demotedURLs: [String] = []
    /// Bytes of failed groups, fetched again.
    var refetchedBytes: Int64 = 0
    /// Chunks kept from an earlier run that the journal records as verified against these hashes: a
    /// group made of such chunks only is trusted once their checksums match, without being hashed.
    var recordedChunks: Set<Int> = []
    /// Whether groups that match are recorded in the journal (its pieces record names these hashes).
    var records = false
    /// Pieces trusted by the journal's record rather than hashed again.
    var recordedPieces = 0

    init(geometry: PiecePlan, data: BlockStorage, sourceURLs: [String]) {
        ledger = PieceLedger(geometry: geometry, sources: sourceURLs.count)
        hasher = PieceHasher(data: data, geometry: geometry)
        self.sourceURLs = sourceURLs
    }

    /// What the download reports about its pieces.
    var report: PieceReport {
        PieceReport(
            algorithm: ledger.geometry.pieces.algorithm, pieceCount: ledger.geometry.pieces.count,
            verifiedPieces: ledger.states.enumerated().reduce(0) { $0 + ($1.element == .verified ? ledger.geometry.pieces(ofGroup: $1.offset).count : 0) },
            failedPieces: ledger.failedPieces, badSources: demotedURLs, recordedPieces: recordedPieces)
    }
}

/// What a download's piece checks found (see ``DownloadResult/pieces``).
public struct PieceReport: Sendable, Equatable {
    public var algorithm: DigestAlgorithm
    public var pieceCount: Int
    /// Pieces whose bytes matched their hash, in this run (a resume's kept pieces included).
    public var verifiedPieces: Int
    /// Pieces that failed their hash and were fetched again, in the order they failed.
    public var failedPieces: [Int]
    /// Servers that served pieces that failed and got no more work.
    public var badSources: [String]
    /// Of `verifiedPieces`, those an earlier run verified and the journal recorded: kept because their
    /// chunks' checksums matched, not hashed again.
    public var recordedPieces: Int

    public init(
        algorithm: DigestAlgorithm, pieceCount: Int, verifiedPieces: Int, failedPieces: [Int], badSources: [String],
        recordedPieces: Int = 0
    ) {
        self.algorithm = algorithm
        self.pieceCount = pieceCount
        self.verifiedPieces = verifiedPieces
        self.failedPieces = failedPieces
        self.badSources = badSources
        self.recordedPieces = recordedPieces
    }
}

extension FetchEngine {
    /// Sets up the checks of `geometry`'s pieces: from now on a chunk counts as in the file (for the
    /// journal's claims nothing changes; for the whole-file hasher's prefix and the end of the
    /// download it does) only once its group matched its hashes. Chunks already finished and not
    /// waiting for the resume's check are hashed at once. The journal records the groups that match;
    /// a resume's kept chunks that it recorded for these hashes are not hashed again (see
    /// `recordInJournal`).
    /// `probeBytesFromMain`: the chunks finished now came with the probe, from the main URL (a new
    /// download), rather than from an earlier run. `verified`: groups whose pieces were hashed
    /// already (a repair's good pieces): their chunks are in the file at once.
    func checkPieces(_ geometry: PiecePlan, probeBytesFromMain: Bool, verified: Set<Int> = []) {
        let checks = PieceChecks(geometry: geometry, data: data, sourceURLs: target.sources.map(\.url))
        pieceChecks = checks
        let finished = core.finishedChunks
        let vouched = Set(vouching?.claims.map(\.chunk) ?? [])
        for k in inFile.indices { inFile[k] = false }
        prefixChunks = 0
        for g in verified.sorted() {
            for k in checks.ledger.verified(g) { markInFile(k) }
        }
        recordInJournal(checks, kept: vouched)
        for k in finished.indices where finished[k] && !vouched.contains(k) && !verified.contains(geometry.group(ofChunk: k)) {
            // The probe's first bytes came from the main URL.
            if probeBytesFromMain { checks.ledger.wrote(chunk: k, source: 0) }
            chunkInFile(k)
        }
    }

    /// Ties the journal's verified bits to these piece hashes: where it recorded them, the bits of
    /// the chunks kept (`kept`, checked by their checksums behind the download) stand; every other
    /// bit names bytes that will change and is cleared, and synced, first. A journal that cannot
    /// record (format version 2, an I/O error) records nothing and trusts nothing.
    private func recordInJournal(_ checks: PieceChecks, kept: Set<Int>) {
        guard let journal, journal.recordsPieces else { return }
        do throws(Errno) {
            let stands = try journal.bindPieces(fingerprint: checks.ledger.geometry.pieces.fingerprint)
            let stale = (0..<plan.chunkCount).filter { journal.verified[$0] && !(stands && kept.contains($0)) }
            try journal.clearVerified(chunks: stale)
            checks.recordedChunks = stands ? kept.filter { journal.verified[$0] } : []
            checks.records = true
        } catch {
            trace("the journal cannot record verified pieces (\(error)); every piece is hashed")
        }
    }

    /// Chunk `k`'s bytes are in the file: with piece checks, its group is hashed once complete (or
    /// trusted, when the journal recorded it verified and its chunks' checksums matched); without,
    /// it is in the file at once.
    func chunkInFile(_ k: Int) {
        guard let checks = pieceChecks else { return markInFile(k) }
        guard let g = checks.ledger.inFile(chunk: k) else { return }
        let geometry = checks.ledger.geometry
        if geometry.chunks(ofGroup: g).allSatisfy(checks.recordedChunks.contains) {
            checks.recordedPieces += geometry.pieces(ofGroup: g).count
            for k in checks.ledger.verified(g) { markInFile(k) }
        } else {
            checks.hasher.check(g)
        }
    }

    /// Chunk `k`, about to be fetched again: the journal's verified bit goes first (synced), so that
    /// new bytes with their new checksum never meet it. False when the journal could not be updated
    /// (the download has then failed).
    func forgetVerified(_ k: Int) -> Bool {
        pieceChecks?.recordedChunks.remove(k)
        guard let journal, journal.verified[k] else { return true }
        do throws(Errno) {
            try journal.clearVerified(chunks: [k])
            return true
        } catch {
            apply(.failed(SeggetError(.fileSystem, "could not update the journal: \(error). Free some space or fix permissions, then \(NextStep.resume.cli)")))
            return false
        }
    }

    /// Takes the hasher's results: a group that matched is in the file; one that did not is fetched
    /// again and the sources that served it are judged (see `PieceLedger.failed`).
    func collectPieces() {
        guard let checks = pieceChecks else { return }
        for (g, bad) in checks.hasher.take() {
            if bad.isEmpty {
                for k in checks.ledger.verified(g) {
                    markInFile(k)
                    guard checks.records, let journal else { continue }
                    do throws(Errno) { try journal.markVerified(chunk: k) } catch {
                        checks.records = false
                        trace("the journal stopped recording verified pieces: \(error)")
                    }
                }
                continue
            }
            let failure = checks.ledger.failed(g, bad: bad)
            let geometry = checks.ledger.geometry
            let range = geometry.byteRange(ofGroup: g)
            let names = failure.writers.map { URLParts.shown(checks.sourceURLs[$0]).description }
            var sentence = "piece\(bad.count == 1 ? "" : "s") \(bad.map(String.init).joined(separator: ", ")) (bytes \(range.lowerBound)-\(range.upperBound - 1)) failed \(geometry.pieces.algorithm.displayName) check"
            if !names.isEmpty { sentence += "; served by \(names.joined(separator: " and "))" }
            for s in failure.demote {
                checks.demotedURLs.append(checks.sourceURLs[s])
                apply(.sourceFailed(s))
            }
            if !failure.demote.isEmpty {
                sentence += ", which \(failure.demote.count == 1 ? "gets" : "get") no more work"
            }
            if let why = failure.giveUp {
                onEvent?(.notice(sentence + "."))
                // A stream keeps nothing; a repair (`verify --repair`) has no journal: its pieces that
                // matched are in the file itself.
                let kept =
                    streamGate != nil ? "the stream stops. Try other mirrors"
                    : journal == nil ? "the repair stops (the file keeps the pieces that were repaired); run it again with other mirrors in the Metalink"
                    : "the download stops (its journal keeps the pieces that matched). Try other mirrors"
                apply(.failed(SeggetError(.verification, "\(why); \(kept).")))
                return
            }
            onEvent?(.notice(sentence + "; fetching \(bad.count == 1 ? "it" : "them") again."))
            checks.refetchedBytes += range.count64
            for k in failure.reopen {
                chunkCRCs.forget(k)
                reopen(k)
            }
        }
    }
}

extension PieceReport {
    /// "32 SHA-256 pieces checked, 3 fetched again (http://a/f served bad ones)": for a summary line.
    public var summary: String {
        var text = "\(verifiedPieces) \(algorithm.displayName) piece\(verifiedPieces == 1 ? "" : "s") checked"
        if recordedPieces > 0 { text += " (\(recordedPieces) by the journal's record)" }
        if !failedPieces.isEmpty { text += ", \(failedPieces.count) fetched again" }
        if !badSources.isEmpty {
            text += " (\(badSources.map { URLParts.shown($0).description }.joined(separator: ", ")) served bad ones)"
        }
        return text
    }
}

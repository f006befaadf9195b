import Dispatch
import SeggetSystem
import SeggetJournal

/// What `FileRepair.run` found and did.
public struct RepairReport: Sendable, Equatable {
    public var path: String
    public var size: Int64
    public var algorithm: DigestAlgorithm
    public var pieceCount: Int
    /// The pieces whose bytes did not match their hash (in file order).
    public var badPieces: [Int]
    /// The byte ranges of those pieces.
    public var badRanges: [Range<Int64>]
    /// Bytes received to repair them (0 when only checked).
    public var fetchedBytes: Int64
    /// The servers that sent them.
    public var sources: [String]
    /// Servers that sent bad pieces while repairing and got no more work.
    public var badSources: [String]
    /// Whole-file digests checked after a repair, as "ALGORITHM=hex".
    public var verified: [String]
    /// The bad pieces were fetched again and matched.
    public var repaired: Bool
}

/// Checks a file already on disk against a Metalink's piece hashes and, asked to, repairs it in
/// place: every piece is hashed; only the pieces that fail are fetched from the file's URLs (each
/// probed first: same length, byte ranges), written over the bad bytes and hashed again; a server
/// that sends bad pieces gets no more work, as in a download. Then the file's whole digest, when the
/// Metalink gives one, is checked. The file keeps its name throughout: a repair stopped half-way
/// leaves it no worse than it was, and a second run repairs what is left.
public enum FileRepair {
    public static func run(
        path: String, file: MetalinkDownload, repair: Bool, options: DownloadOptions = DownloadOptions(),
        events: (@Sendable (DownloadEvent) -> Void)? = nil, interrupt: InterruptFlag = InterruptFlag()
    ) throws(SeggetError) -> RepairReport {
        guard let pieces = file.pieces, let size = file.size else {
            throw SeggetError(.usage, "the Metalink gives no piece hashes for \(ServerText(file.name)), so \(path) can be checked only as a whole (--checksum).")
        }
        let data: PosixFile
        let onDisk: Int64
        do throws(Errno) {
            data = try PosixFile.open(path: path, mode: repair ? .openExisting : .readOnly)
            onDisk = try data.size()
        } catch {
            throw SeggetError(.fileSystem, "cannot open \(path)\(repair ? " for repair" : ""): \(error).")
        }
        defer { data.close() }
        guard onDisk <= size else {
            throw SeggetError(.usage, "\(path) is \(onDisk) bytes, more than the \(size) the Metalink gives \(ServerText(file.name)); it is another file.")
        }
        if onDisk < size && repair {
            do throws(Errno) { try data.truncate(to: size) } catch {
                throw SeggetError(.fileSystem, "cannot extend \(path) to \(size) bytes: \(error).")
            }
        }
        // Chunks no longer than a piece: only the bad pieces' bytes are fetched.
        let chunk = PiecePlan.chunkSize(pieceLength: pieces.length, requested: min(options.chunkSize, pieces.length))
        let plan = ChunkPlan(totalLength: size, chunkSize: chunk)
        guard let geometry = PiecePlan(pieces: pieces, plan: plan) else {
            throw SeggetError(.usage, "the Metalink's pieces of \(ServerText(file.name)) do not cover its size.")
        }
        let bad = badPieces(geometry, in: data)
        var report = RepairReport(
            path: path, size: size, algorithm: pieces.algorithm, pieceCount: pieces.count, badPieces: bad,
            badRanges: bad.map { pieces.byteRange(of: $0, size: size) }, fetchedBytes: 0, sources: [], badSources: [], verified: [],
            repaired: false)
        guard repair, !bad.isEmpty else {
            // Every piece matching is not every byte checked where the Metalink gives the whole
            // file's digest too: it was left out, so a document whose digest contradicts its pieces
            // got "all pieces match", exit 0 (and 6 from the repair run before it).
            if bad.isEmpty { report.verified = try checkWholeDigests(of: file, at: path) }
            return report
        }
        let badGroups = Set(bad.map { geometry.group(ofChunk: plan.chunk(containing: pieces.byteRange(of: $0, size: size).lowerBound)) })

        var o = options
        o.writePath = .pageCache
        o.connections = min(options.connections, max(1, badGroups.count))
        let target = try sources(for: file, size: size, options: o, events: events)
        report.sources = target.sources.map(\.url)
        let loop = DownloadLoop(stepsOnLoop: true)
        var settings = Download(url: target.url, options: o).fetchSettings(
            ranged: true, chunkSize: plan.chunkSize, totalLength: size, deadline: nil, hashing: false)
        settings.checkpointInterval = 0
        let engine = FetchEngine(
            target: target, settings: settings, data: data, journal: nil, plan: plan,
            isFinished: { !badGroups.contains(geometry.group(ofChunk: $0)) }, interrupt: interrupt, driver: loop.driver)
        engine.onEvent = events.map { e in { e($0) } }
        engine.checkPieces(geometry, probeBytesFromMain: false, verified: Set(0..<geometry.groupCount).subtracting(badGroups))
        let failure = loop.run([engine]).first ?? nil
        report.fetchedBytes = engine.receivedBytes
        report.badSources = engine.pieceChecks?.demotedURLs ?? []
        if let failure {
            if let e = failure as? SeggetError {
                if e.kind == .interrupted { throw SeggetError(.interrupted, "interrupted; \(path) keeps what was repaired so far. Run the same command to repair the rest.") }
                throw e
            }
            throw SeggetError(.internalError, "unexpected error: \(failure)")
        }
        do throws(Errno) { try data.sync() } catch {
            throw SeggetError(.fileSystem, "cannot sync \(path): \(error).")
        }
        report.repaired = true
        report.verified = try checkWholeDigests(of: file, at: path)
        // The repair's writes moved the modification time: the mark of the download that made the
        // file is renewed, so that its command run again finds it done.
        FinishedMark.renew(on: data, path: path, verified: report.verified)
        return report
    }

    /// The file at `path`, whose pieces all match, against the Metalink's digests of the whole file
    /// (none: nothing to check); the digests that matched, as `DownloadResult.verified` names them.
    static func checkWholeDigests(of file: MetalinkDownload, at path: String) throws(SeggetError) -> [String] {
        guard !file.checksums.isEmpty else { return [] }
        return try Download.checkFile(
            at: path, expected: file.checksums, unreadable: "cannot read back \(path)",
            afterMismatch: "Its pieces match, so the Metalink contradicts itself.")
    }

    /// The pieces of the file in `data` that do not match, hashed on two threads (one per half).
    static func badPieces(_ geometry: PiecePlan, in data: BlockStorage) -> [Int] {
        let groups = geometry.groupCount
        let parts = max(1, min(2, groups))
        let found = ResultSlots(count: parts)
        // Reads are `pread`s at offsets of their own: the two threads share the descriptor safely.
        let shared = SharedStorage(data)
        DispatchQueue.concurrentPerform(iterations: parts) { part in
            let data = shared.storage
            let range = (groups * part / parts)..<(groups * (part + 1) / parts)
            var bad: [Int] = []
            for g in range { bad += PieceHasher.badPieces(geometry.pieces(ofGroup: g), of: geometry, in: data) }
            found.set(part, bad)
        }
        return found.values.flatMap { $0 }
    }

    /// The file's URLs that serve it with byte ranges at the right length (probed one after another):
    /// the first is the main source, the rest mirrors. Each one dropped is named in a notice.
    static func sources(
        for file: MetalinkDownload, size: Int64, options: DownloadOptions, events: (@Sendable (DownloadEvent) -> Void)?
    ) throws(SeggetError) -> FetchTarget {
        var kept: [FetchSource] = []
        var last: SeggetError?
        for u in [file.url] + file.mirrors {
            let probe: ProbeResult
            do {
                probe = try Prober(options: options.transfer).probe(url: u)
            } catch {
                events?(.notice("not using \(URLParts.shown(u)): \(error.message)"))
                last = error
                continue
            }
            guard probe.acceptsRanges, probe.totalLength == size else {
                events?(.notice("not using \(URLParts.shown(u)): \(probe.acceptsRanges ? "it serves \(probe.totalLength ?? -1) bytes, not \(size)" : "it does not serve byte ranges")."))
                continue
            }
            kept.append(FetchSource(
                url: probe.finalURL, etag: probe.etag, lastModified: probe.lastModified, ifRange: probe.ifRangeValidator,
                withoutCredentials: probe.credentialsDropped))
        }
        guard let main = kept.first else {
            throw last ?? SeggetError(.network, "none of the Metalink's URLs for \(ServerText(file.name)) serves it with byte ranges; nothing was repaired.")
        }
        var target = FetchTarget(
            url: main.url, totalLength: size, ranged: true, etag: main.etag, lastModified: main.lastModified, ifRange: main.ifRange)
        target.mainWithoutCredentials = main.withoutCredentials
        target.mirrors = Array(kept.dropFirst())
        return target
    }
}

/// Results filled in from several threads, one slot each.
private final class ResultSlots: @unchecked Sendable {
    private let lock = ConditionLock()
    private var slots: [[Int]]
    init(count: Int) { slots = Array(repeating: [], count: count) }
    func set(_ i: Int, _ value: [Int]) { lock.withLock { slots[i] = value } }
    var values: [[Int]] { lock.withLock { slots } }
}

/// A storage read from two threads at once (`pread` at offsets of their own).
private struct SharedStorage: @unchecked Sendable {
    let storage: BlockStorage
    init(_ storage: BlockStorage) { self.storage = storage }
}

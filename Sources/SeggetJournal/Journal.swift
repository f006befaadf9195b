/// Why an existing journal could not be opened.
public enum JournalOpenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// There is no journal at the path: nothing to resume.
    case missing
    /// The journal's bytes cannot be trusted: start over.
    case damaged(JournalDecodeError)
    /// Reading or writing the journal failed.
    case io(Errno)

    public var description: String {
        switch self {
        case .missing: "There is no journal to resume from."
        case .damaged(let error): error.description
        case .io(let error): "The journal could not be read or updated: \(error)."
        }
    }
}

/// A checkpoint's first half: the chunks written before the data file's sync started.
///
/// Only these may be marked durable when the sync returns; chunks finished during the sync may still be
/// in flight.
public struct CheckpointSnapshot: Sendable {
    /// The written bitmap at the moment the snapshot was taken.
    public let written: ChunkBitmap
}

/// The live journal of one download: which chunks are written, and which are durable.
///
/// Two bitmaps, two guarantees:
/// - `written`: a chunk's bit is set (one 1-byte write) right after all its data was written. The page
///   cache outlives a killed process, so after `kill -9` this bitmap is exact.
/// - `durable`: set only by a checkpoint, for chunks whose data a completed `fdatasync` covered. Whatever
///   part of it reaches the disk before a power cut claims only data that reached the disk too.
///
/// On open, the boot ID decides: the same boot means the page cache survived and `written` is trusted;
/// another boot (or an unknown one) means only `durable` is.
///
/// Beside each bit, the chunk's CRC-32C (`chunkCRCs`), computed from the bytes as they were handed to the
/// data file. A bit only says which chunks are worth checking: a resume keeps a claimed chunk only once
/// its bytes read back from the data file match this checksum. The checksum is written before the
/// written bit, and synced before the durable bit is written, so no bit ever names a chunk whose
/// checksum could be older on disk than the bit.
///
/// Not thread-safe: use a journal from one thread (the engine's loop). The data file's `fdatasync` may
/// run elsewhere between `beginCheckpoint()` and `completeCheckpoint(_:)`.
public final class Journal: @unchecked Sendable {
    /// The header as last written (with this run's boot ID).
    public private(set) var header: JournalHeader
    /// The chunks whose data was completely written (in the page cache at least).
    public private(set) var written: ChunkBitmap
    /// The chunks whose data a completed `fdatasync` covered.
    public private(set) var durable: ChunkBitmap
    /// The CRC-32C of each chunk's bytes as recorded by `markWritten(chunk:crc:)`; 0 where none was.
    public private(set) var chunkCRCs: [UInt32]
    /// True while a checksum written since the journal's last sync may not be on disk yet.
    private var checksumsUnsynced = false
    /// False only in tests that show the power-cut checker catches a journal without this sync.
    internal var syncsChecksumsBeforeDurableBits = true
    /// Tests switch this off to show that the power-cut check catches a journal whose cleared
    /// verified bits are not synced before what they vouched for may change.
    internal var syncsVerifiedClears = true
    /// Created without a sync: the image must be synced before the first durable bit is written.
    private var imageUnsynced = false
    /// Created by `create(path:)` and its directory not synced since: the path whose directory the
    /// first checkpoint syncs.
    private var unsyncedDirectory: String?
    /// True when `open` found the boot ID of this boot: nothing rebooted since the journal was last
    /// opened, so the page cache (and anything recorded beside the journal in it) is intact.
    public private(set) var openedInSameBoot = false

    private let storage: BlockStorage
    /// The storage, for tests that tamper with it.
    internal var storageForTesting: BlockStorage { storage }
    private let writtenOffset: Int64
    private let durableOffset: Int64
    /// The format version of the file (3 for every journal this build creates; 2 for one an older
    /// build created, which has no room for verified pieces).
    public let version: UInt16
    /// The piece hashes `verified` is about (see `bindPieces(fingerprint:)`); nil: none.
    public private(set) var piecesFingerprint: [UInt8]?
    /// Chunks whose piece group matched the hashes of `piecesFingerprint`, as recorded. A bit vouches
    /// for the chunk's bytes that its checksum names: it is cleared, and the clearing synced, before
    /// the chunk is fetched again (`clearVerified`).
    public private(set) var verified: ChunkBitmap
    private let onClose: () -> Void
    private var isClosed = false

    /// The boot ID used when the real one cannot be read, or the stored one is damaged; never trusted
    /// to match.
    public static let unknownBootID = JournalCodec.unknownBootID

    private init(
        storage: BlockStorage, header: JournalHeader, written: ChunkBitmap, durable: ChunkBitmap,
        chunkCRCs: [UInt32], version: UInt16 = JournalCodec.currentVersion, piecesFingerprint: [UInt8]? = nil,
        verified: ChunkBitmap? = nil, onClose: @escaping () -> Void
    ) {
        self.storage = storage
        self.version = version
        self.piecesFingerprint = piecesFingerprint
        self.verified = verified ?? ChunkBitmap(count: header.chunkCount)
        self.header = header
        self.written = written
        self.durable = durable
        self.chunkCRCs = chunkCRCs
        self.writtenOffset = JournalCodec.writtenBitmapOffset(header: header)
        self.durableOffset = JournalCodec.durableBitmapOffset(header: header)
        self.onClose = onClose
    }

    // MARK: Creating

    /// Creates a fresh journal (no chunk finished) at `path`, atomically replacing any file there.
    ///
    /// Writes `path.segget-new` (created exclusively, mode 0600) and renames it over `path`: a crash
    /// leaves either the old journal or the new one, never a mix. Nothing is synced yet. A new journal
    /// claims nothing, so a power cut that loses or tears it loses no data: the next run finds it
    /// missing or damaged (its header has a checksum) and starts over. The first checkpoint that makes
    /// chunks durable syncs the journal (header first) and then the directory, so that from then on
    /// the journal's name and the data file's survive a power cut. A download that finishes before its
    /// first checkpoint never waits on the disk for its journal (a batch of small files paid an
    /// `fdatasync` and a directory `fsync` per file, tens of milliseconds each on a busy disk).
    ///
    /// When nothing is at `path` (the usual case: starting over removes the old journal first), the
    /// journal is created there directly, exclusively: there is no old journal to keep, and a crash
    /// leaves none or a new one, which a torn write makes damaged, never wrong.
    public static func create(path: String, header: JournalHeader) throws(Errno) -> Journal {
        let direct = FileSystem.status(path, followingLinks: false) == nil
        let target = direct ? path : path + ".segget-new"
        // A leftover temporary from a crash during an earlier create goes first.
        if !direct { try PosixFile.remove(path: target) }
        let file = try PosixFile.open(path: target, mode: .createExclusive(permissions: 0o600))
        do throws(Errno) {
            let journal = try Journal(creatingOn: file, header: header, syncing: false, onClose: { file.close() })
            if !direct { try PosixFile.rename(from: target, to: path) }
            journal.unsyncedDirectory = path
            return journal
        } catch {
            file.close()
            try? PosixFile.remove(path: target)
            throw error
        }
    }

    /// Writes a fresh journal (no chunk finished) over the whole of `storage`; with `syncing`, syncs it
    /// at once, else the first checkpoint that makes chunks durable syncs it before its durable bits.
    /// For tests and callers that manage files themselves; `create(path:header:)` is atomic, this is not.
    public convenience init(creatingOn storage: BlockStorage, header: JournalHeader, syncing: Bool = true) throws(Errno) {
        try self.init(creatingOn: storage, header: header, syncing: syncing, onClose: {})
    }

    private convenience init(
        creatingOn storage: BlockStorage, header: JournalHeader, syncing: Bool, onClose: @escaping () -> Void
    ) throws(Errno) {
        let empty = ChunkBitmap(count: header.chunkCount)
        let image = JournalCodec.encode(header: header, written: empty, durable: empty)
        try storage.truncate(to: 0)
        try storage.write(image, at: 0)
        if syncing { try storage.sync() }
        self.init(
            storage: storage, header: header, written: empty, durable: empty,
            chunkCRCs: [UInt32](repeating: 0, count: header.chunkCount), onClose: onClose)
        imageUnsynced = !syncing
    }

    // MARK: Opening

    /// Opens the journal at `path` to resume, and returns the chunks that may be on disk: each must still
    /// be checked against its checksum in `chunkCRCs` before it is kept.
    ///
    /// See `open(storage:currentBootID:)` for what is trusted when.
    public static func open(
        path: String, currentBootID: String
    ) throws(JournalOpenError) -> (journal: Journal, trusted: ChunkBitmap) {
        let file: PosixFile
        do {
            file = try PosixFile.open(path: path, mode: .openExisting)
        } catch .noSuchFileOrDirectory {
            throw .missing
        } catch {
            throw .io(error)
        }
        do throws(JournalOpenError) {
            return try open(storage: file, currentBootID: currentBootID, onClose: { file.close() })
        } catch {
            file.close()
            throw error
        }
    }

    /// Opens the journal stored in `storage` to resume; returns it with the chunks that can be trusted.
    ///
    /// - Same boot ID as stored (and not `unknownBootID`): nothing rebooted, the page cache is intact, so
    ///   the written bitmap is trusted.
    /// - Any other boot ID: a power cut or crash may have lost unsynced pages, so only the durable bitmap
    ///   is trusted, and the written bitmap is cut back to it.
    ///
    /// Then this run's boot ID is written to the boot record and the journal is synced. Order matters:
    /// the cut-back written bitmap is synced before the boot record names the new boot, so a `kill -9` in
    /// between still finds the old boot ID and distrusts the stale written bits. A power cut that tears the
    /// boot record makes it read as unknown: again only the durable bitmap is trusted. The durable bitmap
    /// is never widened here: no data sync vouches for more.
    public static func open(
        storage: BlockStorage, currentBootID: String
    ) throws(JournalOpenError) -> (journal: Journal, trusted: ChunkBitmap) {
        try open(storage: storage, currentBootID: currentBootID, onClose: {})
    }

    private static func open(
        storage: BlockStorage, currentBootID: String, onClose: @escaping () -> Void
    ) throws(JournalOpenError) -> (journal: Journal, trusted: ChunkBitmap) {
        let stored = try readImage(storage)
        let bootID = JournalHeader.fittingBootID(currentBootID)  // compare like with like
        let sameBoot = stored.header.bootID == bootID && bootID != unknownBootID && !bootID.isEmpty
        // In the same boot written ⊇ durable already; the union only guards against a hand-edited file.
        let trusted = sameBoot ? stored.written.union(stored.durable) : stored.durable
        let header = stored.header.with(bootID: currentBootID)
        let journal = Journal(
            storage: storage, header: header, written: trusted, durable: stored.durable,
            chunkCRCs: stored.chunkCRCs, version: stored.version, piecesFingerprint: stored.piecesFingerprint,
            verified: stored.verified, onClose: onClose)
        journal.openedInSameBoot = sameBoot
        do throws(Errno) {
            if trusted != stored.written {
                try storage.write(trusted.bytes, at: journal.writtenOffset)
                try storage.sync()
            }
            if header != stored.header {
                try storage.write(
                    JournalCodec.encodeBootRecord(header.bootID), at: JournalCodec.bootRecordOffset(header: header))
            }
            // Also flushes what a killed predecessor wrote but never synced (durable bits whose data
            // sync had completed), so that a checkpoint with nothing new still leaves the disk current.
            try storage.sync()
        } catch {
            throw .io(error)
        }
        return (journal, trusted)
    }

    /// Reads and decodes the whole journal, reading the header first so that a huge or foreign file
    /// is rejected before it is read.
    /// The header of the journal at `path`, read without locking or writing anything (its boot ID
    /// reads as `unknownBootID`); nil when there is no file there or it is not a journal this build
    /// reads. Only the header is checked (its checksum): `open` checks the rest before trusting it.
    public static func header(at path: String) -> JournalHeader? {
        guard let file = try? PosixFile.open(path: path, mode: .readOnly) else { return nil }
        defer { file.close() }
        guard let prefix = try? file.read(count: JournalCodec.fixedPrefixLength, at: 0),
            let (length, _) = try? JournalCodec.declaredHeaderLengthAndVersion(prefix),
            let bytes = try? file.read(count: length, at: 0), bytes.count == length,
            let (header, _) = try? JournalCodec.decodeHeader(bytes)
        else { return nil }
        return header
    }

    /// The chunks the journal at `path` records as written (its written and durable bitmaps
    /// together) and its header, read without locking or writing anything; nil where there is no
    /// file or it does not decode. For showing what a stopped download holds (the daemon's piece
    /// map), not for resuming: `open` decides what is trusted.
    public static func recordedChunks(at path: String) -> (header: JournalHeader, chunks: ChunkBitmap)? {
        guard let file = try? PosixFile.open(path: path, mode: .readOnly) else { return nil }
        defer { file.close() }
        guard let image = try? readImage(file) else { return nil }
        return (image.header, image.written.union(image.durable))
    }

    private static func readImage(
        _ storage: BlockStorage
    ) throws(JournalOpenError) -> (
        header: JournalHeader, written: ChunkBitmap, durable: ChunkBitmap, chunkCRCs: [UInt32],
        version: UInt16, piecesFingerprint: [UInt8]?, verified: ChunkBitmap
    ) {
        func io<T>(_ body: () throws(Errno) -> T) throws(JournalOpenError) -> T {
            do { return try body() } catch { throw .io(error) }
        }
        func decoding<T>(_ body: () throws(JournalDecodeError) -> T) throws(JournalOpenError) -> T {
            do { return try body() } catch { throw .damaged(error) }
        }
        let size = try io { () throws(Errno) in try storage.size() }
        let prefix = try io { () throws(Errno) in try storage.read(count: JournalCodec.fixedPrefixLength, at: 0) }
        let (headerLength, version) = try decoding { () throws(JournalDecodeError) in
            try JournalCodec.declaredHeaderLengthAndVersion(prefix)
        }
        if Int64(headerLength) > size { throw .damaged(.truncated) }
        let headerBytes = try io { () throws(Errno) in try storage.read(count: headerLength, at: 0) }
        let (header, _) = try decoding { () throws(JournalDecodeError) in try JournalCodec.decodeHeader(headerBytes) }
        let expected = JournalCodec.encodedLength(header: header, version: version)
        if size < expected { throw .damaged(.truncated) }
        if size > expected { throw .damaged(.trailingBytes) }
        let image = try io { () throws(Errno) in try storage.read(count: Int(expected), at: 0) }
        return try decoding { () throws(JournalDecodeError) in try JournalCodec.decode(image) }
    }

    // MARK: Recording progress

    /// Records that every byte of `chunk` has been written to the data file and that their CRC-32C is
    /// `crc`: writes the checksum (one 4-byte write), then sets the written bit (one 1-byte write). Call
    /// right after the chunk's last data write returns. A chunk written again (its old bytes failed their
    /// check) gets its new checksum; its bit is already set.
    public func markWritten(chunk: Int, crc: UInt32) throws(Errno) {
        precondition(!isClosed, "markWritten on a closed journal")
        if chunkCRCs[chunk] != crc || !written[chunk] {
            try storage.write(JournalCodec.encodeChecksum(crc), at: JournalCodec.checksumOffset(header: header, chunk: chunk))
            chunkCRCs[chunk] = crc
            checksumsUnsynced = true
        }
        guard !written[chunk] else { return }
        var updated = written
        updated.set(chunk)
        let index = ChunkBitmap.byteIndex(ofChunk: chunk)
        try storage.write([updated.bytes[index]], at: writtenOffset + Int64(index))
        written = updated
    }

    /// Makes the chunks written so far durable: snapshot, `data.sync()`, then record and sync.
    ///
    /// Blocks for the data file's `fdatasync`. To run that sync on another thread, use
    /// `beginCheckpoint()` and `completeCheckpoint(_:)` around it.
    public func checkpoint(syncingData data: BlockStorage) throws(Errno) {
        let snapshot = beginCheckpoint()
        try data.sync()
        try completeCheckpoint(snapshot)
    }

    /// Takes the snapshot of the written bitmap that the next data sync will vouch for.
    public func beginCheckpoint() -> CheckpointSnapshot {
        CheckpointSnapshot(written: written)
    }

    /// Marks the snapshot's chunks durable. Call only after an `fdatasync` of the data file that
    /// started after `beginCheckpoint()` has returned successfully.
    ///
    /// Syncs the journal if checksums were written since its last sync (so that every checksum is on disk
    /// before a durable bit that claims its chunk can be), then writes the changed bytes of the durable
    /// bitmap in one write, then syncs the journal.
    public func completeCheckpoint(_ snapshot: CheckpointSnapshot) throws(Errno) {
        precondition(!isClosed, "checkpoint on a closed journal")
        precondition(snapshot.written.count == durable.count, "a snapshot of another journal")
        let updated = durable.union(snapshot.written)
        guard let first = updated.bytes.indices.first(where: { updated.bytes[$0] != durable.bytes[$0] }),
              let last = updated.bytes.indices.last(where: { updated.bytes[$0] != durable.bytes[$0] })
        else { return }  // nothing new is durable
        // The header and bitmaps of a journal created without a sync go to disk before any durable bit
        // can (else a torn image could pair durable bits with a header that never reached the disk).
        if imageUnsynced || (checksumsUnsynced && syncsChecksumsBeforeDurableBits) {
            try storage.sync()
            checksumsUnsynced = false
            imageUnsynced = false
        }
        try storage.write(Array(updated.bytes[first...last]), at: durableOffset + Int64(first))
        try storage.sync()
        durable = updated
        // Now the journal holds something worth keeping: make its name (and the data file's, beside
        // it) survive a power cut. Once per journal.
        if let path = unsyncedDirectory {
            try PosixFile.syncDirectory(containing: path)
            unsyncedDirectory = nil
        }
    }

    /// Closes the journal's file. Does not checkpoint: call `checkpoint(syncingData:)` first if wanted.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        onClose()
    }

    // MARK: Verified pieces

    /// Whether this journal can record verified pieces (format version 3 and later).
    public var recordsPieces: Bool { version >= 3 }

    /// Ties the verified bitmap to the piece hashes whose fingerprint is `fingerprint` (32 bytes).
    /// When they are the recorded ones, the recorded bits stand and this returns true. Otherwise every
    /// verified bit is cleared and synced before the new fingerprint is written and synced, so that a
    /// bit is never read with hashes it was not about, and this returns false. A version 2 journal
    /// records nothing (false).
    @discardableResult
    public func bindPieces(fingerprint: [UInt8]) throws(Errno) -> Bool {
        precondition(!isClosed, "bindPieces on a closed journal")
        precondition(fingerprint.count == 32, "a fingerprint is 32 bytes")
        guard recordsPieces else { return false }
        if piecesFingerprint == fingerprint { return true }
        // Always rewritten: a torn record reads as no pieces with no bits, while its bits stay on disk.
        let empty = ChunkBitmap(count: header.chunkCount)
        try storage.write(empty.bytes, at: JournalCodec.verifiedBitmapOffset(header: header))
        if syncsVerifiedClears { try storage.sync() }
        verified = empty
        try storage.write(JournalCodec.encodePiecesRecord(fingerprint), at: JournalCodec.piecesRecordOffset(header: header))
        try storage.sync()
        piecesFingerprint = fingerprint
        return false
    }

    /// Records that chunk `chunk`'s piece group matched the bound hashes, with one 1-byte write and
    /// no sync: a resume trusts a verified bit only for a chunk it keeps, and it keeps a chunk only
    /// when its bytes match its checksum, which names the bytes that were hashed (see `clearVerified`).
    public func markVerified(chunk: Int) throws(Errno) {
        precondition(!isClosed, "markVerified on a closed journal")
        guard recordsPieces, piecesFingerprint != nil, !verified[chunk] else { return }
        var updated = verified
        updated.set(chunk)
        let index = ChunkBitmap.byteIndex(ofChunk: chunk)
        try storage.write([updated.bytes[index]], at: JournalCodec.verifiedBitmapOffset(header: header) + Int64(index))
        verified = updated
    }

    /// Clears the verified bits of `chunks` and syncs the journal, before those chunks' bytes may
    /// change: else new bytes with their new checksum could meet an old bit after a power cut.
    public func clearVerified(chunks: [Int]) throws(Errno) {
        precondition(!isClosed, "clearVerified on a closed journal")
        let set = chunks.filter { verified[$0] }
        guard !set.isEmpty else { return }
        var updated = verified
        for k in set { updated.clear(k) }
        let bytes = Set(set.map(ChunkBitmap.byteIndex(ofChunk:))).sorted()
        let offset = JournalCodec.verifiedBitmapOffset(header: header)
        try storage.write(Array(updated.bytes[bytes[0]...bytes[bytes.count - 1]]), at: offset + Int64(bytes[0]))
        if syncsVerifiedClears { try storage.sync() }
        verified = updated
    }

    // MARK: Boot ID

    /// The Linux boot ID (`/proc/sys/kernel/random/boot_id`), which changes at every boot; or
    /// `unknownBootID` if it cannot be read, in which case a resume trusts only the durable bitmap.
    /// Read once per process: it cannot change while the process runs, and reading it cost four
    /// system calls for every file of a batch.
    public static func currentBootID() -> String { bootIDOfThisProcess }

    private static let bootIDOfThisProcess: String = readBootID()

    private static func readBootID() -> String {
        guard let file = try? PosixFile.open(path: "/proc/sys/kernel/random/boot_id", mode: .readOnly) else {
            return unknownBootID
        }
        defer { file.close() }
        guard let bytes = try? file.read(count: 128, at: 0),
              let text = String(validating: bytes, as: UTF8.self)
        else { return unknownBootID }
        let trimmed = text.filter { !$0.isWhitespace }
        return trimmed.isEmpty ? unknownBootID : trimmed
    }
}

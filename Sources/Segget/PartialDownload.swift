import Dispatch
import SeggetJournal
import SeggetSystem

/// The files of a download that is not finished yet, beside its final path: the data
/// (`NAME.segget-part`, locked while a segget writes it), the journal of finished chunks
/// (`NAME.segget-journal`) and the progress slots of partly written ones (`NAME.segget-progress`).
///
/// One owner for all of them, so that opening (resume or start over), discarding and publishing each
/// happen in one place: ``open(paths:url:probe:ranged:fresh:chunkSize:events:)``, ``discard()`` and
/// ``publish(syncing:)``. Used by one download thread; ``close()`` before dropping it.
final class PartialDownload {
    /// Where the files of one download live.
    struct Paths: Equatable {
        /// The finished file's name: nothing is written there before ``PartialDownload/publish(syncing:)``.
        let final: String
        let part: String
        let journal: String
        /// Made only beside a journal, and always removed before it, so that no journal means no
        /// progress file either.
        let progress: String

        init(final: String) {
            self.final = final
            part = final + Self.partSuffix
            journal = final + Self.journalSuffix
            progress = final + Self.progressSuffix
        }

        static let partSuffix = ".segget-part"
        static let journalSuffix = ".segget-journal"
        static let progressSuffix = ".segget-progress"
        /// The endings of the side files; a final name with one of them is refused (see
        /// `Download.refuseSideFileName`).
        static let sideFileSuffixes = [partSuffix, journalSuffix, progressSuffix]
        /// The side file ending `name` ends in, if any.
        static func sideFileSuffix(of name: String) -> String? { sideFileSuffixes.first { name.hasSuffix($0) } }

        /// The longest name a file system takes for one entry (Linux's `NAME_MAX`, in bytes).
        static let nameLimit = 255

        /// Throws where a side file's name would be longer than a directory entry may be: a final
        /// name within the limit but less than 16 bytes under it. Its part file could not be made,
        /// and the failure read as a journal that "could not be read". (A file the probe brings
        /// whole has no side files and is saved under such a name.)
        func checkSideFileNames() throws(SeggetError) {
            let name = final.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? final
            let longest = Self.sideFileSuffixes.map(\.utf8.count).max() ?? 0
            guard name.utf8.count + longest > Self.nameLimit else { return }
            throw SeggetError(
                .fileSystem,
                "the name \(ServerText(name)) is \(name.utf8.count) bytes long: segget keeps an unfinished download beside it as NAME\(Self.progressSuffix) and two other side files, which cannot be longer than \(Self.nameLimit) bytes. Choose a name of at most \(Self.nameLimit - longest) bytes with -o (or out= in an input file).")
        }
    }

    let paths: Paths
    /// The data file, exclusively locked (`flock`) for as long as it is open.
    let data: PosixFile
    /// Nil for a download that cannot be resumed (no ranges, or the probe brought the whole file).
    private(set) var journal: Journal?
    /// The chunks known to be in the data file: kept from an earlier run, or brought by the probe.
    var trusted: ChunkBitmap?
    let chunkSize: Int64
    var progress: ProgressSlots?
    /// Chunks partly written by an earlier run (same boot; their bytes still match their checksum)
    /// or by the probe.
    var partial: [Int: PartialChunk] = [:]
    /// Created by this run (nothing to resume).
    let isNew: Bool

    init(paths: Paths, data: PosixFile, journal: Journal?, trusted: ChunkBitmap?, chunkSize: Int64, isNew: Bool) {
        self.paths = paths
        self.data = data
        self.journal = journal
        self.trusted = trusted
        self.chunkSize = chunkSize
        self.isNew = isNew
    }

    /// Background writeback and syncs of data files, off the download thread.
    private static let writebackQueue = DispatchQueue(label: "segget.writeback")

    /// Lets background writeback and syncs finish, then closes every file (the lock goes with the data
    /// file). Call once, when the attempt ends however it ends.
    func close() {
        Self.writebackQueue.sync {}
        progress?.close()
        journal?.close()
        data.close()
    }

    /// Makes the journal's written bitmap durable, so that even a reboot keeps it (an interrupted or
    /// failed fetch).
    func checkpoint() {
        try? journal?.checkpoint(syncingData: data)
    }

    /// Starts the kernel's writeback of the first `length` bytes on the background queue: a head start
    /// on the final `fdatasync` of `--fsync`.
    func startWriteback(length: Int64) {
        let file = UncheckedBox(data)
        Self.writebackQueue.async { file.value.startWriteback(0..<length) }
    }

    /// Starts `fdatasync` of the data on the background queue (it waits on the disk while the hash tail
    /// uses the CPU); wait on the semaphore before publishing.
    func syncInBackground() -> DispatchSemaphore {
        let done = DispatchSemaphore(value: 0)
        let file = UncheckedBox(data)
        Self.writebackQueue.async {
            try? file.value.sync()
            done.signal()
        }
        return done
    }

    /// Throws away the partial download (a digest mismatch): the next run starts afresh.
    func discard() {
        journal?.close()
        journal = nil
        try? PosixFile.remove(path: paths.part)
        // The progress file before the journal: one never outlives its journal (see `Paths`).
        try? PosixFile.remove(path: paths.progress)
        try? PosixFile.remove(path: paths.journal)
    }

    /// Renames the data into place under its final name and drops the journal and progress files.
    ///
    /// With `syncing` (`--fsync`) the data is synced before the rename and the directory after, so that
    /// the finished file survives a power cut; without it the kernel writes it back in its own time.
    /// The journal goes at once after the rename: a run killed in between is recognised as finished
    /// (see ``finishedEarlier(paths:url:)``).
    ///
    /// Without `replacing` (`--force`), a file that another program made under the final name while
    /// the download ran is left alone: the name was free when the download began (it checks), and a
    /// plain rename replaced that file without a word. The download stays whole and resumable under
    /// its partial name, and the error says how to put it in place (exit 5).
    func publish(syncing: Bool, replacing: Bool = true, mark: (url: String, verified: [String], serverVersion: UInt64?)? = nil) throws(SeggetError) {
        do {
            // The mark goes on while the file has no name yet, after its last write (see `FinishedMark`).
            if let mark { FinishedMark.write(on: data, url: mark.url, verified: mark.verified, serverVersion: mark.serverVersion) }
            if syncing { try data.sync() }
            if replacing {
                try PosixFile.rename(from: paths.part, to: paths.final)
            } else {
                try FileSystem.renameWithoutReplacing(from: paths.part, to: paths.final)
            }
        } catch where error == .fileExists && !replacing {
            throw SeggetError(.fileSystem, "\(paths.final) appeared while the download ran (another program made it), and segget does not replace it; the download is complete and kept under \(paths.part) with its journal: move that file away and run the same command again to finish it, or run it again with --force to replace that file.")
        } catch {
            throw SeggetError(.fileSystem, "could not move the finished download to \(paths.final): \(error).")
        }
        journal?.close()
        journal = nil
        try? PosixFile.remove(path: paths.progress)
        try? PosixFile.remove(path: paths.journal)
        if syncing { try? PosixFile.syncDirectory(containing: paths.final) }
    }

    /// The size of the finished file when an earlier run renamed it into place and was stopped before
    /// removing its journal (which must describe this URL and that size); the leftovers are removed.
    static func finishedEarlier(paths: Paths, url: String) -> Int64? {
        guard let size = PosixFile.fileSize(path: paths.final), PosixFile.fileSize(path: paths.part) == nil,
            PosixFile.fileSize(path: paths.journal) != nil,
            let (journal, _) = try? Journal.open(path: paths.journal, currentBootID: Journal.currentBootID())
        else { return nil }
        let matches = journal.header.url == URLParts.redactingCredentials(url) && journal.header.totalLength == size
        journal.close()
        guard matches else { return nil }
        // The progress file before the journal: one never outlives its journal (see `Paths`).
        try? PosixFile.remove(path: paths.progress)
        try? PosixFile.remove(path: paths.journal)
        return size
    }

    /// What the journal at `paths` says about the file it belongs to, and how many of its bytes a
    /// rerun keeps (the chunks it marks and the parts of others the progress slots vouch for): nil
    /// when there is no readable journal or no data file. Read without locking
    /// or changing anything (a rerun whose link expired before it started; see `Download.renewedLink`).
    static func kept(paths: Paths) -> (identity: ObjectIdentity, bytesDone: Int64)? {
        guard PosixFile.fileSize(path: paths.part) != nil,
            let (journal, trusted) = try? Journal.open(path: paths.journal, currentBootID: Journal.currentBootID())
        else { return nil }
        defer { journal.close() }
        let h = journal.header
        let plan = ChunkPlan(totalLength: h.totalLength, chunkSize: h.chunkSize)
        var done = plan.bytes(ofChunksWhere: { trusted[$0] })
        // The parts of chunks the progress slots vouch for, as `open` keeps them (same boot only).
        if journal.openedInSameBoot {
            let partials = ProgressSlots.read(path: paths.progress, journal: h, plan: plan).filter { !trusted[$0.key] }
            done += plan.bytes(upTo: partials.mapValues(\.upTo))
        }
        return (ObjectIdentity(length: h.totalLength, etag: h.etag, lastModified: h.lastModified), done)
    }

    /// Bytes already in the file: the chunks the journal vouches for, and the parts of chunks an
    /// earlier run had in flight that still match their progress slots (continued from there).
    func resumedBytes(plan: ChunkPlan) -> Int64 {
        let kept = plan.bytes(upTo: partial.mapValues(\.upTo))
        guard let trusted else { return kept }
        return kept + plan.bytes(ofChunksWhere: { trusted[$0] })
    }

    /// Bytes a rerun in this boot keeps, as this run leaves them: the chunks the journal records and
    /// the parts of the others the progress slots vouch for. Nil without a journal.
    func bytesKeptForRerun(plan: ChunkPlan) -> Int64? {
        guard let journal else { return nil }
        let written = journal.written
        let partials = ProgressSlots.read(path: paths.progress, journal: journal.header, plan: plan)
            .filter { !written[$0.key] }
        return plan.bytes(ofChunksWhere: { written[$0] }) + plan.bytes(upTo: partials.mapValues(\.upTo))
    }

    /// Writes the first bytes the probe brought into a new data file and counts the chunks they
    /// cover as finished (journal bits after the write, like any chunk); a partly covered chunk is
    /// continued from where they end.
    func placeProbePrefix(_ prefix: ProbeBytes, plan: ChunkPlan) throws(SeggetError) {
        guard isNew, !prefix.isEmpty else { return }
        try prefix.withUnsafeBytes { (raw) throws(SeggetError) in try place(raw, plan: plan) }
    }

    /// Writes the first bytes of a new download without ranges, which its one stream continues
    /// after (no journal: such a download starts over from byte 0 when it is run again).
    func placeStreamPrefix(_ prefix: ProbeBytes) throws(SeggetError) {
        guard isNew, !prefix.isEmpty else { return }
        do {
            try prefix.withUnsafeBytes { (raw) throws(Errno) in try data.write(raw, at: 0) }
        } catch {
            throw FetchEngine.writeError(error, resumable: false)
        }
    }

    private func place(_ prefix: UnsafeRawBufferPointer, plan: ChunkPlan) throws(SeggetError) {
        do {
            try data.write(prefix, at: 0)
        } catch {
            throw FetchEngine.writeError(error)
        }
        var covered = trusted ?? ChunkBitmap(count: plan.chunkCount)
        for k in 0..<plan.chunkCount {
            let r = plan.byteRange(ofChunk: k)
            let upTo = min(r.upperBound, Int64(prefix.count))
            guard upTo > r.lowerBound else { break }
            // The checksums are for the journal and the progress slots; a file the probe brought whole
            // has neither, and its bytes need not be read again.
            let crc = { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: prefix[Int(r.lowerBound)..<Int(upTo)])) }
            if upTo < r.upperBound {
                partial[k] = PartialChunk(upTo: upTo, crc: crc())
                break
            }
            covered.set(k)
            if let journal { try? journal.markWritten(chunk: k, crc: crc()) }
        }
        trusted = covered
    }

    /// The checks the engine makes behind the download of every chunk kept from an earlier run, in file
    /// order; nil for a new file (its chunks, the probe's included, were written by this run).
    func voucher(plan: ChunkPlan) -> ChunkVoucher? {
        guard !isNew, let journal, let kept = trusted else { return nil }
        let claims = (0..<plan.chunkCount).filter { kept[$0] }.map {
            ChunkVoucher.Claim(chunk: $0, crc: journal.chunkCRCs[$0])
        }
        return claims.isEmpty ? nil : ChunkVoucher(data: data, plan: plan, claims: claims)
    }
}

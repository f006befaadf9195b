import Glibc
import SeggetJournal

/// What may happen only once the writer has written everything handed over up to a ticket: the
/// journal bit of a chunk, a progress slot, the hasher's prefix. Kept in ticket order in
/// `FetchEngine.afterWrites`.
enum AfterWrite {
    case chunk(Int)
    case slot(connection: Int, chunk: Int, upTo: Int64)
    case stream(Int64)
}

/// The write-ordering ledger: received bytes reach the file through the `StagedWriter`, and
/// whatever vouches for them (journal, progress slots, the hasher's prefix) follows once they did.
extension FetchEngine {
    /// Hands what `c` has staged to the writer, so that every byte before its position is written
    /// or queued. (Write errors surface through `runAfterWrites`.)
    func settle(_ c: ConnectionIO) {
        if let s = c.staging { writer.flush(s) }
    }

    /// Connection `c`'s bytes reached a chunk end (see `Coordinator.wrote`): its bytes are settled
    /// first, so that the chunk's journal bit waits for them; losers of a race are removed after
    /// this round of callbacks.
    func crossedChunkEnd(_ c: ConnectionIO, _ crossing: Coordinator.Crossing) {
        settle(c)
        guard target.ranged else {
            afterWrites.append((writer.submitted, .stream(core.connections[c.id].pos)))
            return
        }
        if let k = crossing.finishedChunk { afterWrites.append((writer.submitted, .chunk(k))) }
        pendingRemoval += crossing.losers
    }

    /// Carries out what waited for the writer (see `AfterWrite`), up to the last completed write, or,
    /// `waiting`, after every write handed over so far. A write error stops the download.
    func runAfterWrites(waiting: Bool = false) {
        guard waiting || afterWritesDone < afterWrites.count else { return }
        let done: Int64
        do {
            if waiting { try writer.drain() }
            done = try writer.completedTicket()
        } catch {
            apply(.failed(Self.writeError(error, resumable: target.ranged && journal != nil, size: target.totalLength)))
            return
        }
        while afterWritesDone < afterWrites.count, afterWrites[afterWritesDone].ticket <= done {
            let action = afterWrites[afterWritesDone].action
            afterWritesDone += 1
            switch action {
            case .chunk(let k):
                do {
                    // A chunk without a checksum (see `ChunkChecksums`) is not claimed: a resume fetches it.
                    if let crc = chunkCRCs.takeFinished(k) {
                        try journal?.markWritten(chunk: k, crc: crc)
                    } else {
                        trace("chunk \(k) has no checksum; not recorded in the journal")
                    }
                } catch {
                    apply(.failed(SeggetError(.fileSystem, "could not update the journal: \(error). Free some space or fix permissions, then \(NextStep.resume.cli)")))
                }
                chunkInFile(k)
            case .slot(let id, let chunk, let upTo):
                if let crc = chunkCRCs.crc(ofChunk: chunk, upTo: upTo) {
                    try? progressSlots?.record(slot: id, chunk: chunk, upTo: upTo, crc: crc)
                }
            case .stream(let p):
                if p > streamPrefix {
                    streamPrefix = p
                    onPrefix?(p)
                }
            }
        }
        if afterWritesDone >= 4096 {
            afterWrites.removeFirst(afterWritesDone)
            afterWritesDone = 0
        }
    }

    /// On the way out (Ctrl-C, an error), once everything received is written: records where each
    /// connection got inside its chunk, so that a rerun continues from there. (With chunks no larger
    /// than the staging buffer, slots are otherwise written only at chunk ends.)
    func recordFinalSlots() {
        guard let slots = progressSlots, target.ranged, (try? writer.completedTicket()) == writer.submitted else { return }
        for c in io where !core.isRacing(c.id) && c.staging != nil {
            let pos = core.connections[c.id].pos
            guard pos > 0 && pos < plan.totalLength else { continue }
            let k = plan.chunk(containing: pos - 1)
            guard !core.finishedChunks[k], pos < plan.byteRange(ofChunk: k).upperBound, pos > c.slotPos,
                let crc = chunkCRCs.crc(ofChunk: k, upTo: pos)
            else { continue }
            try? slots.record(slot: c.id, chunk: k, upTo: pos, crc: crc)
        }
    }

    /// Chunk `k`'s bytes are in the file (written in this run, or kept and vouched for): the finished
    /// prefix may grow.
    func markInFile(_ k: Int) {
        inFile[k] = true
        if k == prefixChunks {
            while prefixChunks < inFile.count && inFile[prefixChunks] { prefixChunks += 1 }
            onPrefix?(plan.byteRange(ofChunks: 0..<prefixChunks).upperBound)
        }
    }

    /// Chunk `k`, counted as finished, is fetched again (its kept bytes failed their check).
    func reopen(_ k: Int) {
        guard forgetVerified(k) else { return }
        apply(.reopened(k))
    }

    /// Every tick, what each connection has staged goes to the file in whole blocks, and its progress
    /// slot follows: a slow connection (2 MiB/s takes half a second to fill a 1 MiB buffer) would
    /// otherwise keep its bytes in memory, where a kill loses them. A fast one fills its buffer many
    /// times per tick, so this adds at most one smaller write per connection and tick.
    func flushSlowStaging() {
        for c in io where core.connections[c.id].machine.isTransferring && !core.isRacing(c.id) {
            guard let s = c.staging, s.end - s.start >= Self.slotStep / 2, writer.flushWholeBlocks(s) else { continue }
            moveSlot(c, atLeast: Self.slotStep / 2)
        }
    }

    /// A stream has no chunk ends at which to hand its bytes over; it does so every tick.
    func settleStream() {
        guard let s = io[0].staging, !s.isEmpty else { return }
        settle(io[0])
        afterWrites.append((writer.submitted, .stream(core.connections[0].pos)))
    }

    /// Moves `c`'s progress slot to where the bytes it handed to the writer end, if that is at least
    /// `step` beyond the last record. Recorded after the data reached the file, like a journal bit:
    /// a kill then loses only the staged and queued bytes and what never arrived.
    func moveSlot(_ c: ConnectionIO, atLeast step: Int64) {
        guard progressSlots != nil, !core.isRacing(c.id), c.staging.start - c.slotPos >= step else { return }
        c.slotPos = c.staging.start
        afterWrites.append((writer.submitted, .slot(connection: c.id, chunk: plan.chunk(containing: c.slotPos - 1), upTo: c.slotPos)))
    }

    /// `resumable`: a journal keeps what was written (a ranged fetch); without one (a server that sends
    /// no byte ranges, a small file the first answer brought whole) a rerun starts from the first
    /// byte, and the message says so.
    static func writeError(_ error: any Error, resumable: Bool = true, directory: String? = nil, size: Int64? = nil) -> SeggetError {
        let rerun = resumable
            ? NextStep.resumeNothingLost.cli
            : NextStep.startOver.cli
        if let e = error as? Errno, e.rawValue == ENOSPC {
            return SeggetError(.fileSystem, "the disk is full. Free some space, then \(rerun)")
        }
        if let e = error as? Errno, e == .fileTooLarge {
            // Past the process's limit the same command, under a raised one, goes on; another
            // file system means another -d or -o, which starts a new download.
            let then = FileTooLarge.processLimit(for: size) != nil ? " Then \(rerun)" : ""
            return SeggetError(.fileSystem, "could not write the downloaded data: \(FileTooLarge.reason(directory: directory, size: size)).\(then)")
        }
        return SeggetError(.fileSystem, "could not write the downloaded data: \(error). Fix the problem, then \(rerun)")
    }
}

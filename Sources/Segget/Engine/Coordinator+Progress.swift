/// What the coordinator reports of a download's progress: the bytes in the file, and each
/// connection's state.
extension Coordinator {
    /// Bytes of the finished chunks (counted from the scheduler's record, not kept beside it).
    var finishedBytes: Int64 {
        let finished = scheduler.finished
        return plan.bytes(ofChunksWhere: { finished[$0] })
    }

    /// Bytes in the file: the finished chunks, the parts of unfinished chunks an earlier run or the
    /// probe wrote (`keptAtStart`) that no connection continues yet, and what each owner has of the
    /// chunk it holds. An owner waiting to retry keeps its bytes (its next request continues after
    /// them), so a stall does not take them out of the count; they leave it only when the chunk goes
    /// to another connection, which fetches it from its start.
    var bytesInFile: Int64 {
        var bytes = finishedBytes + plan.bytes(upTo: partialChunks.filter { !scheduler.finished[$0.key] })
        for c in connections where c.pos < c.chunkEnd && !isRacing(c.id) {
            let k = plan.chunk(containing: c.pos)
            guard !scheduler.finished[k], scheduler.run(of: c.id)?.contains(k) == true else { continue }
            let chunk = plan.byteRange(ofChunk: k)
            // A connection that continued a kept part counts that part with its own bytes.
            let from = keptAtStart[k] == c.progressFrom ? chunk.lowerBound : max(chunk.lowerBound, c.progressFrom)
            bytes += c.pos - from
        }
        return bytes
    }

    /// Bytes in the file (`bytesInFile`) and each connection's state, rate and remaining bytes.
    func progress(now: Double, elapsed: Double) -> DownloadProgress {
        let rate = totalRate(window: 3, minSpan: 0.2) ?? 0
        var conns: [ConnectionProgress] = []
        for c in connections {
            let state: ConnectionProgress.State
            if c.machine.isWaiting { state = .waiting }
            else if !c.machine.isTransferring { state = .idle }
            else if isRacing(c.id) { state = .racing }
            else { state = .receiving }
            conns.append(ConnectionProgress(
                id: c.id, state: state, bytesPerSecond: c.shownRate(window: 2),
                remainingBytes: remaining(of: c.id), source: config.sources.indices.contains(c.source) ? config.sources[c.source].url : nil,
                starting: c.machine.isStarting))
        }
        return DownloadProgress(
            completedBytes: bytesInFile, totalBytes: config.totalLength, receivedBytes: receivedBytes,
            bytesPerSecond: rate, elapsed: elapsed, connections: conns, finishedRanges: finishedRanges)
    }

    /// The bytes connection `id` has still to receive of the run (or raced chunk) it holds: from its
    /// position where that lies in the run, else from the run's start (a connection whose request
    /// has not gone out yet still stands where its last run left it, or at 0).
    func remaining(of id: Int) -> Int64 {
        let start: Int64
        if let r = scheduler.run(of: id) { start = plan.byteRange(ofChunk: r.lowerBound).lowerBound }
        else if let k = scheduler.duplicates[id] { start = plan.byteRange(ofChunk: k).lowerBound }
        else { return 0 }
        let end = end(of: id)
        let pos = connections[id].pos
        return max(0, end - ((start...end).contains(pos) ? pos : start))
    }

    /// The finished chunks as byte ranges, each run of neighbours as one range.
    var finishedRanges: [Range<Int64>] {
        let finished = scheduler.finished
        return plan.byteRanges { finished.indices.contains($0) && finished[$0] }
    }

    /// A download into a stream: work is handed out only in whole chunks below byte `limit` (see
    /// `Scheduler.handOutLimit`).
    mutating func limitHandOut(below limit: Int64) {
        scheduler.handOutLimit = limit >= plan.totalLength ? plan.chunkCount : Int(limit / plan.chunkSize)
    }
}

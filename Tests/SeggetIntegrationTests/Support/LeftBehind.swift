import SeggetJournal

@testable import Segget

/// What an interrupted download left beside its file, as the rerun will find it.
enum LeftBehind {
    /// Bytes of the chunks the journal does not mark that the progress file records as partly
    /// written: the rerun continues them after those bytes and counts them as resumed (when they
    /// still match the recorded checksums).
    static func partlyWrittenBytes(journal: String, progress: String, total: Int64, chunkSize: Int64) throws -> Int64 {
        let (j, trusted) = try Journal.open(path: journal, currentBootID: Journal.currentBootID())
        defer { j.close() }
        let plan = ChunkPlan(totalLength: total, chunkSize: chunkSize)
        return ProgressSlots.read(path: progress, journal: j.header, plan: plan).filter { !trusted[$0.key] }
            .reduce(Int64(0)) { $0 + $1.value.upTo - plan.byteRange(ofChunk: $1.key).lowerBound }
    }

    /// Bytes of the chunks the journal marks as written.
    static func markedBytes(journal: String, total: Int64, chunkSize: Int64) throws -> Int64 {
        let (j, trusted) = try Journal.open(path: journal, currentBootID: Journal.currentBootID())
        j.close()
        return ChunkPlan(totalLength: total, chunkSize: chunkSize).bytes(ofChunksWhere: { trusted[$0] })
    }
}

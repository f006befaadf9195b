/// What an end-game racer may expect to get (see `Scheduler.nextAssignment`'s `racerSeconds`).
extension Coordinator {
    /// The average rate of an idle connection's last transfer from its first byte to its last,
    /// once it brought at least `racerEvidenceBytes`; nil otherwise.
    func lastTransferRate(_ c: Connection) -> Double? {
        guard !c.machine.isTransferring, let first = c.firstByteAt else { return nil }
        let bytes = c.transferBytes - c.bytesAtFirstByte
        let seconds = c.lastByteAt - first
        guard bytes >= Self.racerEvidenceBytes, seconds > 0.01 else { return nil }
        return Double(bytes) / seconds
    }
    static let racerEvidenceBytes: Int64 = 256 << 10

    /// What a new copy may get before any transfer has a window's rate or ended with
    /// `lastTransferRate`'s evidence (its first second): the best of the average rates of those
    /// receiving and of the transfers that ended with `racerEvidenceBytes` however fast (a chunk
    /// over loopback takes milliseconds); nil where none is known. Without it a race had no bound
    /// then: at `--chunk-size 16M` every idle connection raced a 16 MiB chunk from its first byte a
    /// quarter second in, beside an owner at the same 3 MiB/s (30 MiB at `-n 8` from nginx: 55 MiB
    /// fetched twice, no time saved).
    func rateBeforeEvidence(now: Double) -> Double? {
        connections.compactMap { c -> Double? in
            if c.machine.isTransferring { return averageRate(c, now: now) }
            guard let first = c.firstByteAt, c.transferBytes - c.bytesAtFirstByte >= Self.racerEvidenceBytes else { return nil }
            return Double(c.transferBytes - c.bytesAtFirstByte) / max(c.lastByteAt - first, 0.01)
        }.max()
    }
}

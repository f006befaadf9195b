import Glibc

/// How busy a download loop's thread is: the share of its recent time spent working (its passes,
/// the work posted to it) rather than waiting for its sockets, each second weighted less the
/// longer ago it was (an exponential decay over `window`).
///
/// A batch adds a second loop only where the first is busy (`Batch.secondLoopBusy`): a loop that
/// mostly waits has a CPU's worth of room, and a second loop's files dial connections of their
/// own, which on a long path cost each a TCP and a TLS handshake and a slow start. 400 files of
/// 64 KiB over HTTPS through WAN link a at `-j 16` opened 24 connections, not 16.
struct LoopLoad: Equatable, Sendable {
    /// How long ago a second still counts 1/e as much as one now.
    static let window = 0.25
    private(set) var busy = 0.0
    private(set) var total = 0.0

    /// A pass that worked `worked` seconds, then waited `waited` seconds for its sockets.
    mutating func pass(worked: Double, waited: Double) {
        let worked = max(0, worked)
        let span = worked + max(0, waited)
        guard span > 0 else { return }
        let keep = exp(-span / Self.window)
        busy = busy * keep + worked
        total = total * keep + span
    }

    /// The share of the recent time spent working, 0 to 1 (0 before any pass).
    var fraction: Double { total > 0 ? min(1, busy / total) : 0 }
}

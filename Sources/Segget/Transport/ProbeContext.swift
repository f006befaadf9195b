import SeggetCurl
import SeggetSystem

/// Collects one response's head (and the body of a 206, up to what was asked) from libcurl callbacks.
final class ProbeContext: TransferDelegate {
    private(set) var head = ResponseHead()
    /// Bytes kept (`Range: bytes=0-(limit-1)`, or `bytes=0-` when `holdsAtLimit`).
    let limit: Int
    /// Asked for the whole file: pause once `limit` bytes are kept, instead of taking more.
    let holdsAtLimit: Bool
    /// The fetch can continue this transfer: a 200 (a server that ignored the range, or sends
    /// the file in chunks) is kept up to `limit` and paused there like a held 206, rather than cut,
    /// for the fetch's one stream to continue (`FetchEngine.continueProbe`). Cut, it cost a second
    /// request for the whole file, and the bytes the first answer had sent on the way were lost.
    /// Not a body that ends where the connection closes (no length, not chunked): a held transfer
    /// may wait (a batch's file waits for its name), and a server that gave up meanwhile and closed
    /// the connection would end it as cleanly as the file's end, the file cut short unseen.
    let holdsWholeAnswer: Bool

    /// Whether a 200 with this head is kept and held for the fetch (see `holdsWholeAnswer`).
    private func holdsWhole(_ head: ResponseHead) -> Bool {
        holdsWholeAnswer && head.status == 200 && (head.isChunked || head.contentLength != nil)
    }

    /// Whether the transfer is worth holding for the fetch once slow (`ProbeRequest.holdDue`).
    var holdsWhenSlow: Bool { holdsWhole(head) }
    /// The bytes kept: in `filled` where the answer brings the whole file (at least
    /// `FilledBuffer.hugeFrom` of it), else in `kept`.
    var body: ProbeBytes { filled.map(ProbeBytes.init) ?? ProbeBytes(kept) }
    var bodyCount: Int { filled?.count ?? kept.count }
    private var kept: [UInt8] = []
    private var filled: FilledBuffer?
    /// When the first body bytes arrived (monotonic seconds), 0 before.
    var bodyStartedAt = 0.0
    /// The transfer is paused with the rest of the file still to come (see `HeldTransfer`).
    var isHeld = false
    /// When the request was sent (monotonic seconds).
    var sentAt = 0.0
    /// What the handshakes showed, read where the transfer failed (see `HandshakeOutcome`).
    var handshake = HandshakeOutcome()
    /// Whether the body is worth keeping, decided once at its first bytes (the head is complete by
    /// then) rather than read from the header fields again for every piece of the body.
    private var keepsBody: Bool?
    /// Whether an error's body is read to its end too (see `drainsBody`): not where nothing would cut
    /// a body that stalls (`Prober.request` without a multi handle); the error is said at once there.
    var drainsErrors = true
    /// Body bytes of a redirect or an error read and dropped (see `drainLimit`).
    private var dropped = 0
    /// The most of a redirect's or an error's body read to keep its connection open; a longer one is cut.
    static let drainLimit = 64 << 10

    /// Whether the body of an answer that is not kept is read to its end and dropped (see
    /// `transfer(_:received:)`): a redirect's or an error's (3xx to 5xx), unless it says it is
    /// longer than `drainLimit`. A 200 or 206 that is not kept is a file, and is cut.
    static func drainsBody(of head: ResponseHead, errors: Bool) -> Bool {
        guard (300...(errors ? 599 : 399)).contains(head.status) else { return false }
        if let length = head.contentLength, length > Int64(drainLimit) { return false }
        return true
    }

    init(limit: Int, holdsAtLimit: Bool = false, holdsWholeAnswer: Bool = false) {
        self.limit = limit
        self.holdsAtLimit = holdsAtLimit
        self.holdsWholeAnswer = holdsWholeAnswer
    }

    func transfer(_ handle: EasyHandle, receivedHeaderLine line: String, latin1: Bool) {
        head.append(line: Substring(line), latin1: latin1)
        if head.isComplete, headAt == 0 { headAt = monotonicSeconds() }
    }

    /// When the head was complete (monotonic seconds), 0 before: a probe held at its head may have
    /// no body byte yet, and its first answer took this long.
    var headAt = 0.0

    func transfer(_ handle: EasyHandle, received bytes: UnsafeRawBufferPointer) -> WriteDecision {
        // A 206 has a body worth keeping (at most what was asked), and so has a 200 that says it
        // brings no more than that: the whole file from a server that ignores ranges, which then
        // needs no second request. Any other 200 is the whole file too: where the fetch can continue
        // it (`holdsWholeAnswer`) its first bytes are kept and it is held at the limit; otherwise it
        // stops now, and the fetch asks again.
        let keeps = keepsBody
            ?? (head.contentEncoding == nil
                && (head.status == 206
                    || (head.status == 200 && (holdsWhole(head) || (!head.isChunked && head.contentLength.map { $0 <= Int64(limit) } == true)))))
        keepsBody = keeps
        guard keeps else {
            // A redirect's or an error's few bytes of text are read to their end and dropped: the
            // connection then stays open for the next request, which on a redirect within one host
            // (and for the warm-ups sent beside it) goes to the same server, and in a batch carries
            // the next file. Cut, it closed: 8 connections through a 302 at `-n 8` became 16, and a
            // list of 330 lines with 10 that answer 404 opened 24 connections at `-j 16`, a TCP (and
            // TLS) handshake more for each.
            if Self.drainsBody(of: head, errors: drainsErrors), dropped + bytes.count <= Self.drainLimit {
                dropped += bytes.count
                return .proceed
            }
            return .abort
        }
        if bodyCount + bytes.count > limit {
            // Held: libcurl keeps these bytes and hands them to whoever continues the transfer.
            guard holdsAtLimit || holdsWhole(head) else { return .abort }
            isHeld = true
            return .pause
        }
        if bodyCount == 0 && filled == nil {
            // What this answer brings, when it says: a 64 KiB file does not take 1 MiB of fresh memory.
            let capacity = head.contentLength.map { Int(clamping: max(0, min($0, Int64(limit)))) } ?? limit
            // A file this answer brings whole fills its buffer: its memory is mapped before the first
            // byte (a huge page from 512 KiB), not faulted in 4 KiB at a time as the bytes arrive.
            // A larger file's first bytes may stop early (a held transfer): their pages stay lazy.
            if capacity >= FilledBuffer.hugeFrom, head.contentRange?.completeLength == Int64(capacity) {
                filled = FilledBuffer(capacity: capacity)
            } else {
                kept.reserveCapacity(capacity)
            }
            bodyStartedAt = monotonicSeconds()
        }
        if let buffer = filled, !buffer.append(bytes) {
            // More than the answer said it brings: an array takes it.
            kept = Array(buffer.bytes)
            filled = nil
        }
        if filled == nil { kept.append(contentsOf: bytes) }
        return .proceed
    }
}

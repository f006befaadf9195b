import SeggetCurl

/// A probe's transfer kept open after its first bytes, for the fetch to continue instead of asking
/// again: the probe asked for `bytes=0-` and paused once it had what it keeps (`offset` bytes, in
/// `ProbeResult.prefix`), so the rest of the file is still coming on the same connection. A download
/// of one connection then makes one request for the whole file, as curl and wget2 do, rather than a
/// probe and a second request after it.
///
/// It owns the transfer from the moment the probe holds it: unless the fetch adopts it, `release()`
/// (also done when it goes away) ends the transfer and lets its multi handle go of it. Used by one
/// thread at a time.
final class HeldTransfer: @unchecked Sendable, Equatable {
    let easy: EasyHandle
    let multi: MultiHandle
    /// The response head as the probe received it (an answer to `bytes=0-`).
    let head: ResponseHead
    /// Bytes the probe kept; the held transfer continues from here.
    let offset: Int64
    /// The file's length, from the answer's `Content-Range`, or a 200's `Content-Length` (0 when
    /// the answer does not say).
    let total: Int64
    /// Where the answer ends (exclusive): the file's end for `bytes=0-`, or where a server's honest
    /// shorter answer ends.
    let answerEnd: Int64
    /// When the probe sent its request (monotonic seconds).
    let sentAt: Double
    /// The probe's collector, the handle's delegate (held weakly by the handle) until it is adopted.
    private var context: ProbeContext?
    private(set) var isSettled = false
    /// Ends the transfer for `release()` where another thread runs `multi` (a `DownloadLoop`'s
    /// driver); nil: `multi.remove`, on the thread that runs it.
    private let releasing: (@Sendable (EasyHandle) -> Void)?

    init(easy: EasyHandle, multi: MultiHandle, context: ProbeContext, releasing: (@Sendable (EasyHandle) -> Void)? = nil) {
        self.easy = easy
        self.multi = multi
        self.context = context
        self.releasing = releasing
        head = context.head
        offset = Int64(context.bodyCount)
        if context.head.status != 200, let range = context.head.contentRange {
            total = range.completeLength ?? 0
            answerEnd = range.last.map { $0 + 1 } ?? total
        } else {
            // A 200: the whole file, to its announced length, or to the end of its chunks (a
            // `Content-Range` beside it, which some proxies echo, says nothing about its body).
            total = context.head.contentLength ?? 0
            answerEnd = context.head.contentLength ?? Int64.max
        }
        sentAt = context.sentAt
    }

    /// The answer runs to the file's end and more of it is still to come: the rest of the file, as
    /// a request for `offset..<total` would bring it.
    var bringsTheRest: Bool { head.contentRange?.last == total - 1 && offset < total }

    /// More of the answer is still to come: the bytes `offset..<answerEnd`.
    var bringsMore: Bool { offset < answerEnd }

    /// The fetch continues it: from now on it is the adopter's (see `TransferDriver.adopt`).
    func adopted() {
        isSettled = true
        context = nil
    }

    /// Ends the transfer; nothing once adopted or released.
    func release() {
        guard !isSettled else { return }
        isSettled = true
        context = nil
        if let releasing { releasing(easy) } else { multi.remove(easy) }
    }

    /// `release()`, counting a transfer still open as cancelled in its host's budget (`share`):
    /// ended mid-answer, the server counts it a moment longer.
    func release(counting share: HostShare?) {
        if !isSettled { share?.cancelled(1) }
        release()
    }

    deinit { release() }

    static func == (a: HeldTransfer, b: HeldTransfer) -> Bool { a === b }
}

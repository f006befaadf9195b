import SeggetCurl

/// One probing request, set up and not yet started, with the rules that end it early: where it is
/// held for the fetch (`holdDue`) and where it is cut (`cutDue`). Whoever runs it asks both after
/// every pass of its loop: `MultiHandle.performAlone` for a blocking probe (mirrors, a renewed link,
/// the daemon's naming probe), the `DownloadLoop` for every download's own probe.
final class ProbeRequest {
    let easy: EasyHandle
    let context: ProbeContext
    /// Asked for the whole file (`bytes=0-`), to be held once the prefix is in.
    let holding: Bool
    /// With `holding`: held as soon as the head shows a file larger than the limit (see `Prober.holdsAtHead`).
    let holdsAtHead: Bool
    /// How long its body may take before it is cut (`cutDue`): `Prober.prefixSeconds`, or longer.
    let cutAfter: Double
    private var headAt: Double?

    init(easy: EasyHandle, context: ProbeContext, holding: Bool, holdsAtHead: Bool = false, cutAfter: Double = Prober.prefixSeconds) {
        self.easy = easy
        self.context = context
        self.holding = holding
        self.holdsAtHead = holdsAtHead
        self.cutAfter = cutAfter
    }

    /// Timed from the head, not the first body byte: a server that answers at once and then holds
    /// back the body (a trickle starting at one byte per second) is cut as soon.
    func cutDue() -> Bool {
        guard context.head.isComplete else { return false }
        let now = monotonicSeconds()
        if headAt == nil { headAt = now }
        return now - (context.bodyStartedAt > 0 ? context.bodyStartedAt : headAt!) > cutAfter
    }

    /// True when the transfer is (now) held: paused by the collector at its limit, at its head for a
    /// download of several connections (a 206 from 0 to the file's end, of a file larger than the
    /// limit), or
    /// here, where a slow first answer is held where it got rather than cut, for the fetch to continue it.
    func holdDue() -> Bool {
        if context.isHeld { return true }
        let head = context.head
        if holding, holdsAtHead, head.isComplete, head.status == 206, head.contentEncoding == nil,
            let cr = head.contentRange, cr.first == 0, let total = cr.completeLength, cr.last == total - 1,
            total > Int64(context.limit), (try? easy.pause()) != nil
        {
            context.isHeld = true
            return true
        }
        // A slow 200 too, where the fetch can continue it (`ProbeContext.holdsWholeAnswer`).
        guard (holding && head.status == 206) || context.holdsWhenSlow,
            head.contentEncoding == nil, cutDue(), (try? easy.pause()) != nil
        else { return false }
        context.isHeld = true
        return true
    }
}

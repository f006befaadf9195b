/// The bookkeeping of bytes that arrive out of order and are consumed in order: which bytes of the
/// reorder window have arrived, and how far they have been handed on.
///
/// Bytes arrive out of order from several connections; they are held until every byte before them
/// has arrived, then handed on. Every byte held lies in `[handedOn, handedOn + capacity)`, so the
/// bytes held never exceed `capacity`. Two users: a download into a stream (`-o -`, `StreamSink` in
/// Segget), where a connection whose next byte lies beyond `limit` pauses until the stream moves on,
/// and the hasher of a download into a file (`HashFeed`), which pauses nothing: bytes beyond `limit`
/// fall out (`unheld(in:)`) and are read back from the file when the prefix reaches them
/// (`firstGap`). Values in, values out.
public struct ReorderWindow: Sendable, Equatable {
    /// The most bytes held at once.
    public let capacity: Int64
    /// Bytes handed on, in order, from the stream's start (its first offset counted).
    public private(set) var handedOn: Int64
    /// The byte ranges that arrived and were not handed on yet: sorted, disjoint and not touching,
    /// all at or above `handedOn`.
    public private(set) var held: [Range<Int64>] = []

    /// A window of `capacity` bytes over a stream that starts at offset `start`.
    public init(capacity: Int64, start: Int64 = 0) {
        precondition(capacity > 0, "a reorder window holds at least one byte")
        self.capacity = capacity
        handedOn = start
    }

    /// Bytes below this offset may be received now.
    public var limit: Int64 { handedOn + capacity }

    /// Bytes held, waiting for those before them.
    public var heldBytes: Int64 { held.reduce(0) { $0 + Int64($1.count) } }

    /// The bytes at the head that may be handed on now, if any.
    public var ready: Range<Int64>? {
        guard let first = held.first, first.lowerBound <= handedOn else { return nil }
        return handedOn..<first.upperBound
    }

    /// What to store of bytes `r` that arrived: the part not handed on yet (a duplicate of bytes
    /// already handed on is dropped), or nil when nothing is left. Bytes beyond `limit` are a
    /// caller's error: it must have paused the connection.
    public func toStore(_ r: Range<Int64>) -> Range<Int64>? {
        precondition(r.upperBound <= limit, "bytes \(r) arrived beyond the reorder window's limit \(limit)")
        let kept = max(r.lowerBound, handedOn)..<max(r.upperBound, handedOn)
        return kept.isEmpty ? nil : kept
    }

    /// Records that bytes `r` (as `toStore` returned them) are stored. An overlap with bytes held
    /// already (an end-game race delivers some bytes twice) merges.
    public mutating func arrived(_ r: Range<Int64>) {
        guard let r = toStore(r) else { return }
        var lo = r.lowerBound, hi = r.upperBound
        var i = 0
        while i < held.count && held[i].upperBound < lo { i += 1 }
        var j = i
        while j < held.count && held[j].lowerBound <= hi {
            lo = min(lo, held[j].lowerBound)
            hi = max(hi, held[j].upperBound)
            j += 1
        }
        held.replaceSubrange(i..<j, with: [lo..<hi])
    }

    /// `count` bytes at the head were handed on (at most `ready`'s count).
    public mutating func handOn(_ count: Int64) {
        guard let r = ready else {
            precondition(count == 0, "nothing is ready to hand on")
            return
        }
        precondition(count >= 0 && count <= Int64(r.count), "handed on \(count) bytes of \(r.count) ready")
        handedOn += count
        if handedOn >= held[0].upperBound {
            held.removeFirst()
        } else {
            held[0] = handedOn..<held[0].upperBound
        }
    }

    /// The parts of `r` a window that drops rather than pauses would store: those inside
    /// `[handedOn, limit)` that are not held already, in order. What lies below `handedOn` was
    /// handed on already; what lies at or beyond `limit` falls out.
    public func unheld(in r: Range<Int64>) -> [Range<Int64>] {
        var lo = max(r.lowerBound, handedOn)
        let hi = min(r.upperBound, limit)
        var parts: [Range<Int64>] = []
        for h in held where lo < hi {
            if h.upperBound <= lo { continue }
            if h.lowerBound >= hi { break }
            if h.lowerBound > lo { parts.append(lo..<h.lowerBound) }
            lo = max(lo, h.upperBound)
        }
        if lo < hi { parts.append(lo..<hi) }
        return parts
    }

    /// The first bytes from `handedOn` on that are not held, up to the next held bytes or `limit`:
    /// what must come from elsewhere before the bytes after it can be handed on. Nil when the whole
    /// window is held.
    public var firstGap: Range<Int64>? {
        let start = ready?.upperBound ?? handedOn
        let end = held.first(where: { $0.lowerBound > start })?.lowerBound ?? limit
        return start < end ? start..<end : nil
    }
}

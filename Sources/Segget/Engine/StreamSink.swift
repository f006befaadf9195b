import Synchronization
import SeggetJournal
import SeggetSystem
import SeggetVerify

/// What the fetch engine reads of a download into a stream: where the reorder window ends (a
/// connection whose next bytes lie beyond it pauses) and whether the stream's reader failed.
protocol StreamGate: AnyObject {
    /// Bytes below this offset may be received now.
    var receiveLimit: Int64 { get }
    /// Why the stream cannot go on (its output failed), if it cannot.
    var outputFailure: (any Error)? { get }
    /// Bytes are waiting for the reader: the reader, not the network, sets the pace now.
    var readerIsBehind: Bool { get }
}

/// The storage of a download into a stream (`-o -`, `Download.stream`): bytes written at any offset
/// of the reorder window are kept in a ring of `capacity` bytes and handed to `output` in order, on
/// a thread of their own, so that a slow reader holds up no connection but those it must.
///
/// Memory: the ring is made of 1 MiB blocks, allocated when bytes arrive for them and given back
/// once handed on, so it holds about what the window holds (a fast reader keeps it small) and never
/// more than `capacity` plus one block. `ReorderWindow` keeps every byte held inside
/// `[handedOn, handedOn + capacity)`, so no two held bytes share a place in the ring. The fetch
/// engine pauses a connection whose next bytes lie beyond `receiveLimit` (see
/// `FetchEngine.receive`), so a write never waits for room; if one did, it would wait, not drop.
///
/// With `algorithms`, the bytes are hashed as they are handed on, in order: `digests()` is the
/// digest of exactly what the reader got.
final class StreamSink: BlockStorage, StreamGate, @unchecked Sendable {
    typealias Output = (UnsafeRawBufferPointer) throws -> Void

    let capacity: Int64
    /// The first offset of the stream (`--stream-from`).
    let start: Int64
    /// The ring's blocks (nil: not allocated), and for each the block of the stream it last held.
    private var blocks: [AlignedBuffer?]
    private var owners: [Int64]
    /// Blocks given back, kept for reuse (at most `keptBlocks`).
    private var spare: [AlignedBuffer] = []
    private var handedOnBlocks: Int64
    private let output: Output
    private let lock = ConditionLock()
    // Guarded by `lock`.
    private var window: ReorderWindow
    private var failure: (any Error)?
    private var end: Int64?
    private var emitterDone = false
    private var digesters: [Digester]
    /// `window.limit`, readable without the lock on every body callback.
    private let limit: Atomic<Int64>
    /// The most bytes held at once (for tests and the memory bound).
    private(set) var peakHeld: Int64 = 0

    /// The most bytes `output` is given in one call, and the size of the ring's blocks.
    static let outputPiece = 1 << 20
    static let blockSize: Int64 = 1 << 20
    static let keptBlocks = 4

    init(capacity: Int64, start: Int64 = 0, algorithms: [DigestAlgorithm] = [], output: @escaping Output) {
        precondition(capacity > 0 && capacity % Self.blockSize == 0, "the window is a whole number of blocks")
        self.capacity = capacity
        self.start = start
        blocks = Array(repeating: nil, count: Int(capacity / Self.blockSize))
        owners = Array(repeating: -1, count: blocks.count)
        handedOnBlocks = start / Self.blockSize
        self.output = output
        window = ReorderWindow(capacity: capacity, start: start)
        limit = Atomic(start + capacity)
        digesters = algorithms.map { Digester($0) }
    }

    /// Starts the thread that hands the bytes on. Throws if it cannot be created.
    func startEmitting() throws(Errno) {
        try SystemThread.detach { [self] in emitLoop() }
    }

    var receiveLimit: Int64 { limit.load(ordering: .acquiring) }
    var outputFailure: (any Error)? { lock.withLock { failure } }
    var readerIsBehind: Bool { lock.withLock { (window.ready?.count ?? 0) >= Self.outputPiece } }
    /// Bytes handed to the output so far, from `start`.
    var handedOn: Int64 { lock.withLock { window.handedOn } }

    // MARK: BlockStorage (the writer thread)

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        let r = offset..<(offset + Int64(bytes.count))
        try lock.withLock { () throws(Errno) in
            // Bytes beyond the window wait for room (the engine pauses connections before that).
            while failure == nil && !emitterDone && r.upperBound > window.limit { lock.wait() }
            if failure != nil { throw Errno.brokenPipe }
            // A stream that stopped takes nothing more.
            guard r.upperBound <= window.limit, let kept = window.toStore(r) else { return }
            copyIn(bytes, skipping: Int(kept.lowerBound - offset), to: kept)
            window.arrived(kept)
            peakHeld = max(peakHeld, (window.held.last?.upperBound ?? window.handedOn) - window.handedOn)
            lock.broadcast()
        }
    }

    private func copyIn(_ bytes: UnsafeRawBufferPointer, skipping: Int, to r: Range<Int64>) {
        var from = skipping
        var at = r.lowerBound
        while at < r.upperBound {
            let block = at / Self.blockSize
            let inBlock = Int(at % Self.blockSize)
            let n = min(Int(r.upperBound - at), Int(Self.blockSize) - inBlock)
            (buffer(for: block).base + inBlock).copyMemory(from: bytes.baseAddress! + from, byteCount: n)
            from += n
            at += Int64(n)
        }
    }

    /// The ring's block for stream block `block`, allocated if need be. (Bytes of two stream blocks
    /// can share a ring block, at different places: see `ReorderWindow`.)
    private func buffer(for block: Int64) -> AlignedBuffer {
        let slot = Int(block % Int64(blocks.count))
        owners[slot] = max(owners[slot], block)
        if let b = blocks[slot] { return b }
        let b = spare.popLast() ?? AlignedBuffer(count: Int(Self.blockSize), alignment: 4096)
        blocks[slot] = b
        return b
    }

    /// Gives back the ring blocks whose stream block is handed on whole and holds nothing newer.
    private func releaseHandedOnBlocks() {
        let done = window.handedOn / Self.blockSize
        while handedOnBlocks < done {
            let slot = Int(handedOnBlocks % Int64(blocks.count))
            if owners[slot] == handedOnBlocks, let b = blocks[slot] {
                blocks[slot] = nil
                if spare.count < Self.keptBlocks { spare.append(b) }
            }
            handedOnBlocks += 1
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        throw Errno.notSupported
    }
    func sync() throws(Errno) {}
    func size() throws(Errno) -> Int64 { lock.withLock { window.handedOn } }
    func truncate(to length: Int64) throws(Errno) {}

    // MARK: Handing on (the emitter thread)

    private func emitLoop() {
        while true {
            let piece: (block: AlignedBuffer, place: Int, count: Int)? = lock.withLock {
                while failure == nil, window.ready == nil, end.map({ window.handedOn < $0 }) ?? true { lock.wait() }
                guard failure == nil, let r = window.ready else { return nil }
                let place = Int(r.lowerBound % Self.blockSize)
                // Only this thread gives blocks back, so the block stays while it is read outside the lock.
                return (buffer(for: r.lowerBound / Self.blockSize), place, min(r.count, Int(Self.blockSize) - place))
            }
            guard let piece else { break }
            let bytes = UnsafeRawBufferPointer(start: piece.block.base + piece.place, count: piece.count)
            for d in digesters { d.update(bytes) }
            do {
                try output(bytes)
            } catch {
                lock.withLock {
                    // What the output took before it failed was handed on.
                    if let partial = error as? StreamOutputFailure, partial.written > 0 {
                        window.handOn(Int64(min(partial.written, piece.count)))
                    }
                    if failure == nil { failure = (error as? StreamOutputFailure)?.error ?? error }
                    lock.broadcast()
                }
                break
            }
            lock.withLock {
                window.handOn(Int64(piece.count))
                releaseHandedOnBlocks()
                limit.store(window.limit, ordering: .releasing)
                lock.broadcast()
            }
        }
        lock.withLock {
            emitterDone = true
            lock.broadcast()
        }
    }

    /// Waits until every byte up to `length` (the stream's end) is handed on, or the output failed.
    /// Returns how far the stream got; throws the output's error.
    @discardableResult
    func finish(length: Int64) throws -> Int64 {
        try lock.withLock { () throws -> Int64 in
            end = length
            lock.broadcast()
            while !emitterDone && failure == nil && window.handedOn < length { lock.wait() }
            if let failure { throw failure }
            return window.handedOn
        }
    }

    /// Stops handing on (the download failed): the emitter thread ends once its current piece is out.
    func stop() {
        lock.withLock {
            if end == nil { end = window.handedOn }
            lock.broadcast()
        }
    }

    /// Stops handing on and waits until the emitter thread ended (it first hands on what is ready:
    /// every byte that can continue the stream later). Returns how far the stream got.
    func stopAndWait() -> Int64 {
        stop()
        return lock.withLock {
            while !emitterDone { lock.wait() }
            return window.handedOn
        }
    }

    /// The digests of the bytes handed on; call after `finish`.
    func digests() -> [DigestAlgorithm: [UInt8]] {
        lock.withLock { Dictionary(uniqueKeysWithValues: digesters.map { ($0.algorithm, $0.finalize()) }) }
    }
}

/// An output's failure part-way through a piece of the stream: the bytes it took before `error`
/// (a pipe takes what fits before its reader's exit shows as `EPIPE`), so that the stream's
/// report of how far it got counts them.
public struct StreamOutputFailure: Error {
    public var written: Int
    public var error: Errno

    public init(written: Int, error: Errno) {
        self.written = written
        self.error = error
    }
}

import SeggetSystem

/// Hashes a file while it is being downloaded into it, in file order, from the bytes the download
/// lends it as they arrive, reading back from the file only what it was not lent.
///
/// The download lends every run of bytes it hands to its writer (`lend`): the hasher keeps those that
/// fall inside its reorder window (`HashFeed`: a window over the file from the hashed prefix on, and a
/// bound on the memory kept) until every digest has hashed them, then gives the buffer back through
/// the closure that came with it. What it did not keep (bytes too far ahead, an earlier run's bytes
/// on a resume) it reads back from the file once `advance(to:)` says the file holds it. Every digest
/// (SHA-256, MD5, several at once) hashes in steps on the threads of `WorkerPool.readBack`, shared by
/// every download of the process: two digests run side by side, and a read runs beside a hash. The
/// download never waits for the hash: a hash that falls behind leaves more bytes outside its window,
/// to be read back later.
///
/// `finish(length:)` blocks until the whole length is hashed and returns the digests. `cancel()`
/// stops the steps and gives every lent buffer back. Read errors surface from `finish`. Dropping the
/// hasher cancels it.
///
/// The caller promises that bytes it lends are the bytes the file gets at that offset, and that bytes
/// below an offset it passed to `advance(to:)` are written and will not change: each byte is hashed
/// exactly once, from memory or from the file.
public final class PrefixHasher: Sendable {
    // All mutable state lives in `job`, behind its lock; this wrapper exists so that dropping the hasher
    // can cancel the steps, which themselves keep `job` alive until they end.
    private let job: PrefixHashJob

    /// Opens `path`; nothing is read before the first `advance(to:)`.
    ///
    /// Each algorithm is computed once however often it is listed. Throws `HashingError` if the file cannot be
    /// opened.
    ///
    /// With `direct`, what is read back is read with `O_DIRECT` (where the file system allows it), for
    /// files written that way: reading them through the page cache would cost a fresh page per 4 KiB.
    ///
    /// `memoryWindow` bounds the memory of the bytes kept from `lend` and `offer` (the buffers behind
    /// them): 0 keeps none, and everything is read back.
    public init(path: String, algorithms: [DigestAlgorithm], direct: Bool = false, memoryWindow: Int = 0) throws {
        let file = try ReadOnlyFile(path: path, direct: direct)
        job = PrefixHashJob(
            file: file, digesters: uniqued(algorithms).map(Digester.init), memoryLimit: max(0, memoryWindow),
            pool: .readBack)
    }

    deinit {
        job.cancel()
    }

    /// Tells the hasher that every byte below `offset` is written; smaller offsets than before are ignored.
    ///
    /// Takes a lock for a few instructions and may start a step; safe to call from any thread,
    /// including a libcurl write callback.
    public func advance(to offset: Int64) {
        job.advance(to: offset)
    }

    /// What became of bytes lent to the hasher.
    public struct Lending: Sendable, Equatable {
        /// The hasher keeps (some of) the bytes: it calls the lender's `release` once it is done.
        public let kept: Bool
        /// Some of the bytes lie beyond the window (or its memory): the hasher reads them back from
        /// the file once the prefix reaches them, so they are best written where that read is cheap.
        public let fellOut: Bool

        public init(kept: Bool, fellOut: Bool) {
            self.kept = kept
            self.fellOut = fellOut
        }
    }

    /// Lends the hasher `bytes`, which the file gets at `offset`, in a buffer of `footprint` bytes.
    /// If it keeps any of them (`kept`), the buffer must stay unchanged until the hasher calls
    /// `release`, exactly once, on any thread (never while it holds its lock); otherwise `release`
    /// is never called. Bytes hashed already are not kept. Cheap: a lock and a few comparisons;
    /// safe from any thread.
    public func lend(
        _ bytes: UnsafeRawBufferPointer, at offset: Int64, footprint: Int, release: @escaping @Sendable () -> Void
    ) -> Lending {
        job.lend(bytes, at: offset, footprint: footprint, release: release)
    }

    /// Offers `bytes`, which the file gets at `offset`: the hasher holds on to the value (not a copy)
    /// while the bytes fall inside its window, until it hashed them. Hand over the only reference
    /// (drop yours after the call), so that the memory goes as soon as the hash is past it.
    public func offer(_ bytes: some OwnedBytes, at offset: Int64) {
        job.keep(bytes, at: offset)
    }

    /// Offers a copy of `bytes` (which the file gets at `offset`): the hasher keeps the copy if the
    /// bytes fall inside its window. For bytes the caller cannot lend (they go away after the call).
    public func offer(_ bytes: UnsafeRawBufferPointer, at offset: Int64) {
        guard !bytes.isEmpty else { return }
        let copy = CopiedBytes(bytes)
        if !job.lend(UnsafeRawBufferPointer(copy.bytes), at: offset, footprint: bytes.count, release: { copy.free() }).kept {
            copy.free()
        }
    }

    /// Hands `sink` a line about the hash's progress (bytes lent, hashed, kept, fallen out, read back)
    /// every `step` bytes lent, on the lender's thread: a trace for tuning (`SEGGET_DEBUG`).
    public func trace(every step: Int64, _ sink: @escaping @Sendable (String) -> Void) {
        job.trace(every: step, sink)
    }

    /// Waits until the first `length` bytes are hashed and returns one digest per requested algorithm.
    ///
    /// Treats `length` as finished even if `advance(to:)` never reached it. Calling it again returns the same
    /// digests. Throws `HashingError`: `.fileTooShort` if the file ends before `length`, `.readFailed`,
    /// `.cancelled` after `cancel()`, or `.advancedPastLength` if the prefix was advanced beyond `length`.
    public func finish(length: Int64) throws -> [DigestAlgorithm: [UInt8]] {
        try job.finish(length: length)
    }

    /// Stops the hashing, waits for its steps in progress to end (at most one block's work later) and
    /// gives back every lent buffer.
    ///
    /// After this `finish` throws `.cancelled`. Calling it more than once, or after `finish`, is harmless.
    public func cancel() {
        job.cancel()
    }

    /// How many bytes from the start of the file have been hashed so far, for progress reports.
    public var hashedBytes: Int64 {
        job.hashed
    }

    /// Where the hashed bytes came from so far.
    public var statistics: HashStatistics {
        job.statistics
    }

    /// How many bytes were read from the file (as opposed to taken from memory).
    var bytesReadFromFile: Int64 {
        job.statistics.readBack
    }

    /// True when the file is read with `O_DIRECT`.
    var readsDirectly: Bool {
        job.readsDirectly
    }
}

/// Bytes a value owns, which a hasher keeps alive by holding the value (`PrefixHasher.offer`).
public protocol OwnedBytes: Sendable {
    var count: Int { get }
    /// Calls `body` with the bytes, valid only inside it.
    func withBytes(_ body: (UnsafeRawBufferPointer) -> Void)
}

extension Array: OwnedBytes where Element == UInt8 {
    public func withBytes(_ body: (UnsafeRawBufferPointer) -> Void) {
        withUnsafeBytes { body($0) }
    }
}

/// Where a hasher's bytes came from: memory lent by the download, or the file.
public struct HashStatistics: Sendable, Equatable {
    /// Bytes hashed from memory.
    public var fromMemory: Int64 = 0
    /// Bytes read back from the file (with `O_DIRECT`, whole blocks around what was needed).
    public var readBack: Int64 = 0
    /// Bytes lent that fell out of the window (they were read back instead).
    public var fellOut: Int64 = 0
    /// The most memory held at once by kept bytes.
    public var peakMemory = 0

    public init(fromMemory: Int64 = 0, readBack: Int64 = 0, fellOut: Int64 = 0, peakMemory: Int = 0) {
        self.fromMemory = fromMemory
        self.readBack = readBack
        self.fellOut = fellOut
        self.peakMemory = peakMemory
    }
}

/// A copy of bytes the hasher keeps (`PrefixHasher.offer`); freed by its `release`.
private final class CopiedBytes: @unchecked Sendable {
    let bytes: UnsafeMutableRawBufferPointer

    init(_ source: UnsafeRawBufferPointer) {
        bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: source.count, alignment: 16)
        bytes.copyMemory(from: source)
    }

    func free() { bytes.deallocate() }
}

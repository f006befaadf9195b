import SeggetVerify

/// Everything that shapes one download.
public struct DownloadOptions: Sendable {
    /// Parallel connections (1…128); with `autoConnections`, the most that may be used.
    public var connections = 8
    /// Start with 4 connections and add 2 every 2 s while the throughput still rises by 10 %.
    public var autoConnections = false
    /// Other URLs of the same file; ranges are spread over all of them. A mirror whose length or
    /// validators disagree with the main URL is dropped with a notice.
    public var mirrors: [String] = []
    /// Journal unit and smallest piece of work a connection takes.
    public var chunkSize: Int64 = 1 << 20
    /// Exact output path (`-o`); wins over `directory`.
    public var outputPath: String?
    /// Directory for the probed file name (`-d`); the current directory when nil.
    public var directory: String?
    /// Overwrite an existing output file.
    public var force = false
    /// Resume from a journal left by an earlier run (the default).
    public var resume = true
    public var transfer = TransferOptions()
    /// Digests the result must match.
    public var checksums: [ExpectedDigest] = []
    /// Also check digests the server publishes (`Repr-Digest`, `Digest`, `Content-MD5`).
    public var verifyServerDigests = true
    /// Retries per range after a failure, with exponential backoff from `retryWait` seconds.
    public var retries = 5
    public var retryWait = 1.0
    /// Give up after this many seconds overall (the journal is kept): the probe, redirects, every
    /// retry wait and the fetch all fit inside it, and a wait that cannot fails at once.
    public var timeout: Double?
    /// The longest a server's `Retry-After` may make a retry wait; a longer ask waits this long.
    public var maxRetryWait = RetryPolicy.defaultMaxWait
    /// Total receive rate cap, bytes per second, shared by all connections.
    public var maxSpeed: Int64?
    /// Seconds between durability checkpoints (`fdatasync` of data, then journal).
    public var checkpointInterval = 5.0
    /// `fdatasync` the finished file before it gets its final name, and the directory after (`--fsync`).
    /// Off by default: the journal keeps its power-cut guarantee either way, but the finished file is
    /// then left to the kernel's writeback (README, "What segget guarantees").
    public var syncBeforeRename = false
    /// How data reaches the file: adaptive (`O_DIRECT` while the disk keeps up, the page cache for the
    /// rest), always `O_DIRECT`, or always the page cache.
    public var writePath = WritePath.adaptive
    /// False forces the page cache for writes and read-back (`writePath = .pageCache`).
    public var directIO: Bool {
        get { writePath != .pageCache }
        set { writePath = newValue ? (writePath == .pageCache ? .adaptive : writePath) : .pageCache }
    }
    /// Re-dial connections much slower than their peers.
    public var redialSlowConnections = true
    /// Race the last in-flight chunks on idle connections.
    public var endGame = true

    public init() {}
}

/// What a finished download produced.
public struct DownloadResult: Sendable, Equatable {
    public var path: String
    public var bytes: Int64
    /// Bytes that were already on disk from an earlier run.
    public var resumedBytes: Int64
    /// Bytes received from the network in this run (more than `bytes - resumedBytes` when retried).
    public var receivedBytes: Int64
    public var seconds: Double
    public var connections: Int
    /// Digests that were checked, `(algorithm, hex)`.
    public var verified: [String]
    public var usedRanges: Bool
}

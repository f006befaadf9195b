import SeggetVerify

/// Everything that shapes one download.
public struct DownloadOptions: Sendable, Equatable {
    /// Parallel connections (1…128); with `autoConnections`, the most that may be used.
    public var connections = 8
    /// The shortest round trip on which connections are warmed beside a slow probe
    /// (`ConnectionWarmUp.minRoundTrip`); tests lower it to warm on loopback.
    var warmUpMinRoundTrip = ConnectionWarmUp.minRoundTrip
    /// Start with 4 connections and add 2 every 2 s while the throughput still rises by 10 %.
    public var autoConnections = false
    /// `connections` and `autoConnections` as the one value a user gives (`-n 8`, `-n auto`).
    public var connectionCount: ConnectionCount {
        get { autoConnections ? .auto : .fixed(connections) }
        set {
            connections = newValue.most
            autoConnections = newValue.isAuto
        }
    }
    /// A batch's spare connections (see `ConnectionLender`): `connections` is then this download's
    /// own share, and while the lender has spare ones it may borrow more, up to `connectionsWithLoans`
    /// in all. Not with `autoConnections`.
    public var lender: ConnectionLender?
    public var connectionsWithLoans = 0
    /// With `lender`, a daemon task's own share, which may be lowered while it runs (see
    /// `ConnectionShare`); `connections` is its value at the start.
    public var ownShare: ConnectionShare?
    /// The process's per-host budget (see `HostBudget`): this download's requests to its host count
    /// against it with those of the other downloads sharing it. Nil: only its own connections count.
    public var hostBudget: HostBudget?
    /// A batch's one reading of its output directories (see `StartingNames`), which answers for the
    /// side files an earlier run may have left instead of a look-up per file. Nil: look each up.
    public var startingNames: StartingNames?
    /// A receive rate cap shared with other downloads and changeable while they run (a daemon's
    /// overall limit; see `SharedRateLimit`), on top of `maxSpeed`.
    public var sharedSpeedLimit: SharedRateLimit?
    /// A receive rate cap of this download's own that may change while it runs (a daemon task's
    /// `max-download-limit`, changed by `changeOption`), on top of `maxSpeed`.
    public var ownSpeedLimit: SharedRateLimit?
    /// Other URLs of the same file; ranges are spread over all of them. A mirror whose length or
    /// validators disagree with the main URL is dropped with a notice. Where the main URL's first
    /// request fails, the first mirror that answers stands in for it (`Download.nextSource`).
    public var mirrors: [String] = []
    /// The piece hashes of a Metalink: each piece is hashed as soon as its bytes are in the file, one
    /// that fails is fetched again from another source and the source that served it gets no more
    /// work; the file is published only once every piece matched. Nil: none.
    public var pieces: PieceHashes?
    /// The length a Metalink gives: a server that serves another length is refused.
    public var expectedLength: Int64?
    /// Follow the first answer's Metalink/HTTP `Link` fields (RFC 6249): its duplicates as mirrors,
    /// and the piece hashes of the Metalink it points to.
    public var metalinkHTTP = true
    /// Prefer mirrors in this country (ISO 3166 code) among a Metalink's or the `Link` duplicates.
    public var metalinkLocation: String?
    /// Journal unit and smallest piece of work a connection takes.
    public var chunkSize: Int64 = 1 << 20
    /// The most the probe asks for, below the first chunk, and never held open for the fetch (see
    /// `Download.holdsProbeTransfer`): a batch's file started while others fill the batch's places
    /// (`Batch.speculativeProbeBytes`), whose size nobody knows yet. nil: the first chunk.
    public var probeLimit: Int64?
    /// Exact output path (`-o`); wins over `directory`.
    public var outputPath: String?
    /// The name a list's file is to take (an input file's `out=`) before its path is decided in list
    /// order, for the probe's look at what is already there (`Download.probeBytes`). Without it, a
    /// file under the URL's own name made the first look a one-byte request and the file cost two.
    public var likelyName: String?
    /// Directory for the probed file name (`-d`); the current directory when nil.
    public var directory: String?
    /// Overwrite an existing output file.
    public var force = false
    /// One file of a list (`-i`): a file already under the output name is refused with the advice
    /// for a list (`--skip-existing` when the list runs again after it stopped, `out=`) rather than
    /// for one download (`-o`).
    public var ofList = false
    /// A daemon's task: a file already under the output name is refused with the advice for a
    /// task (remove the file, or the task's `out`), the daemon never overwriting one.
    public var ofDaemon = false
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
    /// Asked for a new link when the download's link expires mid-download (401, 403 or 410 after the
    /// download started; see ``LinkExpiry``). Nil: the download stops with a message that says how to
    /// renew (`--refresh-command`, or a fresh link with the same output name).
    public var linkRenewer: LinkRenewer?

    public init() {}
}

extension DownloadOptions {
    /// These options with one file's own settings laid over them: an input file's entry
    /// (`segget -i`), a daemon task's options, or the command line's request options. Every way of
    /// giving per-file settings goes through here, so that a header, a referer or a speed cap means the
    /// same wherever it was given. The directory replaces `directory`; headers and checksums are added
    /// to the run's; the others replace the run's when given. `outputName` and
    /// `maxConnectionsPerServer` are left to the caller (it decides the path and the host budget).
    public func applying(_ x: FileOptions) -> DownloadOptions {
        var o = self
        if let v = x.directory { o.directory = v }
        o.checksums += x.checksums
        o.transfer.headers += x.headers
        if let v = x.userAgent { o.transfer.userAgent = v }
        if let v = x.referer { o.transfer.referer = v }
        if let v = x.proxy { o.transfer.proxy = v }
        if let v = x.connections { o.connections = v }
        if let v = x.maxSpeed { o.maxSpeed = v }
        if let v = x.maxTries { o.retries = v == 0 ? OptionSchema.unlimitedRetries : v - 1 }
        if let v = x.retryWait { o.retryWait = v }
        if let v = x.stallTimeout { o.transfer.stallTimeout = v }
        if let v = x.connectTimeout { o.transfer.connectTimeout = v }
        // Retries without end never come at once: a refused port or a 503 re-asked without a pause
        // for ever is what a server's operator blocks.
        if x.maxTries == 0 { o.retryWait = max(o.retryWait, 1) }
        return o
    }
}

/// What a finished download produced.
/// What a download cost its servers: the requests it sent (the probe's, its redirects, the
/// connections warmed beside it, and every range), the TCP connections those opened, the answers
/// that refused it for a host's limit (429, 503), and the bytes received more than once (answers cut
/// past where they were needed, lost end-game races). Of every attempt of the run (`EarlierAttempts`).
public struct RequestTally: Sendable, Equatable {
    public var requests = 0
    public var connections = 0
    public var refusals = 0
    public var refetchedBytes: Int64 = 0

    public init(requests: Int = 0, connections: Int = 0, refusals: Int = 0, refetchedBytes: Int64 = 0) {
        self.requests = requests
        self.connections = connections
        self.refusals = refusals
        self.refetchedBytes = refetchedBytes
    }

    public static func + (a: RequestTally, b: RequestTally) -> RequestTally {
        RequestTally(requests: a.requests + b.requests, connections: a.connections + b.connections,
                     refusals: a.refusals + b.refusals, refetchedBytes: a.refetchedBytes + b.refetchedBytes)
    }

    /// `requests 9, connections opened 9, refusals 0, fetched twice 0 B`: for traces and messages.
    public var summary: String {
        "requests \(requests), connections opened \(connections), refusals \(refusals), fetched twice \(Format.bytes(refetchedBytes))"
    }
}

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
    /// What it cost the servers (see `RequestTally`).
    public var tally = RequestTally()
    /// Where the checked bytes were hashed from (memory, or read back from the file); nil when no
    /// digest was checked.
    public var hashing: HashStatistics? = nil
    /// What the piece checks found, for a download with piece hashes.
    public var pieces: PieceReport?
    /// An earlier run finished the file (its mark vouched for it): nothing was saved now.
    public var finishedEarlier = false
    /// The most answers the servers sent at one time (a host that refused the rest served fewer
    /// than `connections`); nil where the fetch did not count them (a file the probe brought).
    public var servedAtOnce: Int? = nil
}

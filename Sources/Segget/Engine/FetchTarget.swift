/// One server that holds the file (the main URL or a mirror), with its validators.
struct FetchSource {
    let url: String
    /// `url`'s host (`HostBudget.key`: scheme, name and port), whose limit its requests count in
    /// (see `Coordinator+HostLimit.swift`); worked out once here, not on every pass of the loop.
    let hostKey: String
    var etag: String?
    var lastModified: String?
    /// Sent as `If-Range` so that a changed file yields a 200 instead of mixed bytes.
    var ifRange: String?
    /// Send no credentials here (another host than the one they were given for).
    var withoutCredentials = false
    /// How long its probe's first answer took: a request here waits that long for its first byte
    /// before the slow rule counts the wait against it. Nil for the main URL (its first answers are
    /// the download's usual ones).
    var firstAnswer: Double?

    init(
        url: String, etag: String? = nil, lastModified: String? = nil, ifRange: String? = nil, withoutCredentials: Bool = false,
        firstAnswer: Double? = nil
    ) {
        self.url = url
        hostKey = HostBudget.key(for: url)
        self.etag = etag
        self.lastModified = lastModified
        self.ifRange = ifRange
        self.withoutCredentials = withoutCredentials
        self.firstAnswer = firstAnswer
    }
}

/// How a fetch validates what the server sends.
struct FetchTarget {
    var url: String
    /// Total length; nil only in stream mode with an unknown length.
    var totalLength: Int64?
    /// Ranged (one request per run of chunks) or one plain stream from byte 0.
    var ranged: Bool
    var etag: String?
    var lastModified: String?
    /// Sent as `If-Range` so that a changed file yields a 200 instead of mixed bytes.
    var ifRange: String?
    /// Mirrors besides the main URL; connection i uses source i mod (mirrors + 1).
    var mirrors: [FetchSource] = []

    /// Send no credentials to the main URL (a redirect moved it to another host).
    var mainWithoutCredentials = false

    var sources: [FetchSource] { [main] + mirrors }

    /// The main URL as a source.
    var main: FetchSource {
        FetchSource(url: url, etag: etag, lastModified: lastModified, ifRange: ifRange, withoutCredentials: mainWithoutCredentials)
    }

    /// The source a connection whose source index is `i` uses (`sources[i mod count]`).
    func source(_ i: Int) -> FetchSource {
        let k = i % (mirrors.count + 1)
        return k == 0 ? main : mirrors[k - 1]
    }
}

/// Knobs of the fetch loop.
struct FetchSettings {
    var transfer = TransferOptions()
    var connections = 8
    /// Start with a few connections and add more while throughput rises, up to `connections`.
    var autoConnections = false
    /// Start with this many of `connections` and borrow the others from `lender` while it has spare
    /// ones (a batch's last files; see `ConnectionLender`). Nil: all `connections` from the start.
    var initialConnections: Int?
    var lender: ConnectionLender?
    /// Take what `lender` has spare, up to `connections`, when the fetch starts, as loans from the
    /// first request on (a daemon's task: its budget is lent whole while no other task needs it),
    /// rather than one a pass once a rate shows stealing is worth it (a batch's last files). A lone
    /// daemon task that started on its 3 own connections and borrowed 5 later took 1.4 times the
    /// command line's time through WAN link a: the loans cut the 3 long runs, and the bytes in flight
    /// past each cut were sent for nothing (96 MB for a 67 MB file).
    var borrowAtStart = false
    /// A daemon task's own share, lowered while it runs (see `ConnectionShare`).
    var ownShare: ConnectionShare?

    /// Borrows what `borrowAtStart` takes for a download of `n` connections: how many it got.
    func loansAtStart(of n: Int) -> Int {
        let own = min(n, initialConnections ?? n)
        guard borrowAtStart, let lender, own < n else { return 0 }
        return lender.borrow(upTo: n - own)
    }
    /// This download's slots in its host's budget (see `HostBudget`).
    var hostShare: HostShare?
    /// Caps changeable while the download runs (see `SharedRateLimit`): one shared with other
    /// downloads (the daemon's overall limit), and one of this download's own (a daemon task's
    /// `max-download-limit`). Every one must allow a byte before it is received.
    var speedLimits: [SharedRateLimit] = []
    var retries = 5
    var retryWait = 1.0
    /// The name a connect timeout is set by where this download was asked for, for its messages: the
    /// command line's flag, or a daemon task's option.
    var connectTimeoutName = "--connect-timeout"
    /// `--timeout`: the loop ends there, and a retry that would wait past it fails at once.
    var deadline: Deadline?
    var maxRetryWait = RetryPolicy.defaultMaxWait
    var maxSpeed: Int64?
    var redialSlow = true
    var maxRedialsPerConnection = 3
    var endGame = true
    var checkpointInterval = 5.0
    /// Hand out work in file order, in runs of at most this many chunks (while hashing in order).
    var maxRunChunks: Int?
    var progressInterval = 0.25
    /// How the per-connection buffers reach the file (see `StagedWriter`).
    var writePath = WritePath.adaptive
    /// How long the probe's first answer took (`ProbeResult.firstAnswerSeconds`).
    var probeFirstAnswer: Double?
    /// Other downloads of the run held slots of the host as the fetch began (`Coordinator.Config`).
    var contendedHost = false
    /// What the probe (and the connections warmed beside it) cost the server, for the fetch's last
    /// trace line and result (`RequestTally`).
    var probeTally = RequestTally()
    /// The connections warmed beside the probe (`ProbeResult.warmUps`).
    var warmUps: ConnectionWarmUps?
    /// The body bytes the probe brought (`ProbeResult.prefix`): received before the fetch, they
    /// are charged to `maxSpeed` and `sharedSpeed` when it starts.
    var probePrefixBytes = 0
}

/// The resource changed while downloading; the caller restarts from zero.
struct ResourceChanged: Error {
    let reason: String
}

/// The server stopped honouring byte ranges; the caller restarts with one stream from byte 0.
struct RangesIgnored: Error {
    let reason: String
}

extension Coordinator.Config {
    /// The coordinator's knobs for fetching `target` with `settings`.
    init(target: FetchTarget, settings: FetchSettings, initialLoans: Int = 0) {
        self.init()
        self.initialLoans = initialLoans
        ranged = target.ranged
        totalLength = target.totalLength
        url = target.url
        sources = target.sources
        endGame = settings.endGame
        hostShare = settings.hostShare
        redialSlow = settings.redialSlow
        autoConnections = settings.autoConnections
        initialConnections = settings.initialConnections
        maxRedialsPerConnection = settings.maxRedialsPerConnection
        retries = settings.retries
        retryWait = settings.retryWait
        maxRetryWait = settings.maxRetryWait
        deadline = settings.deadline
        stallTimeout = settings.transfer.stallTimeout
        progressInterval = settings.progressInterval
        probeFirstAnswer = settings.probeFirstAnswer
        contendedHost = settings.contendedHost
        speedCapped = settings.maxSpeed != nil || settings.speedLimits.contains { $0.bytesPerSecond != nil }
    }
}

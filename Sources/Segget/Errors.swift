/// Why a download stopped, as a category with a stable process exit code.
///
/// The exit codes are part of the command-line contract and are documented in the README and in
/// `segget --help`; never renumber them.
public enum FailureKind: String, Sendable, CaseIterable {
    /// Bad command line or options (exit 2).
    case usage
    /// Could not connect, TLS failure, timeout, connection dropped beyond the retry budget (exit 3).
    case network
    /// The server answered with an HTTP error status such as 404 or 503 (exit 4).
    case httpStatus
    /// The output could not be written: no space, permission denied, file exists (exit 5).
    case fileSystem
    /// The bytes did not match the expected digest (exit 6).
    case verification
    /// The server's answers were inconsistent or unusable (wrong `Content-Range`, changed file…) (exit 7).
    case protocolViolation
    /// Stopped by Ctrl-C or SIGTERM; the journal was saved and the same command resumes (exit 130).
    case interrupted
    /// A bug or an unexpected condition inside segget (exit 1).
    case internalError

    /// The process exit status for this kind of failure.
    public var exitCode: Int32 {
        switch self {
        case .internalError: 1
        case .usage: 2
        case .network: 3
        case .httpStatus: 4
        case .fileSystem: 5
        case .verification: 6
        case .protocolViolation: 7
        case .interrupted: 130
        }
    }

    /// One line for the exit-code table in `--help` and the README.
    public var summary: String {
        switch self {
        case .internalError: "internal error"
        case .usage: "usage: bad option, URL or argument"
        case .network: "network: connection, TLS, timeout or too many retries"
        case .httpStatus: "HTTP status: the server answered with an error (4xx/5xx)"
        case .fileSystem: "file system: cannot write the output (space, permission, exists)"
        case .verification: "verification: the checksum did not match"
        case .protocolViolation: "protocol: the server's answers were inconsistent"
        case .interrupted: "interrupted: stopped by a signal; run the same command to resume"
        }
    }
}

/// An error a user can meet: a category (with its exit code) and a full-sentence message that says
/// what happened and what to do.
public struct SeggetError: Error, CustomStringConvertible, Sendable, Equatable {
    public let kind: FailureKind
    /// One line, safe to print: text from a server goes in as `ServerText`, and whatever else a
    /// message quotes (a URL after redirects, a path) has its control characters escaped here too
    /// (`DisplayText`), on its way to the terminal, `--json`, the daemon's log and `errorMessage`.
    public let message: String
    /// The HTTP status when `kind == .httpStatus`.
    public let httpStatus: Int?
    /// Seconds the server asked to wait before retrying (`Retry-After`), when it did.
    public let retryAfter: Double?

    public init(_ kind: FailureKind, _ message: String, httpStatus: Int? = nil, retryAfter: Double? = nil) {
        self.kind = kind
        self.message = DisplayText.escaping(message, keepingLineBreaks: false)
        self.httpStatus = httpStatus
        self.retryAfter = retryAfter
    }

    public var description: String { message }
    public var exitCode: Int32 { kind.exitCode }

    /// Whether the same request may get another answer, decided where the failure is classified
    /// (not by reading the message): the probe retries only what may change.
    var retryAdvice = RetryAdvice.mayChange

    /// A 429 or 503 that a host's budget took for the host's limit (`Download.refusedByHost`): a
    /// probe after it waits for a slot of the host, as that limit says, rather than counting it a
    /// failed attempt (see `LoopProbe.priorFailure`).
    var takenForHostLimit = false

    /// A server whose TLS certificate could not be verified: no `--mirror` stands in for it (see
    /// `Download.nextSource`), so that a broken or intercepted TLS link never hands the file to
    /// another server, which may be plain HTTP.
    var untrustedCertificate = false

    /// A `--mirror` standing in for the main URL could not continue the partial download (or the
    /// finished file) an earlier run left, which is kept as it was: the next of the download's URLs may
    /// (see `Download.nextSource`).
    var keptForAnotherSource = false

    /// The failure of a probe made for a download before it ran (a batch's or the daemon's first
    /// look, handed on as `LoopProbe.priorFailure`): what its requests cost and when it began, so that
    /// the download's counts and time include them (a failed first look was left out of both).
    var probeSpent: RequestTally?
    var probeStartedAt: Double?
    /// What a download that failed once its fetch ran had cost the servers: its probe's requests
    /// and those of the attempt that failed.
    var fetchSpent: RequestTally?
    /// What the failed download's requests cost, where known: the fetch's (`fetchSpent`), else its
    /// failed probe's; nil where neither was counted.
    public var spent: RequestTally? { fetchSpent ?? probeSpent }

    /// The file's length as its server announced it, where the failure came after that answer (a disk
    /// too small for it, a digest that did not match, a fetch that failed): a daemon's failed task
    /// keeps it as its `totalLength`, as aria2 does (it said 0).
    public internal(set) var fileLength: Int64?

    /// This failure with the file's length (`fileLength`), unless that was said already.
    func knowing(length: Int64?) -> SeggetError {
        var e = self
        if e.fileLength == nil { e.fileLength = length }
        return e
    }

    /// This failure with what its attempt cost (`fetchSpent`), unless that was said already.
    func costing(_ spent: RequestTally) -> SeggetError {
        var e = self
        if e.fetchSpent == nil { e.fetchSpent = spent }
        return e
    }

    /// That failure, for the mirror `mirror`: `why` it cannot continue `what`, and what else to do.
    static func standInCannot(
        _ mirror: String, _ why: String, continuing what: String, orElse: NextStep = .startOverFromMirror
    ) -> SeggetError {
        var e = SeggetError(.protocolViolation, "the mirror \(URLParts.shown(mirror)), standing in for the main URL, \(why), so it cannot continue \(what). It is kept as it was: \(NextStep.whenMainURLAnswers.cli), or \(orElse.cli).", retryAdvice: .never)
        e.keptForAnotherSource = true
        return e
    }

    /// The output name holds another URL's partial download that nothing shows is the same file
    /// (`OtherURLResume.unproven`): aria2's "file already exists" (its error 13) for a daemon's task.
    public internal(set) var nameHeldByAnotherDownload = false

    /// A redirect loop, or more redirects than allowed: what aria2 reports as "too many redirects"
    /// (its error 23, which the daemon's tasks give).
    public internal(set) var tooManyRedirects = false

    /// What kind of network failure it was, where aria2 numbers it apart from the others (its error 6,
    /// "network problem"), which the daemon's tasks give: nil for the rest.
    public internal(set) var networkCause: NetworkCause?

    /// The host's name did not resolve: aria2's "name resolution failed" (its error 19).
    public var nameNotResolved: Bool { networkCause == .nameNotResolved }

    /// A usage failure that is not about the command line's shape (a client command's GID the daemon
    /// does not know, a call it refused): said without the pointer to `--help`, which cannot help.
    public static func refused(_ message: String) -> SeggetError {
        var e = SeggetError(.usage, message)
        e.pointsToHelp = false
        return e
    }

    /// Whether a usage failure ends with "See 'segget --help'" (see `refused`).
    public internal(set) var pointsToHelp = true

    /// The failure of a walk of redirects that looped or ran past `limit` (exit 7).
    public static func redirects(_ message: String) -> SeggetError {
        var e = SeggetError(.protocolViolation, message, retryAdvice: .never)
        e.tooManyRedirects = true
        return e
    }

    init(_ kind: FailureKind, _ message: String, httpStatus: Int? = nil, retryAfter: Double? = nil, retryAdvice: RetryAdvice) {
        self.init(kind, message, httpStatus: httpStatus, retryAfter: retryAfter)
        self.retryAdvice = retryAdvice
    }
}

/// Network failures that aria2 numbers apart (`SeggetError.networkCause`), each as aria2c 1.36 reports
/// it: measured against a name that does not resolve (19), a port nobody listens on (1, its "unknown
/// error": aria2 gives a refused connection no number of its own) and a server that accepts and never
/// answers (2, its "time out").
public enum NetworkCause: Sendable, Equatable {
    case nameNotResolved
    case couldNotConnect
    case timedOut
}

/// Whether retrying a failed request can help.
enum RetryAdvice: Sendable, Equatable {
    /// A transient failure (a dropped connection, a 503): retry with backoff.
    case mayChange
    /// Probably permanent but cheap to confirm (a host that did not resolve): one quick retry.
    case once
    /// The answer cannot change (a refused redirect, lying framing, a bad certificate): fail now.
    case never
}

/// How one attempt of a download ended: the file is in place, or the download must start again.
enum AttemptOutcome {
    case finished(DownloadResult)
    /// With what the attempt cost (`spent`, the probe's requests included) and the bytes it received
    /// that the next attempt fetches again (all of them for a restart from zero; none for an expired
    /// link, whose next attempt keeps them): the run's result counts every attempt.
    case restart(DownloadRestart, spent: RequestTally = RequestTally(), thrownAway: Int64 = 0)
}

/// What the attempts of a run before its last cost and received, added to the run's result or its
/// failure: `--json`'s `requests` counted the last attempt's only (a file changed mid-download, a
/// mirror standing in, an expired link renewed).
struct EarlierAttempts: Sendable, Equatable {
    private(set) var tally = RequestTally()
    /// Bytes received and thrown away (a restart from zero), counted as received and fetched twice.
    private(set) var received: Int64 = 0

    mutating func add(_ spent: RequestTally, thrownAway: Int64 = 0) {
        var s = spent
        s.refetchedBytes = max(spent.refetchedBytes, thrownAway)
        tally = tally + s
        received += thrownAway
    }

    /// `result`, the last attempt's, as the whole run's.
    func onto(_ result: inout DownloadResult) {
        result.tally = result.tally + tally
        result.receivedBytes += received
    }

    /// `e`, the last attempt's failure, with the whole run's cost.
    func onto(_ e: SeggetError) -> SeggetError {
        guard tally != RequestTally() else { return e }
        var e = e
        e.fetchSpent = (e.spent ?? RequestTally()) + tally
        return e
    }
}

/// Why an attempt asks for another one (what the engine found out about the server mid-download).
enum DownloadRestart: Equatable, Sendable {
    /// The server stopped honouring byte ranges: fetch again over one stream from byte 0.
    case rangesIgnored(reason: String)
    /// The file changed on the server (its validators or length): fetch again from zero.
    case resourceChanged(reason: String)
    /// The link expired mid-download (see ``LinkExpiry``): renew it, prove the new one serves the same
    /// file, and continue from the journal.
    case linkExpired(LinkExpired)
}

/// A link that stopped working in the middle of a download, and what renewing it must match.
struct LinkExpired: Equatable, Sendable {
    /// The URL that expired (the attempt's, before redirects).
    var url: String
    var status: Int
    /// Bytes in the file that the next attempt keeps: the chunks the journal records and the parts of
    /// others the progress slots vouch for.
    var bytesDone: Int64
    /// What the expired link served: the renewed one must serve the same.
    var identity: ObjectIdentity
    /// The file's final name, kept for the renewed link (whose path may name the file otherwise).
    var outputPath: String
    /// Bytes the attempt found in the file when it started (nil when it expired before it fetched
    /// anything: the next attempt finds the same), and received from the network, for the result of
    /// a download that renewed its link.
    var resumedAtStart: Int64?
    var receivedBytes: Int64 = 0
}

/// What the next attempt of a download does, and how many restarts it has had: a value, so that the
/// restart rules are tested without a server.
struct AttemptPlan: Equatable, Sendable {
    /// Ignore any partial download and start from zero.
    var fresh: Bool
    /// Fetch over one stream, without ranges.
    var stream = false
    /// Restarts because the file changed; the third gives up.
    var changeRestarts = 0
    /// The renewed link, once the download's own URL expired; nil for that URL.
    var url: String?
    /// The final name, kept across renewals (nil: from `-o`, or the server's name for the file).
    var outputPath: String?
    /// Continue the partial download or fail; never start over (the attempt after a renewal).
    var mustResume = false
    /// The download's URLs that failed (a Metalink's, or the main URL and `--mirror`s), in the
    /// order they did: the next attempt asks the next of its URLs (`url`), and no attempt uses
    /// these as mirrors (see `Download.nextSource`).
    var failedSources: [String] = []
    /// Set on the plan an attempt hands back when its probe failed, before anything was fetched or
    /// opened: only then does a `--mirror` stand in for the main URL (see `Download.nextSource`).
    var probeFailed = false

    /// The plan for the attempt after the source `failed` failed: the same file from `next`.
    func trying(_ next: String, after failed: String) -> AttemptPlan {
        var plan = self
        plan.url = next
        plan.failedSources.append(failed)
        plan.probeFailed = false
        return plan
    }

    /// The plan for the attempt after a renewal: the new link, the same file, resumed from the journal.
    func renewed(url: String, outputPath: String) -> AttemptPlan {
        var next = self
        next.url = url
        next.outputPath = outputPath
        next.fresh = false
        next.mustResume = true
        return next
    }

    /// How many times a download starts over for a file that changed before it gives up.
    static let maxChangeRestarts = 2

    /// The plan after `restart`, with the notice that tells the user; throws when restarting cannot
    /// help (ranges ignored even by a single stream, a file that keeps changing).
    func next(after restart: DownloadRestart) throws(SeggetError) -> (plan: AttemptPlan, notice: String) {
        var next = self
        next.fresh = true
        next.mustResume = false
        switch restart {
        case .linkExpired:
            throw SeggetError(.internalError, "a link renewal reached the restart rules.")
        case .rangesIgnored(let reason):
            guard !stream else {
                throw SeggetError(.protocolViolation, "the server ignored byte ranges even for a single stream; giving up.")
            }
            next.stream = true
            return (next, "\(reason); starting over with one connection from the start.")
        case .resourceChanged(let reason):
            next.changeRestarts += 1
            if next.changeRestarts > Self.maxChangeRestarts {
                throw SeggetError(.protocolViolation, "the file keeps changing on the server (\(reason)); giving up. Try again later.")
            }
            return (next, "the file changed on the server (\(reason)); starting over from zero.")
        }
    }
}

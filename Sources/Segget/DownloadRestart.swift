/// How one attempt of a download ended: the file is in place, or the download must start again.
enum AttemptOutcome {
    case finished(DownloadResult)
    case restart(DownloadRestart)
}

/// Why an attempt asks for another one (what the engine found out about the server mid-download).
enum DownloadRestart: Equatable, Sendable {
    /// The server stopped honouring byte ranges: fetch again over one stream from byte 0.
    case rangesIgnored(reason: String)
    /// The file changed on the server (its validators or length): fetch again from zero.
    case resourceChanged(reason: String)
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

    /// How many times a download starts over for a file that changed before it gives up.
    static let maxChangeRestarts = 2

    /// The plan after `restart`, with the notice that tells the user; throws when restarting cannot
    /// help (ranges ignored even by a single stream, a file that keeps changing).
    func next(after restart: DownloadRestart) throws(SeggetError) -> (plan: AttemptPlan, notice: String) {
        var next = self
        next.fresh = true
        switch restart {
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

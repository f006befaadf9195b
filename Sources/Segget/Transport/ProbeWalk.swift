import SeggetCurl

/// One probing request, set up and not yet started, with the rules that end it early: where it is
/// held for the fetch (`holdDue`) and where it is cut (`cutDue`). Whoever runs it asks both after
/// every pass of its loop: `MultiHandle.performAlone` for a probe on a thread of its own, the
/// `DownloadLoop` for a probe beside other downloads.
final class ProbeRequest {
    let easy: EasyHandle
    let context: ProbeContext
    /// Asked for the whole file (`bytes=0-`), to be held once the prefix is in.
    let holding: Bool
    private var headAt: Double?

    init(easy: EasyHandle, context: ProbeContext, holding: Bool) {
        self.easy = easy
        self.context = context
        self.holding = holding
    }

    /// Timed from the head, not the first body byte: a server that answers at once and then holds
    /// back the body (a trickle starting at one byte per second) is cut as soon.
    func cutDue() -> Bool {
        guard context.head.isComplete else { return false }
        let now = monotonicSeconds()
        if headAt == nil { headAt = now }
        return now - (context.bodyStartedAt > 0 ? context.bodyStartedAt : headAt!) > Prober.prefixSeconds
    }

    /// True when the transfer is (now) held: paused by the collector at its limit, or here, where a
    /// slow first answer is held where it got rather than cut, for the fetch to continue it.
    func holdDue() -> Bool {
        if context.isHeld { return true }
        guard holding, context.head.status == 206, context.head.contentEncoding == nil, cutDue(),
            (try? easy.pause()) != nil
        else { return false }
        context.isHeld = true
        return true
    }
}

/// The requests of one probe, a step at a time: the URL to ask next, and what each answer means
/// (a redirect to follow under segget's policy, or the probe's result). A probe on a thread of its
/// own (`Prober.probe`) and one run by the `DownloadLoop` walk the same steps.
struct ProbeWalk {
    let prober: Prober
    private let first: URLParts
    /// The URL the next request goes to.
    private(set) var current: String
    private var currentParts: URLParts
    private var visited: Set<String>
    /// The options of the next request (credentials dropped after a redirect to another host).
    private(set) var options: TransferOptions
    private var hops = 0

    init(prober: Prober, url: String) throws(SeggetError) {
        guard let first = URLParts(url) else {
            throw SeggetError(.usage, "'\(URLParts.redactingCredentials(url))' is not an absolute URL; give one such as https://example.com/file.iso.")
        }
        guard first.isHTTPFamily else {
            throw SeggetError(.usage, "the scheme '\(first.scheme)' is not supported; segget downloads http:// and https:// URLs.")
        }
        self.prober = prober
        self.first = first
        current = url
        currentParts = first
        visited = [url]
        options = prober.options
    }

    /// Throws when `--timeout` ran out before the next request.
    func checkDeadline() throws(SeggetError) {
        if let deadline = prober.deadline, deadline.remaining(now: monotonicSeconds()) <= 0 {
            throw deadline.expired("the first request to \(URLParts.shown(current))")
        }
    }

    /// What the answer to the request for `current` means: the result, or nil when it redirected
    /// (then `current` is the next URL to ask). `held` is the transfer, when it was held.
    mutating func answered(_ ctx: ProbeContext, code: CurlCode, held: HeldTransfer?) throws(SeggetError) -> ProbeResult? {
        let head = ctx.head
        if head.status == 200 || head.status == 206, !(head.status == 206 && head.contentEncoding != nil),
            let problem = head.framingProblem
        {
            // Checked before libcurl's verdict: it rejects some of these itself, as a "weird reply".
            throw Prober.framingError(problem, url: current)
        }
        if code != .ok && !(code == .writeError && head.isComplete) {
            if let deadline = prober.deadline, code == .operationTimedOut, deadline.remaining(now: monotonicSeconds()) < 0.1 {
                throw deadline.expired("the first request to \(URLParts.shown(current))")
            }
            throw Prober.networkError(code, url: current, head: head)
        }
        if (300...399).contains(head.status), head.status != 304 {
            try follow(head)
            return nil
        }
        var result = try prober.interpret(head, finalURL: current, redirects: hops, options: options)
        result.credentialsDropped = currentParts.host != first.host
        if result.acceptsRanges, let last = head.contentRange?.last, ctx.body.count <= last + 1 {
            // Whatever arrived (all of it, or what came before the cut) is the file's beginning.
            result.prefix = ctx.body
        }
        // Handed on only when the answer runs to the file's end: the fetch continues it as the
        // request for everything after the prefix.
        if let held, result.acceptsRanges, held.bringsTheRest, held.offset == Int64(result.prefix.count) {
            result.held = held
        }
        return result
    }

    /// Takes the redirect in `head` (followed as it came; shown only as `ServerText`).
    private mutating func follow(_ head: ResponseHead) throws(SeggetError) {
        guard let location = head.value("location") else {
            throw SeggetError(.protocolViolation, "the server answered \(head.status) without a Location header; there is nothing to follow.", httpStatus: head.status, retryAdvice: .never)
        }
        guard !location.isEmpty else {
            throw SeggetError(.protocolViolation, "the server answered \(head.status) with an empty Location header; there is nothing to follow.", httpStatus: head.status, retryAdvice: .never)
        }
        guard let next = resolveURL(location.unsafeRawValue, against: current) else {
            throw SeggetError(.protocolViolation, "the server redirected (\(head.status)) to '\(URLParts.shown(location))', which is not a valid URL; there is nothing to follow.", httpStatus: head.status, retryAdvice: .never)
        }
        hops += 1
        if hops > prober.options.maxRedirects {
            throw SeggetError(.network, "more than \(prober.options.maxRedirects) redirects; the server may be misconfigured.", retryAdvice: .never)
        }
        if visited.contains(next) {
            throw SeggetError(.network, "redirect loop: \(URLParts.shown(next)) was already visited.", retryAdvice: .never)
        }
        guard let nextParts = URLParts(next), nextParts.isHTTPFamily else {
            throw SeggetError(.protocolViolation, "refusing a redirect to '\(URLParts.shown(next))': only http and https are allowed.", retryAdvice: .never)
        }
        if currentParts.scheme == "https" && nextParts.scheme == "http" && !prober.options.allowInsecureRedirect {
            throw SeggetError(.protocolViolation, "refusing a redirect from https to plain http (\(URLParts.shown(next))); pass --allow-insecure-redirect to follow it.", retryAdvice: .never)
        }
        if nextParts.host != currentParts.host {
            options = options.withoutCredentials()
        }
        visited.insert(next)
        current = next
        currentParts = nextParts
    }
}

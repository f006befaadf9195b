import SeggetCurl
import SeggetSystem

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
    /// The first answer's `Link` and digest fields (see `ProbeResult.links`).
    private var firstLinks: String?
    private var firstDigest: String?
    private var firstReprDigest: String?
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
    mutating func answered(_ ctx: ProbeContext, code given: CurlCode, held: HeldTransfer?) throws(SeggetError) -> ProbeResult? {
        let head = ctx.head
        // libcurl ends a transfer whose connection closed in the middle of the head as a success
        // (`HTTP/1.1 200 OK` and nothing more): no answer, a cut one. Taken as a success, it made an
        // empty file under the final name, exit 0.
        let code = given == .ok && !head.isComplete ? CurlCode.partialFile : given
        if let problem = Self.refusedFraming(head) {
            // Checked before libcurl's verdict: it rejects some of these itself, as a "weird reply".
            throw Prober.framingError(problem, url: current)
        }
        // An error's head is the answer, whatever became of its body (read to its end to keep the
        // connection, `ProbeContext.drainsBody`): a stall or a reset there is not the error to report.
        // Not a proxy's refusal of the tunnel, which the network error says as the proxy's.
        let answeredError = head.isComplete && (400...599).contains(head.status) && !ctx.handshake.tunnelRefused
        if code != .ok && !(code == .writeError && head.isComplete) && !answeredError {
            if let deadline = prober.deadline, code == .operationTimedOut, deadline.remaining(now: monotonicSeconds()) < 0.1 {
                throw deadline.expired("the first request to \(URLParts.shown(current))")
            }
            // A range's answer cut in its body (the connection closed or reset, a stall) told what a
            // probe asks: the file's length and that ranges work. The fetch goes on from the bytes
            // that came, as for any cut range; retried as a probe, every answer cut within the
            // first MiB was fetched again from byte 0 until the retries ran out.
            if !(head.isComplete && head.status == 206 && head.contentRange?.completeLength != nil) {
                throw Prober.networkError(
                    code, url: current, head: head, connected: ctx.handshake.connected, connectTimeout: options.connectTimeout,
                    proxy: options.proxy(for: current), handshake: ctx.handshake, options: options)
            }
        }
        if hops == 0 {
            firstLinks = head.unsafeRawJoinedValue("link")
            firstDigest = head.unsafeRawJoinedValue("digest")
            firstReprDigest = head.unsafeRawJoinedValue("repr-digest")
        }
        if (300...399).contains(head.status), head.status != 304 {
            try follow(head)
            return nil
        }
        var result = try prober.interpret(head, finalURL: current, redirects: hops, options: options)
        result.links = firstLinks.map(LinkHeader.init)
        if result.digest == nil && result.reprDigest == nil {
            // A redirector's digest covers the file its mirrors serve (RFC 6249 section 6).
            result.digest = firstDigest
            result.reprDigest = firstReprDigest
        }
        result.credentialsDropped = currentParts.host != first.host
        if ctx.bodyStartedAt > 0 {
            result.firstAnswerSeconds = max(0, ctx.bodyStartedAt - ctx.sentAt)
        } else if ctx.headAt > 0 {
            result.firstAnswerSeconds = max(0, ctx.headAt - ctx.sentAt)
        }
        if result.acceptsRanges, let last = head.contentRange?.last, ctx.bodyCount <= last + 1 {
            // Whatever arrived (all of it, or what came before the cut) is the file's beginning.
            result.prefix = ctx.body
        } else if code == .ok, head.status == 200, let length = result.totalLength, Int64(ctx.bodyCount) == length {
            // A server that ignores ranges sent the whole file, and all of it came: nothing is left
            // to ask for (`Download.wholeSave`).
            result.prefix = ctx.body
        } else if code == .ok, head.status == 200, head.isChunked, head.contentEncoding == nil, ctx.bodyCount > 0 {
            // A whole chunked answer, to its last chunk: the file, of the length it turned out to
            // have. Only a probe that keeps such a body gets here complete (`ProbeContext.holdsWholeAnswer`;
            // any other cuts it at its first bytes).
            result.totalLength = Int64(ctx.bodyCount)
            result.prefix = ctx.body
        }
        // Handed on only when the answer runs to the file's end, or to the end of the range a probe
        // held at its head asked for: the fetch continues it as a request for what follows the prefix.
        if let held, result.acceptsRanges, held.bringsTheRest, held.offset == Int64(result.prefix.count) {
            result.held = held
        } else if let held, !result.acceptsRanges, head.status == 200, head.contentEncoding == nil,
            held.offset == Int64(ctx.bodyCount), held.bringsMore
        {
            // The whole file's answer (ranges ignored, or not offered), held after its first bytes:
            // the fetch's one stream continues it from there (`FetchEngine.continueProbe`).
            result.prefix = ctx.body
            result.held = held
        }
        return result
    }

    /// The file name the answer to the request for `current` gives (what `answered` would give
    /// as the result's `suggestedFileName`, sanitised as `RemoteFileInfo` has it), as soon as its
    /// head is complete: nil before, and for a head that is not a file's (a redirect, an error, a
    /// framing the answer fails for).
    func fileName(answeredIn ctx: ProbeContext) -> String? {
        let head = ctx.head
        guard head.isComplete, head.status == 200 || head.status == 206, Self.refusedFraming(head) == nil,
            let result = try? prober.interpret(head, finalURL: current, redirects: hops, options: options)
        else { return nil }
        return FileName.sanitize(result.suggestedFileName)
    }

    /// The framing fault for which a file's answer (a 200 or a 206, but a 206 with a content coding,
    /// which is refused for that) is refused, if it has one.
    private static func refusedFraming(_ head: ResponseHead) -> FramingProblem? {
        guard head.status == 200 || head.status == 206, !(head.status == 206 && head.contentEncoding != nil) else { return nil }
        return head.framingProblem
    }

    /// Takes the redirect in `head` (followed as it came; shown only as `ServerText`).
    private mutating func follow(_ head: ResponseHead) throws(SeggetError) {
        guard let location = head.value("location") else {
            throw SeggetError(.protocolViolation, "the server answered \(head.status) without a Location header; there is nothing to follow.", httpStatus: head.status, retryAdvice: .never)
        }
        guard !location.isEmpty else {
            throw SeggetError(.protocolViolation, "the server answered \(head.status) with an empty Location header; there is nothing to follow.", httpStatus: head.status, retryAdvice: .never)
        }
        guard let next = head.unsafeRawBytes("location").flatMap({ resolveURL(bytes: $0, against: current) }) else {
            throw SeggetError(.protocolViolation, "the server redirected (\(head.status)) to '\(URLParts.shown(location))', which is not a valid URL; there is nothing to follow.", httpStatus: head.status, retryAdvice: .never)
        }
        hops += 1
        // The server's answers, not the network: a protocol failure (exit 7), as every other redirect
        // refused here (it was exit 3, "network", before).
        if hops > prober.options.maxRedirects {
            throw SeggetError.redirects("more than \(prober.options.maxRedirects) redirects; the server may be misconfigured.")
        }
        if visited.contains(next) {
            throw SeggetError.redirects("redirect loop: \(URLParts.shown(next)) was already visited.")
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

import Glibc
import SeggetCurl
import SeggetSystem

/// What one probing request learnt about the remote file.
public struct ProbeResult: Sendable, Equatable {
    /// The URL after redirects; ranged requests go here.
    public var finalURL: String
    /// Total length, or nil when the server does not say (chunked or close-delimited body).
    public var totalLength: Int64?
    /// True when a `Range: bytes=0-0` request came back as a well-formed 206.
    public var acceptsRanges: Bool
    public var etag: String?
    public var lastModified: String?
    /// A sanitised file name from `Content-Disposition`, else from the final URL's path.
    public var suggestedFileName: String
    /// True when `suggestedFileName` is the server's, from `Content-Disposition`: a name that may
    /// differ from one answer to the next (see `PartialDownload.adoptRenamed`).
    public var nameFromDisposition = false
    /// Raw digest headers, for the verifier.
    public var reprDigest: String?
    public var digest: String?
    public var contentMD5: String?
    public var redirects: Int
    /// Why ranges cannot be used, when they cannot.
    public var noRangesReason: String?
    /// True when a redirect led to another host, so credentials must not be sent to the final URL.
    public var credentialsDropped = false
    /// The answer came over HTTP/2 (its status line as libcurl hands it on: `HTTP/2 206`).
    public var overHTTP2 = false
    /// The first bytes of the file, when the probe asked for more than one byte and the server sent
    /// them in a 206 starting at 0: a download writes them instead of asking again, and a file no
    /// longer than this needs no other request.
    var prefix: ProbeBytes = []
    /// The probe's transfer, still open after `prefix`, when the prober was asked to hold it (see
    /// `HeldTransfer`): the fetch continues it instead of asking for the rest again.
    var held: HeldTransfer?
    /// The side files found absent just before the probe (see `Download.probeBytes`), so that
    /// saving the file need not look again.
    var absent = AbsentSideFiles()
    /// How long the last request of the probe took from its start (connection and TLS handshake
    /// included) to its first body byte; nil when no body came.
    var firstAnswerSeconds: Double?
    /// The connections warmed beside the probe (see `ConnectionWarmUp`), when it warmed any.
    var warmUps: ConnectionWarmUps?
    /// What the probe cost the server (its requests, redirects and retries; see `RequestTally`).
    var tally = RequestTally()
    /// The `Link` fields of the first answer (a redirector's, before any redirect), for Metalink/HTTP
    /// (RFC 6249); those of the answers after a redirect are a mirror's, which RFC 6249 says to ignore.
    var links: LinkHeader?
    /// `tally` and the connections warmed beside the probe (`WarmUpOutcome.spent`).
    var spent: RequestTally {
        guard let outcome = warmUps?.outcome else { return tally }
        return tally + outcome.spent
    }

    /// When the answer was made (Unix seconds): its `Date`, else the local clock when it came.
    public var answeredAt: Int64?

    /// The validator sent as `If-Range`: a strong ETag, else a `Last-Modified` that is a strong
    /// validator (RFC 9110 §13.1.5, §8.8.2.2), one the answer's `Date` shows to be 60 s old or more;
    /// else none, and each answer's own validators are what catch a changed file
    /// (`ResponseVerdict`). RFC 9110 needs 1 s; Apache 2.4 honours a date only 60 s after it (RFC
    /// 2616's rule) and answers every range with the whole file before that: a file modified in the
    /// last minute, its `ETag` weak (Apache's, for the first second), was fetched over one connection
    /// and could not be streamed with `-o -` at all.
    public var ifRangeValidator: String? {
        if let e = etag, !e.hasPrefix("W/") { return e }
        guard let date = lastModified, let modified = parseIMFFixdate(Substring(date)), let at = answeredAt,
            at - modified >= Self.strongDateAge
        else { return nil }
        return date
    }

    /// How old a `Last-Modified` must be for `If-Range`, in seconds (see `ifRangeValidator`).
    static let strongDateAge: Int64 = 60
}

/// Sends the probing request and follows redirects under segget's policy: http and https only, at
/// most `maxRedirects` hops, no loops, no https→http downgrade unless allowed, and credentials
/// (userinfo, `Authorization`, `Cookie`) never sent to a host other than the one they were given for.
struct Prober {
    let options: TransferOptions
    /// How many bytes the probe asks for: 1 to learn about the file, more to start downloading it.
    var firstBytes = 1
    /// The most time the body of a probe asking for more than a byte may take once it started (or,
    /// if no body byte came, once the head arrived); a slower one is cut there and what arrived is kept, so that a server slow on its first answer
    /// delays the other connections by no more than this.
    static let prefixSeconds = 0.25
    /// How long the body may take before the probe is cut: `prefixSeconds`, or for a probe of a
    /// batch's file that shares its connection with hundreds of others (`DownloadOptions.probeLimit`,
    /// whose body comes at their pace and delays no connection of its own) `sharedPrefixSeconds`.
    var cutAfter = Self.prefixSeconds
    static let sharedPrefixSeconds = 5.0
    /// Run the request on this multi handle, so that its connection stays in that handle's cache for
    /// the transfers that follow; nil runs it on its own.
    var multi: MultiHandle? = nil
    /// The end of `--timeout`: every request of the probe (redirects included) must end by then.
    var deadline: Deadline? = nil
    /// Ask for the whole file (`bytes=0-`), keep the first `firstBytes`, and hold the transfer open
    /// for the fetch (`ProbeResult.held`) rather than end it: for a download of one connection, which
    /// then makes one request in all. Needs `multi`.
    var holdsTransfer = false
    /// With `holdsTransfer`: hold the transfer as soon as its head shows a file larger than
    /// `firstBytes` (a 206 from byte 0 to the end), instead of after `firstBytes` or `prefixSeconds`.
    /// For a download of several connections: the others start one round trip after the first
    /// answer, while the first keeps its warm connection, rather than after a cut that closes it.
    var holdsAtHead = false
    /// Hold a 200 (the whole file) after its first bytes even where `holdsTransfer` is off: for a
    /// stream (`-o -`), whose probe asks for one byte and whose one stream without ranges continues
    /// the answer (see `ProbeContext.holdsWholeAnswer`). Needs `multi`.
    var holdsWholeAnswer = false
    // The probe of several connections asks for the whole file (`bytes=0-`), as one connection's does.
    // It asked for the first 16 MiB from 4eef4b5 to issue 37: the first connection's range then ended
    // inside that answer or continued on the same warm connection, never cut (on WAN link b a cut
    // closed a connection that seven others' bottleneck made slow to replace). But on an origin that
    // thinks before each head (an object store, an application server), the 16 MiB cost a second
    // request and a second think time for a file that one answer brings whole; and on one that works
    // on a request at a time, that second request waited behind every other connection's. Now
    // connection 0 goes on past its range into work nobody has started (`Scheduler.extend`): on such
    // an origin its one answer brings the whole file.

    /// Over TLS a probe held at its head asks for no more than this (a whole small answer, not held:
    /// the first connection asks for its range next, on the same warm connection). A TLS server
    /// such as nginx (`ssl_buffer_size 16k`) sends the head in one 16 KiB record with the body's
    /// first bytes; on a fresh connection that record, with the session tickets, is more than the
    /// initial congestion window of 10 segments, so its tail, and with it the head, comes one round
    /// trip later, and the other connections start one round trip later. An answer of 8 KiB comes
    /// in the first window. On link c of `scripts/bench wan` (40 ms): the head after 0.205 s rather
    /// than 0.160 s.
    static let tlsFirstAnswerBytes = 8 << 10

    /// Over TLS, ask for `tlsFirstAnswerBytes` rather than hold at the head: for a download whose
    /// other connections are its own and start together on the probe's answer (`ConnectionWarmUp`'s).
    /// Where other downloads share the host, the small answer only costs a second request.
    var smallFirstAnswerOverTLS = true

    /// Whether a request for `url` is held at its head: `holdsAtHead`, but not over TLS (see
    /// `tlsFirstAnswerBytes`) unless HTTP/2 is offered or `smallFirstAnswerOverTLS` is off. HTTP/2
    /// sends the head in a HEADERS frame of its own, in the first round trip whatever the range
    /// (nginx through WAN link a: 0.247 s for `bytes=0-` as for `bytes=0-8191`, 0.331 s over
    /// HTTP/1.1), where the small answer would only cost a file of up to 1 MiB a second request. A
    /// server that answers `--http2` over HTTP/1.1 sends a large file's head a round trip late.
    func holdsAtHead(url: String) -> Bool {
        holdsAtHead && (options.http2 || !smallFirstAnswerOverTLS || URLParts(url)?.scheme.lowercased() != "https")
    }

    func probe(url: String) throws(SeggetError) -> ProbeResult {
        var walk = try ProbeWalk(prober: self, url: url)
        while true {
            try walk.checkDeadline()
            // A held transfer not handed on below ends when `held` goes away (see `HeldTransfer`).
            let (ctx, code, held): (ProbeContext, CurlCode, HeldTransfer?)
            do throws(CurlError) {
                (ctx, code, held) = try request(walk.current, options: walk.options)
            } catch {
                throw SeggetError(error)
            }
            if let result = try walk.answered(ctx, code: code, held: held) { return result }
        }
    }

    /// One request with `Range: bytes=0-(firstBytes-1)` (or `bytes=0-`, held: see `holdsTransfer`),
    /// performed to completion, until the head shows that the body is not worth reading, or until it
    /// is held; a held transfer is returned, still on `multi`.
    private func request(_ url: String, options: TransferOptions) throws(CurlError) -> (ProbeContext, CurlCode, HeldTransfer?) {
        let r = try makeRequest(url, options: options, holding: holdsTransfer && multi != nil)
        let code = try withExtendedLifetime(r) { () throws(CurlError) -> CurlCode? in
            guard let multi else {
                r.context.drainsErrors = false
                return r.easy.perform()
            }
            return try multi.performAlone(r.easy, hold: r.holdDue, cut: r.cutDue)
        }
        if let code { r.context.handshake = HandshakeOutcome(after: code, of: r.easy, url: url, proxy: options.proxy(for: url)) }
        // Held: the head is complete and the transfer waits in `multi` (see `probe(url:)`).
        guard code == nil, let multi else { return (r.context, code ?? .writeError, nil) }
        return (r.context, .writeError, HeldTransfer(easy: r.easy, multi: multi, context: r.context))
    }

    /// The request for `url`, set up and not started (see `ProbeRequest`).
    func makeRequest(_ url: String, options: TransferOptions, holding fetchContinues: Bool) throws(CurlError) -> ProbeRequest {
        // Held at the head, except over TLS, where a small whole answer comes sooner.
        let tlsSmall = fetchContinues && holdsAtHead && !holdsAtHead(url: url)
        let holding = fetchContinues && !tlsSmall
        // Whatever the range asked, a 200 is the whole file: held for the fetch wherever it can be.
        let ctx = ProbeContext(
            limit: tlsSmall ? min(max(1, firstBytes), Self.tlsFirstAnswerBytes) : max(1, firstBytes), holdsAtLimit: holding,
            holdsWholeAnswer: fetchContinues || (holdsWholeAnswer && multi != nil))
        let e = EasyHandle()
        try e.configure(url: url, options: options)
        try e.setRange(!holding ? "0-\(ctx.limit - 1)" : "0-")
        if let deadline {
            // The whole request, a server that never answers included, ends at the deadline.
            let ms = max(1, Int((deadline.remaining(now: monotonicSeconds()) * 1000).rounded(.up)))
            try e.setTimeout(milliseconds: ms)
            try e.setConnectTimeout(milliseconds: min(ms, Int(options.connectTimeout * 1000)))
        }
        e.delegate = ctx
        ctx.sentAt = monotonicSeconds()
        return ProbeRequest(easy: e, context: ctx, holding: holding, holdsAtHead: holdsAtHead, cutAfter: cutAfter)
    }

    func interpret(_ head: ResponseHead, finalURL: String, redirects: Int, options: TransferOptions) throws(SeggetError) -> ProbeResult {
        var result = ProbeResult(
            finalURL: finalURL, totalLength: nil, acceptsRanges: false, etag: head.unsafeRawValue("etag"),
            lastModified: head.unsafeRawValue("last-modified"), suggestedFileName: FileName.fromURLPath(finalURL),
            reprDigest: head.unsafeRawJoinedValue("repr-digest"), digest: head.unsafeRawJoinedValue("digest"),
            // Content-MD5 covers the body of this response: on a 206 that is a range, not the file.
            contentMD5: head.status == 200 ? head.unsafeRawValue("content-md5") : nil, redirects: redirects, noRangesReason: nil)
        result.overHTTP2 = head.httpVersion == "HTTP/2"
        result.answeredAt = head.unsafeRawValue("date").flatMap { parseIMFFixdate(Substring($0)) } ?? Int64(time(nil))
        if let cd = head.unsafeRawValue("content-disposition"), let name = ContentDisposition.fileName(from: cd) {
            result.suggestedFileName = FileName.sanitize(name)
            result.nameFromDisposition = true
        }
        switch head.status {
        case 206 where head.isMultipartByteRanges:
            result.noRangesReason = "the server answered a single byte range with a multipart/byteranges body"
        case 206:
            // Asked for `bytes=0-` (a held probe), any first part of the file is an honest answer.
            guard let cr = head.contentRange, cr.first == 0, let last = cr.last,
                holdsTransfer || last < Int64(max(1, firstBytes)), let total = cr.completeLength, last < total
            else {
                result.totalLength = nil
                result.noRangesReason = "the server's answer to a range request had an unusable Content-Range (\(head.value("content-range") ?? "none"))"
                return result
            }
            result.totalLength = total
            if let enc = head.contentEncoding {
                result.noRangesReason = "the server applies Content-Encoding '\(enc)' to ranges"
            } else {
                result.acceptsRanges = true
            }
        case 200:
            result.totalLength = head.isChunked ? nil : head.contentLength
            // An empty file has no byte range to give: its 200 is the right answer, not a refusal.
            if result.totalLength != 0 { result.noRangesReason = "the server ignored the byte range (answered 200)" }
        case 416:
            // `bytes=0-0` is unsatisfiable only for an empty representation.
            if let cr = head.contentRange, cr.completeLength == 0 {
                result.totalLength = 0
                result.acceptsRanges = true
            } else {
                // A server that refuses even the first byte cannot do ranges; a plain GET may still work.
                result.totalLength = nil
                result.noRangesReason = "the server refused a request for the first byte (416)"
            }
        default:
            // Credentials went to this server only where it is the URL's own (none follow a redirect to another host).
            let sentCredentials = redirects == 0 && (options.credentials != nil || URLParts.redactingCredentials(finalURL) != finalURL)
            let e = Self.statusError(
                head.status, url: finalURL, proxy: ProxyRoute.answeringProxy(for: finalURL, proxy: options.proxy(for: finalURL)),
                sentCredentials: sentCredentials)
            // A refusal's wait, `Retry-After` or the `RateLimit` reset, as the fetch keeps it (a lone
            // probe refused with only the reset was retried after 1.0 and 1.8 s of a 3 s one).
            throw SeggetError(e.kind, e.message, httpStatus: e.httpStatus, retryAfter: head.retryAfter ?? head.refusalWait)
        }
        return result
    }

    /// `proxy`: an HTTP proxy that carried the plain-http request (`ProxyRoute.answeringProxy`), which
    /// may have given the answer itself (a 502 when it could not reach the server), so it is named.
    /// `sentCredentials`: the request carried `-u`'s or the URL's user and password, so a 401 refused
    /// them (before, it asked for them as if none had been given).
    static func statusError(_ status: Int, url: String, proxy: String? = nil, sentCredentials: Bool = false) -> SeggetError {
        let u = URLParts.shown(url)
        if let proxy {
            let p = URLParts.shown(proxy)
            let hint = (500...599).contains(status)
                ? "the server, or the proxy on its way to it, failed; try again later, or without the proxy"
                : status == 407 ? Self.proxyCredentialsAdvice(proxy)
                : "check the URL, and whether the proxy may fetch it"
            return SeggetError(.httpStatus, "\(u) answered HTTP \(status) through the proxy \(p), which may have given that answer itself; \(hint).", httpStatus: status)
        }
        let hint: String
        switch status {
        case 401 where sentCredentials: hint = "the user name and password given were refused; \(NextStep.checkCredentials.cli)"
        case 401: hint = NextStep.giveCredentials.cli
        case 403: hint = "access is forbidden; check the URL and any credentials or cookies"
        case 404, 410: hint = "check the URL"
        case 400 where Self.plainHTTPToAnotherPort(url):
            // nginx answers plain HTTP at a TLS port with a 400 ("The plain HTTP request was sent to
            // HTTPS port"), which said no more than "refused" (exploratory run 9).
            hint = "the server refused the request; if that port serves HTTPS, use https:// (nginx, for one, answers plain HTTP at a TLS port with 400)"
        case 407: hint = "a proxy on the way wants credentials; \(Self.proxyCredentials)"
        case 429: hint = "the server is rate-limiting; try again later"
        case 500...599: hint = "the server failed; try again later"
        // Not refusals: answers that carry no file (a 204 was "the server refused the request").
        // A first request's redirects are followed before this (one without a Location is said
        // there); a 3xx here answered a request for a range, which segget does not follow.
        case 202: hint = "the server accepted the request but has no file to send yet; try again later"
        case 204, 205: hint = "the server has no content at this URL; check the URL"
        case 304: hint = "'not modified' where the file's bytes were asked for; try again later, or another URL"
        case 100...299: hint = "an answer that is not the file; try again later, or another URL"
        case 300...399: hint = "a redirect where the file's bytes were asked for (segget follows redirects on a download's first request only); try again later, or give the URL it leads to"
        default: hint = "the server refused the request"
        }
        return SeggetError(.httpStatus, "\(u) answered HTTP \(status); \(hint).", httpStatus: status)
    }

    /// An http:// URL with a port of its own other than 80, where an HTTPS server may listen.
    static func plainHTTPToAnotherPort(_ url: String) -> Bool {
        guard let a = URLAuthority(url), a.scheme.lowercased() == "http" else { return false }
        return !a.port.isEmpty && a.port != "80"
    }

    /// A response whose framing cannot be trusted (see `FramingProblem`); retrying cannot help.
    static func framingError(_ problem: FramingProblem, url: String) -> SeggetError {
        SeggetError(
            .protocolViolation,
            "the answer from \(URLParts.shown(url)) cannot be trusted: \(problem). segget refuses such a response rather than guess which bytes it holds; the server, or a proxy in between, is broken. Try another server.",
            retryAdvice: .never)
    }

    /// True when libcurl gave up on a response head too large to accept: one line over its limit
    /// (`CURLE_OUT_OF_MEMORY` before 8.6), all lines together over its limit (a receive error after
    /// some 300 KiB of head), or `CURLE_TOO_LARGE` (100) from 8.6 on.
    static func headersTooLarge(_ code: CurlCode, head: ResponseHead) -> Bool {
        guard !head.isComplete else { return false }
        switch code {
        case .outOfMemory, .tooLarge: return true
        case .receiveError: return head.byteCount >= 200 * 1024
        default: return false
        }
    }

    /// `connected`: whether the connection was made (see `HandshakeOutcome.connected`); a timeout before
    /// it is `connectTimeout`'s.
    /// `proxy`: the proxy the request went through (`TransferOptions.proxy(for:)`), named where the
    /// failure is the proxy's.
    /// `peer`: whose TLS failed (`HandshakeOutcome.peer`); `tls`: the files given for it (`--ca-certificate` and `--certificate`, or the proxy's), named where they failed; `verifyResult`: OpenSSL's verdict on its certificate; `tlsAlert`: how it ended the connection.
    static func networkError(
        _ code: CurlCode, url: String, head: ResponseHead = ResponseHead(), connected: Bool = true, connectTimeout: Double? = nil,
        proxy: String? = nil, tls: TLSFiles = TLSFiles(), verifyResult: Int = 0, tlsAlert: TLSAlert? = nil, notTLS: Bool = false, peer: TLSPeer = .server,
        proxyDetail: String? = nil, tunnelStatus: Int = 0
    ) -> SeggetError {
        let u = URLParts.shown(url)
        if let tlsAlert { return tlsAlertError(url: u, tls: tls, alert: tlsAlert, peer: peer) }
        if notTLS { return notTLSError(url: u, peer: peer) }
        if let proxy, let e = proxyError(code, url: url, proxy: proxy, head: head, connected: connected, peer: peer, detail: proxyDetail, tunnelStatus: tunnelStatus) { return e }
        if code == .writeError, head.status == 101, !head.isComplete {
            // libcurl takes a 101 as the switch it announces and hands what follows over as the body,
            // which no head came for: its "Failed writing received data" said nothing of the cause.
            return SeggetError(
                .protocolViolation,
                "the server switched protocols (101 Switching Protocols) for \(u), though segget asked for no upgrade, so its answer cannot be read as HTTP; the server, or a proxy in between, is broken.",
                retryAdvice: .once)
        }
        if headersTooLarge(code, head: head) {
            return SeggetError(.protocolViolation, "the server's response headers are too large to accept (more than libcurl allows) for \(u); the server is misbehaving.", retryAdvice: .never)
        }
        switch code {
        case .urlMalformed where URLAuthority.atSignsBeforeHost(url) > 1:
            return SeggetError(.usage, "'\(u)' is not a valid URL: its user name or password holds an @; \(ProxyRoute.percentEncodeAdvice).")
        case .urlMalformed:
            return SeggetError(.usage, "'\(u)' is not a valid URL.")
        case .unsupportedProtocol where URLParts(url)?.isHTTPFamily == true:
            // libcurl's code for an answer that does not start with an HTTP status line (it will not
            // read HTTP/0.9): the server's fault, or a stray byte an earlier answer left on the
            // connection, not the user's URL (before: exit 2, "uses a scheme segget does not download").
            return SeggetError(.protocolViolation, "the answer from \(u) does not start as HTTP does; the server, or a proxy in between, is broken.", retryAdvice: .once)
        case .unsupportedProtocol:
            return SeggetError(.usage, "'\(u)' uses a scheme segget does not download; use http:// or https://.")
        case .peerFailedVerification, .caCertBadFile, .clientCertificateProblem:
            return certificateError(code, url: u, tls: tls, verifyResult: verifyResult, peer: peer)
        case .couldNotResolveHost:
            return caused(SeggetError(.network, "could not resolve the host of \(u); check the URL and your network.", retryAdvice: .once), code)
        case .weirdServerReply:
            // libcurl refuses a malformed head (an invalid or folded Content-Length, a bad status line).
            return SeggetError(.protocolViolation, "the answer from \(u) is not valid HTTP (\(code)); the server, or a proxy in between, is broken.", retryAdvice: .never)
        case .couldNotConnect:
            return caused(SeggetError(.network, "could not connect to \(u); check that the server is up and reachable."), code)
        case .operationTimedOut where !connected && head.byteCount == 0:
            let within = connectTimeout.map { " within \(Format.seconds($0))" } ?? ""
            return caused(SeggetError(.network, "could not connect to \(u)\(within)\(NextStep.allowLongerToConnect.cli)"), code)
        case .operationTimedOut:
            return caused(SeggetError(.network, "\(u) timed out; the network or server is too slow or unreachable."), code)
        default:
            let advice = code.isTransient ? "; check the network, or try again later" : ""
            return SeggetError(.network, "the request to \(u) failed: \(code.plainWords ?? code.description)\(advice).", retryAdvice: code.isTransient ? .mayChange : .never)
        }
    }
}

/// Side file paths that were looked for just before a probe and found absent: the journal (looked
/// up, or answered by a batch's `StartingNames`), and the part file where `StartingNames` answered.
struct AbsentSideFiles: Sendable, Equatable {
    var journal: String?
    var part: String?
}

/// Everything the connection needs to write one response; built without I/O by `ResponsePlanner`.
struct ResponsePlan {
    enum Body {
        case empty
        case text([UInt8])
        /// `count` bytes of `representation` from `offset`; bytes past its end are sent as zeros
        /// (only the `long` mode asks for those).
        case slice(Representation, offset: Int64, count: Int64)

        var count: Int64 {
            switch self {
            case .empty: return 0
            case .text(let bytes): return Int64(bytes.count)
            case .slice(_, _, let count): return count
            }
        }
    }

    enum Framing {
        case contentLength(Int64)
        case chunked
        /// No length: the body ends when the connection closes.
        case untilClose
    }

    enum Cutoff {
        /// Close the connection after this many body bytes.
        case close(after: Int64)
        /// Stop sending after this many body bytes and hold the connection until the server stops.
        case stall(after: Int64)
    }

    var status: Int
    var headers: [(String, String)]
    var body: Body
    var framing: Framing
    var cutoff: Cutoff?
    var closeConnection = false
    /// Leave the `Content-Length` / `Transfer-Encoding` line to `headers` (the framing modes lie there).
    var omitFramingHeader = false
    /// Read the request and never answer (the `silent` mode).
    var silent = false
    /// The status line's reason phrase; nil for the usual one (`reason=`).
    var reason: String?
    /// With chunked framing: text after each chunk size (`;name=value`, a chunk extension), nil: none.
    var chunkExtension: String?

    init(status: Int, headers: [(String, String)] = [], body: Body = .empty, framing: Framing? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.framing = framing ?? .contentLength(body.count)
    }

    static func text(_ status: Int, _ message: String, headers: [(String, String)] = []) -> ResponsePlan {
        ResponsePlan(
            status: status, headers: headers + [("Content-Type", "text/plain; charset=utf-8")],
            body: .text(Array(message.utf8)))
    }
}

/// Turns a request and its route into a `ResponsePlan`: the whole behaviour of every mode lives here.
struct ResponsePlanner {
    /// `http://HOST:PORT`, for absolute `Location` headers.
    var baseURL: String
    /// Unix seconds, for the `expiring` mode's signed URLs and the `fresh` mode's validators.
    var now: Int64 = 0
    /// When the server started, in Unix seconds: the `fresh` mode's file time.
    var startedUnix: Int64 = 0

    /// - Parameters:
    ///   - requestNumber: 1-based count of requests for this exact target, for `times`/`after` params.
    ///   - changed: the `changing` mode's second version, for a given length.
    func plan(
        request: HTTPRequest, route: Route, representation current: Representation, requestNumber: Int,
        changed: (Int64) -> Representation
    ) -> ResponsePlan {
        var plan = modePlan(request: request, route: route, representation: current, requestNumber: requestNumber, changed: changed)
        addServerText(&plan, route: route)
        return plan
    }

    /// The parameters every mode takes for text a hostile server chooses (CR and LF removed, all else
    /// raw): `reason` for the reason phrase, `header=Name:value` for one more header field, and
    /// `body` for the body of an answer that is not the file (an error, a redirect).
    private func addServerText(_ plan: inout ResponsePlan, route: Route) {
        func oneLine(_ s: String) -> String { s.filter { $0 != "\r" && $0 != "\n" && $0 != "\r\n" } }
        if let reason = route.params["reason"] { plan.reason = oneLine(reason) }
        if let field = route.params["header"].map(oneLine), let colon = field.firstIndex(of: ":") {
            plan.headers.append((String(field[..<colon]), String(field[field.index(after: colon)...])))
        }
        if let body = route.params["body"], case .text = plan.body {
            plan.body = .text(Array(body.utf8))
            plan.framing = .contentLength(plan.body.count)
        }
    }

    private func modePlan(
        request: HTTPRequest, route: Route, representation current: Representation, requestNumber: Int,
        changed: (Int64) -> Representation
    ) -> ResponsePlan {
        if let reason = current.brokenReason { return .text(500, reason + "\n") }
        guard request.method == "GET" || request.method == "HEAD" else {
            return .text(405, "only GET and HEAD\n", headers: [("Allow", "GET, HEAD")])
        }
        var representation = current
        let p = route
        let n = Int64(requestNumber)

        switch route.mode {
        case .redirect:
            return redirect(request: request, route: route, number: n)
        case .silent where n >= (p.int("after") ?? 1):
            var plan = ResponsePlan(status: 0)
            plan.silent = true
            return plan
        case .status:
            let from = p.int("from") ?? 1
            let times = p.int("times")
            if n >= from && (times == nil || n < from + (times ?? 0)) {
                let code = Int(p.int("code") ?? 500)
                var headers: [(String, String)] = []
                if let after = p.params["retryafter"] { headers.append(("Retry-After", after)) }
                if p.params["ratelimit"] != nil { headers.append(("RateLimit", "\"default\";r=0;t=\(p.int("reset") ?? 1)")) }
                return .text(code, "\(code) \(HTTPStatus.reason(code))\n", headers: headers)
            }
        case .changing:
            if n > (p.int("after") ?? 1) {
                representation = changed(p.int("newlength") ?? current.length)
            }
        case .fresh:
            // As Apache 2.4 serves a file modified when the server started: the time as its
            // Last-Modified, its ETag weak for the first `weak` seconds.
            let weak = now < startedUnix + (p.int("weak") ?? 1)
            representation = Representation(
                storage: current.storage, length: current.length, etag: weak ? "W/" + current.etag : current.etag,
                lastModified: Representation.httpDate(startedUnix))
        case .expiring:
            if let refusal = SignedURL.refusal(route: p, now: now) { return refusal }
            if p.int("version") == 2 { representation = changed(p.int("newlength") ?? current.length) }
        default:
            break
        }

        var decision = RangeDecision.decide(for: request, representation: representation)
        var advertiseRanges = true
        let hasRange = request.method == "GET" && request.headers["range"] != nil
        switch route.mode {
        case .noranges, .chunked, .closeDelimited:
            decision = .full
            advertiseRanges = false
        case .range200:
            decision = .full
        case .drop where p.flag("noranges"):
            // A server without ranges whose answers are cut.
            decision = .full
            advertiseRanges = false
        case .zeroonly:
            if case .partial(let first, _) = decision, first != 0 { decision = .full }
        case .always416:
            let from = p.int("from") ?? 1
            let times = p.int("times")
            if hasRange && n >= from && (times == nil || n < from + (times ?? 0)) { decision = .unsatisfiable }
        case .mid200:
            if n >= (p.int("after") ?? 2) { decision = .full }
        case .wrongrange:
            if case .partial(let first, let last) = decision, n >= p.int("from") ?? 1 {
                let shift = p.int("shift") ?? 1
                let length = representation.length
                let newFirst = min(max(0, first + shift), length - 1)
                let newLast = min(max(newFirst, last + shift), length - 1)
                decision = .partial(first: newFirst, last: newLast)
            }
        case .capped, .expiring, .fresh:
            // Apache 2.4 (`ap_condition_if_range`): a date in If-Range matches only once the file's
            // time is 60 s old; before, every range is answered with the whole file.
            if route.mode == .fresh, let ifRange = request.headers["if-range"], !ifRange.hasPrefix("\""), now < startedUnix + 60 {
                decision = .full
            }
            // Every capped answer; an expiring or fresh one only when it names a `max`.
            if route.mode == .capped || p.params["max"] != nil, case .partial(let first, let last) = decision {
                let most = p.params["max"].flatMap(URLText.parseRate) ?? 1 << 20
                decision = .partial(first: first, last: min(last, first + most - 1))
            }
        default:
            break
        }

        var plan = standard(representation, decision, advertiseRanges: advertiseRanges)
        let hasBody = plan.status == 200 || plan.status == 206
        let bodyCount = plan.body.count

        switch route.mode {
        case .range200 where plan.status == 200 && p.int("echo") != nil:
            // A 200 with a Content-Range beside the whole file, as a proxy that echoes a probe's
            // small range (`bytes=0-8191` over TLS) would send.
            let n = max(1, min(p.int("echo") ?? 1, representation.length))
            plan.headers.append(("Content-Range", "bytes 0-\(n - 1)/\(representation.length)"))
        case .chunked:
            plan.framing = .chunked
        case .chunked206 where hasBody:
            // Legal HTTP/1.1 (RFC 9112 §6.1, §7.1.1): the 206 as the 200, chunked, no Content-Length.
            plan.framing = .chunked
            if p.flag("ext") { plan.chunkExtension = "seg=\"x\";n=1" }
        case .closeDelimited:
            plan.framing = .untilClose
            plan.closeConnection = true
        case .encoding where plan.status == 206 && n >= (p.int("after") ?? 1):
            plan.headers.append(("Content-Encoding", "gzip"))
            let shrink = max(0, min(bodyCount, p.int("shrink") ?? 0))
            if shrink > 0, case .slice(let rep, let offset, let count) = plan.body {
                plan.body = .slice(rep, offset: offset, count: count - shrink)
                plan.framing = .contentLength(count - shrink)
            }
        case .short where hasBody:
            let missing = p.int("missing") ?? 1
            plan.cutoff = .close(after: max(0, bodyCount - missing))
        case .long where hasBody:
            let extra = max(0, p.int("extra") ?? 1)
            if case .slice(let rep, let offset, let count) = plan.body {
                plan.body = .slice(rep, offset: offset, count: count + extra)
                plan.framing = .contentLength(count + extra)
            }
        case .stall where hasBody:
            plan.cutoff = .stall(after: max(0, p.int("after") ?? 0))
        case .drop where hasBody:
            if let times = p.int("times"), n > times { break }
            plan.cutoff = .close(after: max(0, p.int("after") ?? 0))
        case .digest:
            var digest = p.flag("md5") ? representation.md5 : representation.sha256
            // A wrong digest that is still well-formed: the right one with its first bit flipped.
            if p.flag("wrong") { digest[0] ^= 0x80 }
            if p.flag("md5") {
                plan.headers.append(("Content-MD5", Base64.encode(digest)))
            } else {
                if p.flag("legacy") {
                    plan.headers.append(("Digest", "SHA-256=\(Base64.encode(digest))"))
                } else {
                    plan.headers.append(("Repr-Digest", "sha-256=:\(Base64.encode(digest)):"))
                }
            }
        case .disposition:
            // CR and LF would split the header; everything else goes out raw on purpose.
            // `{n}` becomes the request's number: a name that changes with every answer.
            let value = (p.params["cd"] ?? "attachment").filter { $0 != "\r" && $0 != "\n" && $0 != "\r\n" }
                .replacing("{n}", with: String(n))
            plan.headers.append(("Content-Disposition", value))
        case .dupheader, .badlength, .smuggle, .multipart, .bigheaders:
            misframe(&plan, route: route, representation: representation, requestNumber: n)
        default:
            break
        }
        // `close=1`: every answer closes its connection, as an object store's emulator does.
        if p.flag("close") { plan.closeConnection = true }
        return plan
    }

    private func standard(_ rep: Representation, _ decision: RangeDecision, advertiseRanges: Bool) -> ResponsePlan {
        var headers: [(String, String)] = []
        if advertiseRanges { headers.append(("Accept-Ranges", "bytes")) }
        headers.append(("ETag", rep.etag))
        headers.append(("Last-Modified", rep.lastModified))
        switch decision {
        case .full:
            headers.append(("Content-Type", "application/octet-stream"))
            return ResponsePlan(status: 200, headers: headers, body: .slice(rep, offset: 0, count: rep.length))
        case .partial(let first, let last):
            headers.append(("Content-Type", "application/octet-stream"))
            headers.append(("Content-Range", "bytes \(first)-\(last)/\(rep.length)"))
            return ResponsePlan(
                status: 206, headers: headers, body: .slice(rep, offset: first, count: last - first + 1))
        case .unsatisfiable:
            headers.append(("Content-Range", "bytes */\(rep.length)"))
            return ResponsePlan(status: 416, headers: headers)
        }
    }

    private func redirect(request: HTTPRequest, route: Route, number: Int64) -> ResponsePlan {
        let code = Int(route.int("code") ?? 302)
        let location: String
        if let to = route.params["to"] {
            // `{n}` becomes the request's number: a target that changes with every answer.
            location = to.replacing("{n}", with: String(number))
        } else if route.flag("loop") {
            location = baseURL + request.target
        } else {
            let hops = route.int("hops") ?? 1
            let name = URLText.percentEncodePath(route.name)
            let pairs = request.query.split(separator: "&")
            if hops > 1 {
                let rest = pairs.filter { !$0.hasPrefix("hops=") && $0 != "hops" }
                location = "\(baseURL)/redirect/\(name)?" + (["hops=\(hops - 1)"] + rest.map(String.init)).joined(separator: "&")
            } else {
                // The chain ends at the normal resource, keeping only the pacing parameters.
                let pacing = pairs.filter { pair in
                    Route.pacingParameters.contains(String(pair.prefix { $0 != "=" }))
                }
                location = "\(baseURL)/\(name)" + (pacing.isEmpty ? "" : "?" + pacing.joined(separator: "&"))
            }
        }
        return .text(code, "redirecting to \(location)\n", headers: [("Location", location)])
    }
}

enum HTTPStatus {
    static func reason(_ code: Int) -> String {
        switch code {
        case 200: return "OK"
        case 206: return "Partial Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 410: return "Gone"
        case 416: return "Range Not Satisfiable"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Status \(code)"
        }
    }
}

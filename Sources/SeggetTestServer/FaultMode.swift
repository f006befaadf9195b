/// How the server (mis)behaves for a request, chosen by the first path segment: `/MODE/NAME?params`.
/// `/NAME` is `.normal`. Every mode also takes the pacing parameters and the connection limit below.
///
/// Every mode also takes the text a hostile server chooses, sent raw (percent-decoded, CR and LF
/// removed): `reason=` the status line's reason phrase, `header=Name:value` one more header field, and
/// `body=` the body of an answer that is not the file (an error, a redirect).
///
/// Counters behind `times`, `after`, `slowfirst`, `slowevery` and `slowfraction` are kept per exact
/// request target (path and query), so two tests using different parameters never share them; every
/// request counts, a rejected one (`maxconc`) included.
///
/// Pacing (sizes and rates take k, m, g suffixes, powers of 1024):
///
/// | parameter | effect |
/// |---|---|
/// | `rate=16m` | bytes per second per response (default: unthrottled) |
/// | `catchup=1` | paces like nginx's `limit_rate`: a client that stopped reading gets the arrears at full speed |
/// | `firstbyte=0.5` | seconds every response waits before its head (a slow first byte) |
/// | `workers=1` | at most this many requests are worked on at once (per client and target, or per client with `scope=client`); the others wait in arrival order, and each holds its worker through its `firstbyte` and its body; a request whose client hung up still costs its `firstbyte` when its turn comes (`WorkerQueues`) |
/// | `close=1` | every answer says `Connection: close` and closes its connection |
/// | `acktail=4k` | the head and the body but its last 4 KiB go out as one corked write; the rest waits until the client has acknowledged all of that (at most 1 s), as nginx's answers with `sendfile` and `tcp_nopush` sometimes do on loopback; the wait is recorded (`RecordedRequest.tailWait`) |
///
/// Trickling: a request is *slow* when a selector picks it; its body then drops to `slowrate`.
///
/// | parameter | effect |
/// |---|---|
/// | `slowports=01` | selector: the client port's last decimal digit is one of these |
/// | `slowfirst=N` | selector: the first N requests for the target |
/// | `slowevery=N` | selector: every Nth request (requests N, 2N, …; the first is 1) |
/// | `slowfraction=0.3&seed=7` | selector: a pseudo-random fraction of the requests, fixed by `seed` (default 0) and the request number |
/// | `slowrate=1` | a slow request's rate; `1` trickles one byte a second (never silent long enough for a stall timeout); `0` sends nothing more and holds the connection open (silence) |
/// | `slowafter=256k` | a slow request starts at `rate` and slows only after this many body bytes of its response |
/// | `slowfrom=20m` | a slow request slows from this byte offset *of the file* on (a slow disk region, a slow tail); without any selector every request is slow, so every byte at or past the offset goes at `slowrate` |
/// | `ramp=1m` | the slowdown is gradual: the rate falls linearly from `rate` (100 MiB/s when unthrottled) to `slowrate` over this many bytes |
/// | `slowfirstbyte=5` | seconds a slow request waits before its head (instead of `firstbyte`); works without `slowrate` |
///
/// With both `slowafter` and `slowfrom` a slow request slows at whichever it reaches first.
///
/// Connection limit (`ConcurrencyLimit`): `maxconc=3` admits at most 3 requests for this target from
/// one client address at a time (from the request's arrival until its body is sent or its connection
/// closes); a request beyond that is answered at once with `reject` (429, or 503), carrying
/// `Retry-After: retryafter` when given, and with `ratelimit=1` the IETF draft fields
/// (`RateLimit-Policy: "conc";q=3;qu="concurrent-requests"`, `RateLimit: "conc";r=0;t=reset`) or with
/// `ratelimit=legacy` the older `RateLimit-Limit`/`-Remaining`/`-Reset` triple; admitted responses
/// carry the same fields with the quota that remains. `reset` defaults to `retryafter`, else 1. The
/// counts are `TestServer.concurrency` (and `GET /_stats`). With `scope=client` the limit counts
/// every request of the client address whatever its target (a per-host limit across files).
///
/// | mode | behaviour | parameters (default) |
/// |---|---|---|
/// | normal | ranges, If-Range, keep-alive; a range on an empty resource is 416 `bytes */0` | |
/// | noranges | ignores Range: 200 full, no Accept-Ranges | |
/// | range200 | advertises Accept-Ranges but answers 200 full to ranges; `echo=N` adds `Content-Range: bytes 0-(N-1)/LENGTH` to the 200, as a proxy that echoes a probe's small range would | echo |
/// | chunked | ignores Range, `Transfer-Encoding: chunked` | |
/// | chunked206 | honours ranges, but every answer with a body (206 included) is `Transfer-Encoding: chunked` with no `Content-Length`, as some application servers send; `ext=1` adds a chunk extension to every chunk size line | ext |
/// | close-delimited | ignores Range, no length, body ends at close | |
/// | redirect | `to` → Location (code; each `{n}` in it replaced by the request's number), `hops=N` chain ending at `/NAME`, `loop=1` to itself | code (302), hops (1) |
/// | status | answers `code` with a short body to `times` requests from request number `from`, then normally; `ratelimit=1` adds `RateLimit: "default";r=0;t=reset` | code (500), times (all), from (1), retryafter, ratelimit, reset (1) |
/// | zeroonly | 206 only for ranges starting at 0, else 200 full | |
/// | wrongrange | 206 whose Content-Range and bytes are moved by `shift`, from request number `from` on | shift (1), from (1) |
/// | capped | an honest 206 for at most `max` bytes from the asked start (RFC 9110 allows less) | max (1m) |
/// | short | declares the right length, sends `missing` bytes less, closes | missing (1) |
/// | long | declares the range, Content-Length and body `extra` bytes longer | extra (1) |
/// | mid200 | request number ≥ `after` gets 200 full (the first is honoured) | after (2) |
/// | fresh | as Apache 2.4 serves a file modified just now: `Last-Modified` is the server's start, the `ETag` weak (`W/`) for the first `weak` seconds after it and strong after, and an `If-Range` date never matches in the first 60 s (every range then gets 200 full); `max` caps each 206 as `capped` does | weak (1), max |
/// | changing | requests after the first `after` see a second version (other bytes, ETag, date) | after (1), newlength |
/// | encoding | 206 responses from request number `after` on carry `Content-Encoding: gzip`; `shrink` declares and sends that many bytes less, as a compressed body would | after (1), shrink (0) |
/// | always416 | every ranged GET (from request number `from`, for `times` requests) gets 416 with `Content-Range: bytes */N` | from (1), times (all) |
/// | stall | sends `after` body bytes then nothing, connection held until stop() | after (0) |
/// | drop | closes after `after` body bytes, for the first `times` requests; `noranges=1` ignores ranges (200, no `Accept-Ranges`) | after (0), times (all), noranges |
/// | digest | `Repr-Digest: sha-256=:…:` of the full representation | wrong=1 (flips a bit), md5=1 (`Content-MD5` instead), legacy=1 (`Digest: SHA-256=`) |
/// | disposition | `Content-Disposition` set to the percent-decoded `cd` (CR/LF removed), each `{n}` in it replaced by the request's number | cd (attachment) |
/// | silent | accepts and reads requests from number `after` on, never answers, holds the connection | after (1) |
/// | dupheader | 206 with a second `Content-Range` shifted by `shift` (the body is the shifted range), or with `field=length` a second, larger `Content-Length` | field (range), shift (1) |
/// | badlength | 206 whose `Content-Length` is the raw `value` (e.g. `-1`, `+5`, `1x`) | value (-1) |
/// | smuggle | ambiguous framing on 206: `kind=te-cl` chunked body plus a `Content-Length`; `te-other` `Transfer-Encoding: gzip, chunked`; `fold` obs-folded `Content-Length`; `space` a space before the colon of `Content-Length` | kind (te-cl) |
/// | multipart | requests from number `after` on get a 206 `multipart/byteranges` body with one part | after (1) |
/// | bigheaders | adds a `size`-byte header line, or `lines` 100-byte header lines | size (200000), lines |
/// | expiring | a signed URL, as object stores hand out (see `SignedURL`): `expires` (Unix seconds) and `sig` are checked on every request; from `expires` on, or with a wrong `sig`, the answer is `status` with S3's XML error body (`AccessDenied`, "Request has expired"); `version=2` serves a second object (other bytes, ETag, date; `newlength`); `max` caps each 206 as `capped` does, so that requests keep coming after the expiry. `GET /_sign/NAME?ttl=S` mints such a URL, valid for S seconds, passing every other parameter on | expires, sig, status (403), version (1), newlength, max |
public enum FaultMode: String, CaseIterable, Sendable {
    case normal
    case noranges
    case range200
    case chunked
    case chunked206
    case closeDelimited = "close-delimited"
    case redirect
    case status
    case zeroonly
    case wrongrange
    case capped
    case short
    case long
    case mid200
    case changing
    case fresh
    case encoding
    case always416
    case stall
    case drop
    case digest
    case disposition
    case silent
    case dupheader
    case badlength
    case smuggle
    case multipart
    case bigheaders
    case expiring
}

/// A request resolved to a mode, a resource name and the decoded query parameters.
struct Route {
    var mode: FaultMode
    var name: String
    var params: [String: String]

    func int(_ key: String) -> Int64? { params[key].flatMap { Int64($0) } }
    func flag(_ key: String) -> Bool { params[key].map { $0 == "1" || $0 == "true" || $0 == "yes" } ?? false }

    /// The parameters that shape pacing and the connection limit rather than a mode's behaviour
    /// (a redirect chain carries them to its final hop).
    static let pacingParameters: Set<String> = [
        "rate", "catchup", "firstbyte", "slowports", "slowfirst", "slowevery", "slowfraction", "seed", "slowrate",
        "slowafter", "slowfrom", "ramp", "slowfirstbyte", "maxconc", "reject", "retryafter", "ratelimit", "reset",
        "workers", "close",
    ]

    /// Whether request number `requestNumber` (per target, from 1) from `remotePort` is slow: its
    /// port's last decimal digit is in `slowports`, it is among the first `slowfirst`, a multiple of
    /// `slowevery`, or drawn by `slowfraction`. With no selector at all, `slowfrom` alone makes every
    /// request slow.
    func isSlow(remotePort: Int, requestNumber: Int) -> Bool {
        let ports = params["slowports"]
        let first = int("slowfirst")
        let every = int("slowevery")
        let fraction = params["slowfraction"].flatMap(Double.init)
        if ports == nil && first == nil && every == nil && fraction == nil { return params["slowfrom"] != nil }
        if let ports, ports.contains(Character(String(remotePort % 10))) { return true }
        if let first, requestNumber <= first { return true }
        if let every, every > 0, Int64(requestNumber) % every == 0 { return true }
        if let fraction {
            let seed = UInt64(params["seed"] ?? "") ?? 0
            return SplitMix64.unitValue(seed: seed, index: UInt64(requestNumber)) < fraction
        }
        return false
    }

    /// The pacing for request number `requestNumber` whose body starts at byte `bodyStart` of the
    /// file (nil for a body that is no slice of it). A slow request gets `slowrate` from the first of
    /// `slowafter` (bytes of the response) and `slowfrom` (bytes of the file) it reaches, from its
    /// first byte when neither is given; any other request gets `rate`. A nil rate means unthrottled.
    func pacing(forRemotePort remotePort: Int, requestNumber: Int, bodyStart: Int64?) -> Pacing {
        var pacing = Pacing(rate: params["rate"].flatMap(URLText.parseRate), catchUp: flag("catchup"))
        pacing.firstByteDelay = seconds("firstbyte") ?? 0
        pacing.acknowledgedTail = params["acktail"].flatMap(URLText.parseSize)
        guard isSlow(remotePort: remotePort, requestNumber: requestNumber) else { return pacing }
        if let delay = seconds("slowfirstbyte") { pacing.firstByteDelay = delay }
        let slowRate: Int64?
        if params["slowrate"] == "0" { slowRate = 0 } else { slowRate = params["slowrate"].flatMap(URLText.parseRate) }
        guard let slowRate else { return pacing }
        var starts: [Int64] = []
        if let after = params["slowafter"].flatMap(URLText.parseRate) { starts.append(after) }
        if let from = params["slowfrom"].flatMap(URLText.parseSize) { starts.append(max(0, from - (bodyStart ?? 0))) }
        let ramp = params["ramp"].flatMap(URLText.parseRate) ?? 0
        pacing.slowdown = Slowdown(after: starts.min() ?? 0, rate: slowRate, ramp: ramp)
        // A slow response never makes up for lost time: arrears would undo the trickle.
        pacing.catchUp = false
        return pacing
    }

    /// A parameter in seconds (`0.5`), nil when absent, negative or not a number.
    func seconds(_ key: String) -> Double? {
        params[key].flatMap(Double.init).flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
    }

    /// Resolves `path` against the registered names: an exact name is the normal mode, otherwise the
    /// first segment names the mode. Nil if neither fits.
    static func resolve(path: String, query: String, isRegistered: (String) -> Bool) -> Route? {
        let params = URLText.parseQuery(query)
        let trimmed = String(path.drop { $0 == "/" })
        if isRegistered(trimmed) { return Route(mode: .normal, name: trimmed, params: params) }
        guard let slash = trimmed.firstIndex(of: "/"),
            let mode = FaultMode(rawValue: String(trimmed[..<slash]))
        else { return nil }
        let name = String(trimmed[trimmed.index(after: slash)...])
        guard isRegistered(name) else { return nil }
        return Route(mode: mode, name: name, params: params)
    }
}

/// How fast one response's body goes out: `rate` (nil: unthrottled), then `slowdown` once its
/// `after` body bytes were sent; `catchUp` as nginx does (see `TokenBucket`); `firstByteDelay`
/// seconds of nothing before the head.
struct Pacing {
    var rate: Int64?
    var slowdown: Slowdown?
    var catchUp = false
    var firstByteDelay: Double = 0
    /// Body bytes at the end held back until everything before them is acknowledged (`acktail`).
    var acknowledgedTail: Int64?
}

/// A slow request's slowdown: after `after` body bytes the rate becomes `rate` (0: nothing more is
/// sent and the connection is held open), at once or, with a `ramp`, falling linearly over that
/// many bytes from the rate it had.
struct Slowdown {
    var after: Int64
    var rate: Int64
    var ramp: Int64 = 0

    /// The rate for the body byte `sent` bytes into the response; `start` is the rate before the
    /// slowdown (nil: unthrottled, ramped from 100 MiB/s). 0 means silence.
    func rate(atBody sent: Int64, start: Int64?) -> Int64 {
        let into = sent - after
        guard ramp > 0, into < ramp else { return rate }
        let from = Double(start ?? 100 << 20)
        let value = from + (Double(rate) - from) * Double(into) / Double(ramp)
        return max(1, Int64(value))
    }
}

/// splitmix64: a well-mixed 64-bit value from a seed and an index, for choices that must repeat.
enum SplitMix64 {
    static func value(seed: UInt64, index: UInt64) -> UInt64 {
        var z = seed &+ (index &+ 1) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in [0, 1).
    static func unitValue(seed: UInt64, index: UInt64) -> Double {
        Double(value(seed: seed, index: index) >> 11) / Double(UInt64(1) << 53)
    }
}

/// How the server (mis)behaves for a request, chosen by the first path segment: `/MODE/NAME?params`.
/// `/NAME` is `.normal`. Every mode also takes the pacing parameters `rate=16m` (bytes per second per
/// connection; suffixes k, m, g are powers of 1024) and `slowports=01&slowrate=2m` (connections whose
/// client port ends in one of those decimal digits get `slowrate`), `slowfirst=N&slowrate=2m` (the
/// first N requests for this exact target get `slowrate`) or `slowevery=N&slowrate=1` (every Nth
/// request for this exact target, counting the first as 1, gets `slowrate`; `slowrate=1` trickles one
/// byte per second, never silent long enough for a stall timeout). `slowafter=256k` makes a slow
/// request start at `rate` and drop to `slowrate` only after that many body bytes. `catchup=1` paces
/// like nginx's `limit_rate`: a client that stopped reading for a while gets the arrears at full speed.
///
/// Every mode also takes the text a hostile server chooses, sent raw (percent-decoded, CR and LF
/// removed): `reason=` the status line's reason phrase, `header=Name:value` one more header field, and
/// `body=` the body of an answer that is not the file (an error, a redirect).
///
/// Counters behind `times` and `after` are kept per exact request target (path and query), so two
/// tests using different parameters never share them.
///
/// | mode | behaviour | parameters (default) |
/// |---|---|---|
/// | normal | ranges, If-Range, keep-alive; a range on an empty resource is 416 `bytes */0` | |
/// | noranges | ignores Range: 200 full, no Accept-Ranges | |
/// | range200 | advertises Accept-Ranges but answers 200 full to ranges | |
/// | chunked | ignores Range, `Transfer-Encoding: chunked` | |
/// | close-delimited | ignores Range, no length, body ends at close | |
/// | redirect | `to` → Location (code), `hops=N` chain ending at `/NAME`, `loop=1` to itself | code (302), hops (1) |
/// | status | answers `code` with a short body to `times` requests from request number `from`, then normally | code (500), times (all), from (1), retryafter |
/// | zeroonly | 206 only for ranges starting at 0, else 200 full | |
/// | wrongrange | 206 whose Content-Range and bytes are moved by `shift` | shift (1) |
/// | capped | an honest 206 for at most `max` bytes from the asked start (RFC 9110 allows less) | max (1m) |
/// | short | declares the right length, sends `missing` bytes less, closes | missing (1) |
/// | long | declares the range, Content-Length and body `extra` bytes longer | extra (1) |
/// | mid200 | request number ≥ `after` gets 200 full (the first is honoured) | after (2) |
/// | changing | requests after the first `after` see a second version (other bytes, ETag, date) | after (1), newlength |
/// | encoding | 206 responses from request number `after` on carry `Content-Encoding: gzip`; `shrink` declares and sends that many bytes less, as a compressed body would | after (1), shrink (0) |
/// | always416 | every ranged GET gets 416 | |
/// | stall | sends `after` body bytes then nothing, connection held until stop() | after (0) |
/// | drop | closes after `after` body bytes, for the first `times` requests | after (0), times (all) |
/// | digest | `Repr-Digest: sha-256=:…:` of the full representation | wrong=1 (flips a bit), md5=1 (`Content-MD5` instead), legacy=1 (`Digest: SHA-256=`) |
/// | disposition | `Content-Disposition` set to the percent-decoded `cd` (CR/LF removed) | cd (attachment) |
/// | silent | accepts and reads requests from number `after` on, never answers, holds the connection | after (1) |
/// | dupheader | 206 with a second `Content-Range` shifted by `shift` (the body is the shifted range), or with `field=length` a second, larger `Content-Length` | field (range), shift (1) |
/// | badlength | 206 whose `Content-Length` is the raw `value` (e.g. `-1`, `+5`, `1x`) | value (-1) |
/// | smuggle | ambiguous framing on 206: `kind=te-cl` chunked body plus a `Content-Length`; `te-other` `Transfer-Encoding: gzip, chunked`; `fold` obs-folded `Content-Length`; `space` a space before the colon of `Content-Length` | kind (te-cl) |
/// | multipart | requests from number `after` on get a 206 `multipart/byteranges` body with one part | after (1) |
/// | bigheaders | adds a `size`-byte header line, or `lines` 100-byte header lines | size (200000), lines |
public enum FaultMode: String, CaseIterable, Sendable {
    case normal
    case noranges
    case range200
    case chunked
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
}

/// A request resolved to a mode, a resource name and the decoded query parameters.
struct Route {
    var mode: FaultMode
    var name: String
    var params: [String: String]

    func int(_ key: String) -> Int64? { params[key].flatMap { Int64($0) } }
    func flag(_ key: String) -> Bool { params[key].map { $0 == "1" || $0 == "true" || $0 == "yes" } ?? false }

    /// The pacing for request number `requestNumber` (per target, from 1) from `remotePort`: a slow
    /// request (its port's last decimal digit in `slowports`, among the first `slowfirst`, or a
    /// multiple of `slowevery`) gets `slowrate`, from its first byte or after `slowafter` bytes at
    /// `rate`; any other request gets `rate`. A nil rate means unthrottled.
    func pacing(forRemotePort remotePort: Int, requestNumber: Int) -> Pacing {
        let rate = params["rate"].flatMap(URLText.parseRate)
        guard let slow = params["slowrate"].flatMap(URLText.parseRate) else { return Pacing(rate: rate, catchUp: flag("catchup")) }
        var isSlow = false
        if let ports = params["slowports"], ports.contains(Character(String(remotePort % 10))) { isSlow = true }
        if let first = int("slowfirst"), requestNumber <= first { isSlow = true }
        if let every = int("slowevery"), every > 0, Int64(requestNumber) % every == 0 { isSlow = true }
        guard isSlow else { return Pacing(rate: rate, catchUp: flag("catchup")) }
        if let after = params["slowafter"].flatMap(URLText.parseRate) {
            return Pacing(rate: rate, slowdown: (after: after, rate: slow))
        }
        return Pacing(rate: slow)
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

/// How fast one response's body goes out: `rate` (nil: unthrottled), then `slowdown.rate` once
/// `slowdown.after` body bytes were sent; `catchUp` as nginx does (see `TokenBucket`).
struct Pacing {
    var rate: Int64?
    var slowdown: (after: Int64, rate: Int64)?
    var catchUp = false
}

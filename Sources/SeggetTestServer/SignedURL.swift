/// The `expiring` mode: URLs signed the way object stores sign them (S3's presigned URLs, a CDN's
/// token links). A URL carries `expires` (Unix seconds) and `sig`, a keyed hash of the name, the
/// expiry and the object's `version`; the server checks both on every request, so that a download
/// that started with a valid link meets 403 halfway through once the time has passed.
///
/// `GET /_sign/NAME?ttl=S` mints a fresh URL valid for S seconds (what a `--refresh-command` asks
/// for); every other parameter of that request is passed on to the URL (pacing, `status`,
/// `version=2` for a second object under the same name).
enum SignedURL {
    /// Not a secret worth keeping: it only makes a hand-edited `expires` fail the signature check.
    private static let key: UInt64 = 0x5e99_e7e1_1ab5_c0de

    /// The parameters the signature covers; the others are passed through unsigned.
    static let signedParameters: Set<String> = ["expires", "sig", "version"]

    /// 16 hex digits of a keyed hash of the name, the expiry and the version.
    static func signature(name: String, expires: Int64, version: Int64) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in name.utf8 {
            h = (h ^ UInt64(b)) &* 0x100_0000_01b3
        }
        let mixed = SplitMix64.value(seed: key ^ h, index: UInt64(bitPattern: expires) &* 31 &+ UInt64(bitPattern: version))
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for shift in stride(from: 60, through: 0, by: -4) {
            out.append(digits[Int((mixed >> UInt64(shift)) & 0xf)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The refusal for a request at `now` (Unix seconds): nil while the URL is valid, else the
    /// route's `status` (403 by default, as S3 answers) with an S3-like XML error body.
    static func refusal(route: Route, now: Int64) -> ResponsePlan? {
        let status = Int(route.int("status") ?? 403)
        guard let expires = route.int("expires"), let sig = route.params["sig"] else {
            return xml(status, code: "AccessDenied", message: "Query-string authentication requires the Signature and Expires parameters")
        }
        let version = route.int("version") ?? 1
        if sig != signature(name: route.name, expires: expires, version: version) {
            return xml(status, code: "SignatureDoesNotMatch", message: "The request signature we calculated does not match the signature you provided")
        }
        if now >= expires {
            return xml(status, code: "AccessDenied", message: "Request has expired", extra: "<Expires>\(expires)</Expires><ServerTime>\(now)</ServerTime>")
        }
        return nil
    }

    /// `GET /_sign/NAME?ttl=S&…`: the path and query of a URL for NAME valid for S seconds (default
    /// 60) from `now`, with every other parameter of the request kept.
    static func mint(name: String, query: String, now: Int64) -> String {
        let params = URLText.parseQuery(query)
        let ttl = params["ttl"].flatMap(Int64.init) ?? 60
        let version = params["version"].flatMap(Int64.init) ?? 1
        let expires = now + ttl
        let passed = query.split(separator: "&").filter { pair in
            let key = String(pair.prefix { $0 != "=" })
            return key != "ttl" && !signedParameters.contains(key)
        }
        var pairs = ["expires=\(expires)"]
        if version != 1 { pairs.append("version=\(version)") }
        pairs += passed.map(String.init)
        pairs.append("sig=\(signature(name: name, expires: expires, version: version))")
        return "/expiring/\(URLText.percentEncodePath(name))?" + pairs.joined(separator: "&")
    }

    private static func xml(_ status: Int, code: String, message: String, extra: String = "") -> ResponsePlan {
        let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>\(code)</Code><Message>\(message)</Message>\(extra)</Error>\n"
        return ResponsePlan(
            status: status, headers: [("Content-Type", "application/xml")], body: .text(Array(body.utf8)))
    }
}

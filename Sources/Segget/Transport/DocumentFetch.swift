import SeggetCurl
import SeggetSystem

/// One small document fetched whole into memory (a Metalink): a plain GET, redirects followed under
/// the probe's policy (http and https only, at most `maxRedirects` hops, no loops, no https→http
/// downgrade unless allowed, credentials only to the host they were given for), at most `limit`
/// bytes of body. Blocking: run it off the loop.
struct DocumentFetch {
    let options: TransferOptions
    /// The most body bytes taken; a longer answer is refused.
    var limit: Int
    var deadline: Deadline?
    /// The longest one request may take, whatever `deadline` leaves (nil: no bound of its own).
    var longest: Double? = nil

    /// What came back: the URL that answered, its head (status 200) and body.
    struct Answer {
        var finalURL: String
        var head: ResponseHead
        var body: [UInt8]

        /// The media type, lower case, without parameters (`application/metalink4+xml`).
        var mediaType: String? {
            head.unsafeRawValue("content-type").map { Substring($0.split(separator: ";").first ?? Substring($0)) }
                .map { $0.trimmingASCIIWhitespace().lowercased() }
        }
    }

    func get(_ url: String) throws(SeggetError) -> Answer {
        var current = url
        var options = self.options
        var visited: Set<String> = [url]
        for _ in 0...options.maxRedirects {
            guard let parts = URLParts(current), parts.isHTTPFamily else {
                throw SeggetError(.usage, "'\(URLParts.shown(current))' is not an http:// or https:// URL.")
            }
            let collector = DocumentCollector(limit: limit)
            let e = EasyHandle()
            do throws(CurlError) {
                try e.configure(url: current, options: options)
                let left = [deadline?.remaining(now: monotonicSeconds()), longest].compactMap { $0 }.min()
                if let left {
                    try e.setTimeout(milliseconds: max(1, Int((left * 1000).rounded(.up))))
                }
            } catch {
                throw SeggetError(error)
            }
            e.delegate = collector
            let code = e.perform()
            let head = collector.head
            if collector.tooLong {
                throw SeggetError(.protocolViolation, "\(URLParts.shown(current)) sent more than \(limit) bytes; that is not a document segget reads.", retryAdvice: .never)
            }
            if code != .ok {
                let proxy = options.proxy(for: current)
                throw Prober.networkError(code, url: current, head: head, proxy: proxy,
                                          handshake: HandshakeOutcome(after: code, of: e, url: current, proxy: proxy), options: options)
            }
            if (300...399).contains(head.status), head.status != 304 {
                guard let location = head.unsafeRawBytes("location"), let next = resolveURL(bytes: location, against: current),
                    let nextParts = URLParts(next), nextParts.isHTTPFamily, !visited.contains(next)
                else {
                    throw SeggetError(.protocolViolation, "\(URLParts.shown(current)) redirected (\(head.status)) to a URL segget does not follow.", retryAdvice: .never)
                }
                if parts.scheme == "https" && nextParts.scheme == "http" && !options.allowInsecureRedirect {
                    throw SeggetError(.protocolViolation, "refusing a redirect from https to plain http (\(URLParts.shown(next))); pass --allow-insecure-redirect to follow it.", retryAdvice: .never)
                }
                if nextParts.host != parts.host { options = options.withoutCredentials() }
                visited.insert(next)
                current = next
                continue
            }
            guard head.status == 200 else { throw Prober.statusError(head.status, url: current) }
            return Answer(finalURL: current, head: head, body: collector.body)
        }
        throw SeggetError.redirects("more than \(options.maxRedirects) redirects; the server may be misconfigured.")
    }
}

/// Collects one answer's head and up to `limit` bytes of body.
private final class DocumentCollector: TransferDelegate {
    var head = ResponseHead()
    var body: [UInt8] = []
    var tooLong = false
    let limit: Int

    init(limit: Int) { self.limit = limit }

    func transfer(_ handle: EasyHandle, receivedHeaderLine line: String, latin1: Bool) { head.append(line: Substring(line), latin1: latin1) }

    func transfer(_ handle: EasyHandle, received bytes: UnsafeRawBufferPointer) -> WriteDecision {
        guard (200..<300).contains(head.status) else { return .proceed }
        guard body.count + bytes.count <= limit else {
            tooLong = true
            return .abort
        }
        body.append(contentsOf: bytes)
        return .proceed
    }
}

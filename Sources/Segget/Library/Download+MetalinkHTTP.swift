import Dispatch
import SeggetCurl
import SeggetMetalink
import SeggetVerify

/// Metalink/HTTP (RFC 6249): the first answer of a download (a redirector's, before it redirects)
/// may name other copies of the file (`Link: <…>; rel=duplicate; pri=N`), a Metalink that
/// describes it (`rel=describedby; type="application/metalink4+xml"`) and its digest (`Digest`).
/// The duplicates become mirrors; the Metalink is fetched for its piece hashes (and its digest and
/// further URLs) when the download has none. Mirrors' own `Link` fields are never read (the probe
/// keeps the first answer's only), so no answer leads to another's.
extension Download {
    /// The most servers one file is fetched from (the main URL and mirrors).
    static let maxSources = 16

    /// What Metalink/HTTP found for an attempt.
    struct MetalinkHTTPFound: Sendable {
        var mirrors: [String] = []
        var facts = MetalinkFacts()
    }

    /// The URL to try after `failed` (the attempt's URL) failed with `error`, for a download with
    /// other URLs of its file (a Metalink's, in the document's order, or `--mirror`s after the main
    /// URL): one that does not answer, answers an error, or serves another length than a Metalink
    /// gives must not sink the others. The first of them that has not failed; nil where none is
    /// left, or the error is not the source's (an interrupt, a local file, a digest over the whole
    /// file). The URL that answers first stands in for those before it: its answer decides what the
    /// file is, and the mirrors after it are checked against it.
    ///
    /// A `--mirror` (no Metalink's size and digests to check it against) stands in only for a URL
    /// whose probe failed, or that could not continue what an earlier run left
    /// (`keptForAnotherSource`): a fetch that failed on the way keeps its journal for a rerun. Never
    /// for a main URL whose TLS certificate failed (`untrustedCertificate`), nor after a renewed link (the
    /// attempt's URL neither the main URL nor a mirror). Once every mirror failed, the main URL is
    /// asked once more, with its retries (its first probe had none while a mirror was left).
    func nextSource(after plan: AttemptPlan, failed: String, error: SeggetError) -> String? {
        switch error.kind {
        case .network, .httpStatus, .protocolViolation: break
        case .usage, .fileSystem, .verification, .interrupted, .internalError: return nil
        }
        guard options.expectedLength == nil else { return untriedSource(after: plan, failed: failed) }
        guard plan.probeFailed || error.keptForAnotherSource, !(error.untrustedCertificate && failed == url),
            plan.url.map({ $0 == url || options.mirrors.contains($0) }) ?? true
        else { return nil }
        if let next = untriedSource(after: plan, failed: failed) { return next }
        return failed != url && plan.failedSources.contains(url) ? url : nil
    }

    /// Whether `plan`'s URL is a `--mirror` standing in for the main URL, which failed.
    func isStandIn(_ plan: AttemptPlan) -> Bool {
        guard options.expectedLength == nil, let standing = plan.url, standing != url else { return false }
        return plan.failedSources.contains(url) && options.mirrors.contains(standing)
    }

    /// The first of the download's URLs (its own, then its mirrors) that neither `failed` nor
    /// those before it failed (see `nextSource`); nil where none is left. While there is one, the
    /// probe of the attempt's URL is not retried: the next URL is tried instead.
    /// A plain-HTTP `--mirror` does not stand in for an HTTPS main URL unless a checksum will check
    /// what it serves: nothing else would show that an answer nobody could read on the way is the file.
    func untriedSource(after plan: AttemptPlan, failed: String) -> String? {
        guard !options.mirrors.isEmpty else { return nil }
        let tried = Set(plan.failedSources + [failed])
        let guarded = options.expectedLength == nil && options.checksums.isEmpty && URLParts(url)?.scheme == "https"
        return ([url] + options.mirrors).first { !tried.contains($0) && (!guarded || URLParts($0)?.scheme != "http") }
    }

    /// The mirror URLs to probe: the options', then `found`, without the main URL, failed URLs and
    /// repeats, at most `maxSources - 1`.
    func sourceURLs(main: ProbeResult, adding found: [String], failed: [String] = []) -> [String] {
        var seen = Set([url, main.finalURL] + failed)
        var out: [String] = []
        for u in options.mirrors + found where !seen.contains(u) {
            seen.insert(u)
            out.append(u)
        }
        return Array(out.prefix(Self.maxSources - 1))
    }

    /// Reads the first answer's `Link` fields (when `options.metalinkHTTP` and there is more to
    /// fetch than the probe brought) and hands `done` what they add, on `loop.steps`: at once, or,
    /// when a Metalink is to be fetched, after it was, off the loop.
    func metalinkHTTP(
        probe: ProbeResult, on loop: DownloadLoop, deadline: Deadline?, events: (@Sendable (DownloadEvent) -> Void)?,
        done: @escaping @Sendable (MetalinkHTTPFound) -> Void
    ) {
        guard options.metalinkHTTP, let links = probe.links, let total = probe.totalLength, Int64(probe.prefix.count) < total
        else { return done(MetalinkHTTPFound()) }
        var found = MetalinkHTTPFound()
        found.mirrors = links.duplicates(preferring: options.metalinkLocation).compactMap { link in
            resolveURL(link.target, against: url).flatMap { URLParts($0)?.isHTTPFamily == true ? $0 : nil }
        }
        if !found.mirrors.isEmpty {
            events?(.notice("the server names \(found.mirrors.count) other cop\(found.mirrors.count == 1 ? "y" : "ies") of the file (Metalink/HTTP); fetching from them too."))
        }
        guard options.pieces == nil, let described = links.metalink.flatMap({ resolveURL($0.target, against: url) }) else {
            return done(found)
        }
        let sameHost = URLParts(described)?.host == URLParts(url)?.host
        // The download waits for the document (its piece hashes decide how pieces are checked), so
        // the fetch has a bound of its own: one that trickled a byte every half second held the
        // download with no request sent, for as long as the low-speed limit allowed each byte.
        let fetch = DocumentFetch(
            options: sameHost ? options.transfer : options.transfer.withoutCredentials(), limit: MetalinkLimits().documentBytes,
            deadline: deadline, longest: Self.metalinkFetchSeconds)
        let name = probe.suggestedFileName
        let location = options.metalinkLocation
        let duplicates = found
        DispatchQueue.global().async {
            let result = Result { () throws(SeggetError) in
                try Self.describedFile(fetch: fetch, url: described, name: name, length: total, location: location)
            }
            loop.steps.async {
                var found = duplicates
                switch result {
                case .success(let file):
                    found.facts.pieces = file.pieces
                    found.facts.digests = file.digests
                    found.mirrors += file.urls
                    events?(.notice("the server points to a Metalink, \(URLParts.shown(described)), with \(file.pieces.map { "\($0.count) piece hashes" } ?? "no piece hashes"); \(file.pieces == nil ? "going on without" : "checking each piece")."))
                case .failure(let error):
                    events?(.notice("the Metalink the server points to, \(URLParts.shown(described)), cannot be used: \(RetryPolicy.sentence(error.message).dropLast()); going on without its piece hashes."))
                }
                done(found)
            }
        }
    }

    /// The longest the Metalink a server points to may take to arrive (each request of its
    /// redirects): past it the download goes on without the document, as when it cannot be used.
    static let metalinkFetchSeconds = 20.0

    /// What a Metalink says of one file, as a download uses it.
    struct DescribedFile: Sendable {
        var pieces: PieceHashes?
        var digests: [ExpectedDigest]
        var urls: [String]
    }

    /// Fetches the Metalink at `url` and picks the file it describes: the one named `name`, or its
    /// only file; its size must be `length`.
    static func describedFile(
        fetch: DocumentFetch, url: String, name: String, length: Int64, location: String?
    ) throws(SeggetError) -> DescribedFile {
        let answer = try fetch.get(url)
        let document: MetalinkDocument
        do {
            document = try MetalinkDocument(parsing: answer.body)
        } catch {
            throw SeggetError(.protocolViolation, error.message)
        }
        guard let file = document.file(for: name) else {
            throw SeggetError(.protocolViolation, "it does not describe \(ServerText(name))")
        }
        guard file.size == nil || file.size == length else {
            throw SeggetError(.protocolViolation, "it gives the file \(file.size ?? 0) bytes, the server \(length)")
        }
        return DescribedFile(
            pieces: file.pieces, digests: file.digests.compactMap { ExpectedDigest(algorithm: $0.algorithm, bytes: $0.bytes) },
            urls: file.ordered(preferring: location).map(\.url))
    }
}

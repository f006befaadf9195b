import SeggetCurl

extension ObjectIdentity {
    /// What a probe found behind a URL.
    init(_ probe: ProbeResult) {
        self.init(length: probe.totalLength ?? -1, etag: probe.etag, lastModified: probe.lastModified)
    }
}

/// How many renewals a download had, and how many in a row brought no byte: a link that expires
/// again before anything arrives would otherwise be renewed for ever.
struct RenewalCount: Equatable, Sendable {
    var total = 0
    var withoutProgress = 0
    /// Bytes done at the last renewal.
    var lastBytesDone: Int64 = -1

    /// Renewals in a row without a new byte after which the download gives up.
    static let maxWithoutProgress = 3

    /// Counts a renewal at `bytesDone`; false when it is one too many without progress.
    mutating func count(bytesDone: Int64) -> Bool {
        total += 1
        withoutProgress = bytesDone > lastBytesDone ? 1 : withoutProgress + 1
        lastBytesDone = bytesDone
        return withoutProgress <= Self.maxWithoutProgress
    }
}

extension Download {
    /// The expiry to renew when the first request of a run answers 401, 403 or 410 and a partial
    /// download of this URL's output name is waiting (a rerun after the link expired), with a renewer
    /// to ask; nil otherwise. The journal's length and validators are what the new link must match.
    func expiredBeforeStart(_ error: SeggetError, plan: AttemptPlan, url: String) -> LinkExpired? {
        guard options.linkRenewer != nil, options.resume, !plan.fresh, !plan.mustResume,
            let status = LinkExpiry.status(of: error)
        else { return nil }
        let name = plan.outputPath ?? options.outputPath
            ?? OutputNames.join(options.directory, FileName.sanitize(FileName.fromURLPath(url)))
        guard let kept = PartialDownload.kept(paths: PartialDownload.Paths(final: name)) else { return nil }
        return LinkExpired(
            url: url, status: status, bytesDone: kept.bytesDone, identity: kept.identity, outputPath: name)
    }

    /// Asks the renewer for a new link after `expired` (it may wait: a command, a daemon client; so
    /// never on the loop nor its steps worker). Throws, with the journal kept, when there is no
    /// renewer, the renewer gives up or fails, or its answer is not an http or https URL.
    func renewedLink(_ expired: LinkExpired, count: inout RenewalCount, _ context: AttemptContext) throws(SeggetError) -> String {
        let what = Self.expiryText(expired)
        guard let renewer = options.linkRenewer else {
            throw SeggetError(
                .httpStatus,
                "\(what), which the journal keeps. To continue, pass --refresh-command CMD (it prints a new link), or run again with a fresh link to the same file and the same output name (-o): the journal resumes it.",
                httpStatus: expired.status)
        }
        guard count.count(bytesDone: expired.bytesDone) else {
            throw SeggetError(
                .httpStatus,
                "\(what); the last \(RenewalCount.maxWithoutProgress) renewed links expired before any new byte arrived, so segget stops here (the journal keeps the file's progress).",
                httpStatus: expired.status)
        }
        context.events?(.notice("\(what); asking for a new link (renewal \(count.total))."))
        let request = LinkRenewalRequest(
            url: expired.url, status: expired.status, bytesDone: expired.bytesDone,
            totalLength: expired.identity.length, renewal: count.total, outputPath: expired.outputPath,
            interrupt: context.interrupt)
        let newURL: String
        do {
            newURL = try String(Substring(renewer.renew(request)).trimmingASCIIWhitespace())
        } catch let e as SeggetError {
            if e.kind == .interrupted || context.interrupt.isSet {
                throw SeggetError(.interrupted, "interrupted while renewing the link, with \(Format.bytes(expired.bytesDone)) of \(Format.bytes(expired.identity.length)) saved; run the same command to resume.")
            }
            let message = e.message.hasSuffix(".") ? e.message : e.message + "."
            throw SeggetError(
                e.kind, "\(what), and renewing it failed: \(message) Its progress is kept: once a new link can be had, \(NextStep.resume.cli)",
                httpStatus: e.httpStatus ?? expired.status)
        } catch {
            throw SeggetError(.httpStatus, "\(what), and renewing it failed: \(error)", httpStatus: expired.status)
        }
        guard let parts = URLParts(newURL), parts.scheme == "http" || parts.scheme == "https" else {
            throw SeggetError(.usage, "\(what), and the renewed link is not an http or https URL: '\(ServerText(newURL))'.")
        }
        return newURL
    }

    /// Checks what the probe of the renewed link `newURL` found (one byte, on the loop, with the
    /// probe's retries): it must serve the same file (``ObjectIdentity``) with byte ranges before the
    /// next attempt keeps any byte from it. Returns the probe, for that attempt to start from.
    /// Throws, with the journal kept and nothing from the new link written, when it failed or serves
    /// another file.
    func checkRenewed(
        _ expired: LinkExpired, newURL: String, probed: Result<ProbeResult, SeggetError>, _ context: AttemptContext
    ) throws(SeggetError) -> PreparedDownload {
        let probe: ProbeResult
        switch probed {
        case .success(let p):
            p.held?.release()
            probe = p
        case .failure(let error):
            var e = SeggetError(error.kind, "\(Self.expiryText(expired)), and the renewed link \(URLParts.shown(newURL)) did not work: \(error.message)", httpStatus: error.httpStatus)
            e.networkCause = error.networkCause
            throw e
        }
        if let why = expired.identity.differences(from: ObjectIdentity(probe)) {
            throw SeggetError(
                .protocolViolation,
                "the renewed link \(URLParts.shown(newURL)) serves a different file (\(why)); nothing from it was written, and the partial download is kept for a link to the same file.")
        }
        guard probe.acceptsRanges else {
            throw SeggetError(
                .protocolViolation,
                "the renewed link \(URLParts.shown(newURL)) does not serve byte ranges, so the download cannot continue; nothing from it was written, and the partial download is kept.")
        }
        context.events?(.notice("renewed the link: it serves the same file (same length, \(probe.etag != nil ? "ETag" : "Last-Modified")); continuing from \(Format.bytes(expired.bytesDone))."))
        return PreparedDownload(url: newURL, probe: probe)
    }

    /// "the link expired: URL answered HTTP 403 after X of Y", the start of every message about it.
    static func expiryText(_ expired: LinkExpired) -> String {
        "the link expired: \(URLParts.shown(expired.url)) answered HTTP \(expired.status) after \(Format.bytes(expired.bytesDone)) of \(Format.bytes(expired.identity.length))"
    }
}

import SeggetCurl

/// What one probing request learnt about a URL, before anything is downloaded.
public struct RemoteFileInfo: Sendable, Equatable {
    /// The URL after redirects.
    public var finalURL: String
    /// The sanitised file name the server suggests (`Content-Disposition`, else the URL path).
    public var suggestedFileName: String
    /// The length, when the server says it.
    public var totalBytes: Int64?
    /// True when the server answered a byte-range request properly.
    public var acceptsRanges: Bool
    /// True when the answer came over HTTP/2: later requests to the host may share its connection.
    public var overHTTP2 = false
    /// The version of the file its validators name (`FinishedMark.version(of:url:)`); nil where
    /// the answer had no strong validator or came from another host.
    public var serverVersion: UInt64?

    init(_ probe: ProbeResult, url: String) {
        finalURL = probe.finalURL
        suggestedFileName = FileName.sanitize(probe.suggestedFileName)
        totalBytes = probe.totalLength
        acceptsRanges = probe.acceptsRanges
        overHTTP2 = probe.overHTTP2
        serverVersion = FinishedMark.version(of: probe, url: url)
    }
}

extension Download {
    /// Sends one probing request (`Range: bytes=0-0`, following redirects under segget's policy)
    /// and reports the server's file name, length and range support. No retries, nothing written.
    ///
    /// The download manager uses it to fix a task's file name before its first start. A batch, which
    /// goes on to download the file, uses ``prepare(on:interrupt:onSlot:completion:)`` instead.
    public func probe() throws(SeggetError) -> RemoteFileInfo {
        // With a host budget, one slot of the host's is held for the request.
        let share = options.hostBudget?.share(for: url)
        if let share, !share.waitForSlot(interrupt: InterruptFlag()) { throw SeggetError(.interrupted, "interrupted") }
        defer { share?.sync(inFlight: 0) }
        return RemoteFileInfo(try Prober(options: options.transfer).probe(url: url), url: url)
    }
}

/// A probe's answer kept for the download that follows it (``Download/prepare(on:interrupt:onSlot:completion:)``), with the
/// connection it used and the first bytes of the file, so that the download neither probes again nor
/// opens a new connection for its first range.
public final class PreparedDownload: @unchecked Sendable {
    public let info: RemoteFileInfo
    let url: String
    let probe: ProbeResult
    /// The probe's slot in its host's budget, held until the download continues its transfer.
    let hostShare: HostShare?
    /// When the probe began: the download's time counts from then.
    let startedAt: Double?

    init(url: String, probe: ProbeResult, hostShare: HostShare? = nil, startedAt: Double? = nil) {
        self.hostShare = hostShare
        self.startedAt = startedAt
        self.url = url
        self.probe = probe
        info = RemoteFileInfo(probe, url: url)
    }

    /// Whether the probe brought every byte of a file of known size: what follows is a save, not a
    /// fetch.
    public var broughtWhole: Bool {
        guard let total = probe.totalLength else { return false }
        return total > 0 && Int64(probe.prefix.count) == total
    }
}

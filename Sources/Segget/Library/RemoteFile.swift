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
}

extension Download {
    /// Sends one probing request (`Range: bytes=0-0`, following redirects under segget's policy)
    /// and reports the server's file name, length and range support. No retries, nothing written.
    ///
    /// Batches use it to give every file a distinct name before any of them starts, and `--json`
    /// to announce a file's path and size.
    public func probe() throws(SeggetError) -> RemoteFileInfo {
        let p = try Prober(options: options.transfer).probe(url: url)
        return RemoteFileInfo(
            finalURL: p.finalURL, suggestedFileName: FileName.sanitize(p.suggestedFileName), totalBytes: p.totalLength,
            acceptsRanges: p.acceptsRanges)
    }
}

/// A probe's answer kept for the download that follows it (``Download/prepare()``), with the
/// connection it used and the first bytes of the file, so that the download neither probes again nor
/// opens a new connection for its first range.
public final class PreparedDownload: @unchecked Sendable {
    public let info: RemoteFileInfo
    let url: String
    let probe: ProbeResult
    /// Used by one thread at a time: the one that prepared, then the one that runs the download.
    let multi: MultiHandle

    init(url: String, probe: ProbeResult, multi: MultiHandle) {
        self.url = url
        self.probe = probe
        self.multi = multi
        info = RemoteFileInfo(
            finalURL: probe.finalURL, suggestedFileName: FileName.sanitize(probe.suggestedFileName),
            totalBytes: probe.totalLength, acceptsRanges: probe.acceptsRanges)
    }
}

extension Download {
    /// Probes like ``probe()`` (one attempt, no retries) but asks for the file's first chunk too, and
    /// keeps everything for ``run(progress:events:interrupt:prepared:)``. A batch uses it to name a
    /// file and then download it with one request less.
    public func prepare() throws(SeggetError) -> PreparedDownload {
        let multi = MultiHandle()
        let p = try Prober(options: options.transfer, firstBytes: probeBytes(fresh: !options.resume, stream: false), multi: multi)
            .probe(url: url)
        return PreparedDownload(url: url, probe: p, multi: multi)
    }
}

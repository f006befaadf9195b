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

    init(_ probe: ProbeResult) {
        finalURL = probe.finalURL
        suggestedFileName = FileName.sanitize(probe.suggestedFileName)
        totalBytes = probe.totalLength
        acceptsRanges = probe.acceptsRanges
    }
}

extension Download {
    /// Sends one probing request (`Range: bytes=0-0`, following redirects under segget's policy)
    /// and reports the server's file name, length and range support. No retries, nothing written.
    ///
    /// The download manager uses it to fix a task's file name before its first start. A batch, which
    /// goes on to download the file, uses ``prepare(pool:)`` instead.
    public func probe() throws(SeggetError) -> RemoteFileInfo {
        RemoteFileInfo(try Prober(options: options.transfer).probe(url: url))
    }
}

/// Connections kept alive between downloads run one after another on the same thread: the next file
/// from the same server reuses them instead of opening new ones (a batch gives each of its worker
/// threads one). Use it from one thread at a time.
public final class ConnectionPool: @unchecked Sendable {
    let multi = MultiHandle()
    public init() {}
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
        info = RemoteFileInfo(probe)
    }
}

extension Download {
    /// Probes like ``probe()`` (one attempt, no retries) but asks for the file's first chunk too, and
    /// keeps everything for ``run(progress:events:interrupt:prepared:pool:)``. A batch uses it to name
    /// a file and then download it with one request less, over the connections of `pool`.
    public func prepare(pool: ConnectionPool? = nil) throws(SeggetError) -> PreparedDownload {
        let multi = pool?.multi ?? MultiHandle()
        let deadline = options.timeout.map { Deadline(limit: $0, from: monotonicSeconds()) }
        let ask = probeBytes(fresh: !options.resume, stream: false)
        var p = try prober(firstBytes: ask.bytes, multi: multi, deadline: deadline).probe(url: url)
        p.noJournalAt = ask.noJournalAt
        return PreparedDownload(url: url, probe: p, multi: multi)
    }
}

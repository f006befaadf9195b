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
        // With a host budget, one slot of the host's is held for the request.
        let share = options.hostBudget?.share(for: url)
        if let share, !share.waitForSlot(interrupt: InterruptFlag()) { throw SeggetError(.interrupted, "interrupted") }
        defer { share?.sync(inFlight: 0) }
        return RemoteFileInfo(try Prober(options: options.transfer).probe(url: url))
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
    /// The probe's slot in its host's budget, held until the download continues its transfer.
    let hostShare: HostShare?

    init(url: String, probe: ProbeResult, multi: MultiHandle, hostShare: HostShare? = nil) {
        self.hostShare = hostShare
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
    /// With a `hostBudget`, it waits for a slot of its host first (until `interrupt` is set), and
    /// calls `onSlot` once it has one, before the request goes out.
    public func prepare(
        pool: ConnectionPool? = nil, interrupt: InterruptFlag = InterruptFlag(), onSlot: (() -> Void)? = nil
    ) throws(SeggetError) -> PreparedDownload {
        let multi = pool?.multi ?? MultiHandle()
        let deadline = options.timeout.map { Deadline(limit: $0, from: monotonicSeconds()) }
        let ask = probeBytes(fresh: !options.resume, stream: false)
        let share = options.hostBudget?.share(for: url)
        if let share, !share.waitForSlot(interrupt: interrupt) { throw SeggetError(.interrupted, "interrupted") }
        onSlot?()
        var p: ProbeResult
        do {
            p = try prober(firstBytes: ask.bytes, multi: multi, deadline: deadline).probe(url: url)
        } catch {
            _ = Self.refusedByHost(error, share: share)
            throw error
        }
        p.noJournalAt = ask.noJournalAt
        return PreparedDownload(url: url, probe: p, multi: multi, hostShare: share)
    }
}

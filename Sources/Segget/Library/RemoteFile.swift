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

/// A snapshot of a running download, delivered a few times a second.
public struct DownloadProgress: Sendable, Equatable {
    /// Bytes of the file that are finished (including those found finished on resume), plus the
    /// in-flight parts of chunks being fetched.
    public var completedBytes: Int64
    /// Total length, nil when the server does not say.
    public var totalBytes: Int64?
    /// Bytes received from the network in this run (duplicates in the end game included).
    public var receivedBytes: Int64
    /// Receive rate over the last few seconds, bytes per second.
    public var bytesPerSecond: Double
    /// Seconds since the transfer started.
    public var elapsed: Double
    public var connections: [ConnectionProgress]
    /// Byte ranges of the file that are finished (whole chunks; in-flight parts left out), sorted
    /// and apart: what a piece map shows. Empty while the length is unknown.
    public var finishedRanges: [Range<Int64>] = []

    /// Estimated seconds left, nil when unknown.
    public var eta: Double? {
        guard let total = totalBytes, bytesPerSecond > 1 else { return nil }
        return Double(max(0, total - completedBytes)) / bytesPerSecond
    }
}

/// What one connection is doing.
public struct ConnectionProgress: Sendable, Equatable {
    public enum State: String, Sendable {
        case idle, receiving, waiting, racing
    }
    public var id: Int
    public var state: State
    public var bytesPerSecond: Double
    /// Bytes left in the connection's current assignment.
    public var remainingBytes: Int64
    /// The URL it fetches from (the main URL after redirects, or a mirror's); nil when unknown.
    public var source: String? = nil
    /// `waiting` for its first start (behind the probe, or for its warm-up's connection), not to
    /// retry a failure.
    public var starting = false
}

/// Notable events a caller may want to show (the CLI prints them as one-line notices).
public enum DownloadEvent: Sendable, Equatable {
    case notice(String)
    case retry(connection: Int, attempt: Int, delay: Double, reason: String)
    case redial(connection: Int, reason: String)
}

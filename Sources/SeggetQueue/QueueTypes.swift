import Segget

/// A task's identity: a random non-zero 64-bit number, shown as aria2's 16 lower-case hex digits.
public struct TaskID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let value: UInt64

    public init(_ value: UInt64) { self.value = value }

    /// Parses 16 hex digits (either case); nil for anything else, zero included.
    public init?(gid: String) {
        let isHex = gid.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0 | 0x20) }
        guard gid.utf8.count == 16, isHex, let v = UInt64(gid, radix: 16), v != 0 else { return nil }
        value = v
    }

    /// 16 lower-case hex digits, zero-padded.
    public var gid: String {
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.utf8.count) + hex
    }

    public var description: String { gid }
    public static func < (a: TaskID, b: TaskID) -> Bool { a.value < b.value }
}

/// Where a task stands, with aria2's names.
public enum TaskStatus: String, Sendable, Codable, CaseIterable {
    /// Downloading now.
    case active
    /// Queued; starts when a slot and budget are free.
    case waiting
    /// Held by the user; `resume` puts it back in the queue.
    case paused
    /// Failed; `errorCode` / `errorMessage` say why.
    case error
    /// Finished and verified, under its final name.
    case complete
    /// Removed by the user before it finished.
    case removed

    /// Waiting or paused: the task has a place in the queue.
    public var isQueued: Bool { self == .waiting || self == .paused }
    /// Complete, error or removed: the task is in the history.
    public var isStopped: Bool { self == .error || self == .complete || self == .removed }
}

/// Per-task options: the per-file options every entry point shares (``OptionSchema``). Every field is
/// optional: nil (or empty) means the queue's default. The directory must lie inside the queue's
/// download root unless the queue allows any; `connections` is what the task asks of the queue's
/// connection budget, which may grant fewer; `maxConnectionsPerServer` (aria2's
/// `max-connection-per-server`) caps the task's own connections, apart from the queue-wide
/// ``QueueSettings/maxConnectionsPerServer``.
public typealias TaskOptions = FileOptions

/// What a task looks like now: its stored state plus live progress while it runs.
public struct TaskSnapshot: Sendable, Equatable {
    public var id: TaskID
    public var urls: [String]
    public var status: TaskStatus
    public var options: TaskOptions
    /// The output path once known (decided when the task first starts, then kept across restarts).
    public var path: String?
    /// The directory the file is saved into (the option, else the download root), resolved.
    public var directory: String
    /// Bytes in the file, 0 while unknown.
    public var totalLength: Int64
    /// Bytes finished (live while active, stored every few seconds and on every state change).
    public var completedLength: Int64
    /// Receive rate, bytes per second; 0 unless active.
    public var downloadSpeed: Int64
    /// Connections in use; 0 unless active.
    public var connections: Int
    /// Connections the budget granted this run; 0 unless active.
    public var grantedConnections: Int
    /// Speed cap applied to this run (per-task and global share), bytes per second; nil when uncapped.
    public var grantedSpeed: Int64?
    /// The length of a piece in aria2's piece view (`pieceLength`, `bitfield`).
    public static let pieceLength: Int64 = 1 << 20

    /// aria2's piece view: ``TaskSnapshot/pieceLength`` and the count of pieces in the file.
    public var pieceLength: Int64
    public var numPieces: Int
    /// aria2-style hex bitfield of finished pieces (a prefix approximation); nil when the length is unknown.
    public var bitfield: String?
    /// aria2's error code (see ``QueueErrorCode``); nil unless the status is `error`.
    public var errorCode: Int?
    public var errorMessage: String?
    /// segget's failure category (with its process exit code); nil unless the status is `error`.
    public var failure: FailureKind?
    /// Place in the waiting queue (waiting and paused tasks, 0-based); -1 for others.
    public var position: Int
    /// Unix seconds.
    public var createdAt: Int64
    public var finishedAt: Int64?
}

/// Queue-wide settings. `downloadRoot` is where tasks without a directory save, and the directory
/// every task's `directory` must lie inside (after resolving symbolic links) unless `allowAnyDirectory`.
public struct QueueSettings: Sendable, Equatable {
    /// Downloads running at once.
    public var maxActive = 5
    /// Connections across all active downloads together.
    public var connectionBudget = 16
    /// Receive rate cap across all active downloads, bytes per second, outside the windows of
    /// `speedSchedule` (inside one, the window's rate applies; see ``DownloadQueue/currentOverallSpeed``).
    public var maxOverallSpeed: Int64? = nil
    /// Time-of-day overall limits. Nil when opening a queue: the schedule stored in its database (if
    /// any) is kept; a schedule given replaces the stored one (an empty one clears it).
    public var speedSchedule: SpeedSchedule? = nil
    /// Connections for a task that does not ask for a number.
    public var defaultConnections = 8
    /// aria2's `max-connection-per-server` (1…16), kept apart from `defaultConnections` (aria2's
    /// `split`): requests at once to one host (scheme, name, port) across all tasks, through
    /// ``DownloadQueue/hostBudget``. 16 is aria2's highest.
    public var maxConnectionsPerServer = 16
    /// The tries and time limits of every task that sets none of its own (aria2's `max-tries`,
    /// `retry-wait`, `timeout`, `connect-timeout`, changed with `changeGlobalOption`).
    public var taskRetries = TaskRetries()
    public var downloadRoot: String
    public var allowAnyDirectory = false
    /// Seconds between stores of a running task's completed length.
    public var progressSaveInterval = 3.0
    /// Seconds a task whose link expired waits for a new one (``QueueEvent/linkExpired(_:_:)``,
    /// answered with ``DownloadQueue/changeURIs(_:fileIndex:delete:add:position:)``) before it fails.
    public var linkRenewalWait = 120.0
    /// The authorities every task's servers are verified against instead of the system's, and the
    /// certificate every task shows (`segget daemon --ca-certificate`, `--certificate`).
    public var tls = TLSFiles()
    /// The same for an https proxy every task goes through (`--proxy-ca-certificate`,
    /// `--proxy-certificate`): its `all-proxy`, or the environment's.
    public var proxyTLS = TLSFiles()

    public init(downloadRoot: String) { self.downloadRoot = downloadRoot }
}

/// What a task that sets none of aria2's `max-tries`, `retry-wait`, `timeout` and `connect-timeout`
/// runs with: the engine's defaults until a client changes them for the whole queue
/// (`changeGlobalOption`, stored in the database). Whole seconds, as aria2 takes them globally. A
/// task's own value wins; a change reaches a running task at its next start.
public struct TaskRetries: Sendable, Equatable {
    /// Tries of each range, the first included; 0: no limit (``OptionSchema/unlimitedRetries``).
    public var maxTries = DownloadOptions().retries + 1
    public var retryWait = Int(DownloadOptions().retryWait.rounded())
    public var timeout = Int(DownloadOptions().transfer.stallTimeout.rounded())
    public var connectTimeout = Int(DownloadOptions().transfer.connectTimeout.rounded())

    public init() {}

    /// The four as a task's own options would give them.
    public var options: FileOptions { filling(FileOptions()) }

    /// A task's options with each of the four it leaves unset given these values.
    public func filling(_ task: FileOptions) -> FileOptions {
        var o = task
        o.maxTries = o.maxTries ?? maxTries
        o.retryWait = o.retryWait ?? Double(retryWait)
        o.stallTimeout = o.stallTimeout ?? Double(timeout)
        o.connectTimeout = o.connectTimeout ?? Double(connectTimeout)
        return o
    }

    /// Each value checked by its option's own rule in ``OptionSchema``, as a task's would be.
    public func check() throws(OptionError) {
        let o = options
        for spec in [OptionSchema.maxTries, OptionSchema.retryWait, OptionSchema.timeout, OptionSchema.connectTimeout] {
            for value in spec.values(o) { _ = try spec.check(value) }
        }
    }
}

/// Counts for aria2's `getGlobalStat`.
public struct GlobalStat: Sendable, Equatable {
    public var downloadSpeed: Int64
    public var numActive: Int
    public var numWaiting: Int
    /// Stopped tasks in the history (complete, error, removed).
    public var numStopped: Int
    /// Stopped tasks since the queue was opened, purged ones included.
    public var numStoppedTotal: Int
}

/// Something that happened to a task, for aria2's notifications.
public enum QueueEvent: Sendable, Equatable {
    case started(TaskID)
    case paused(TaskID)
    /// Removed by the user (aria2's onDownloadStop).
    case stopped(TaskID)
    case completed(TaskID)
    case failed(TaskID)
    /// The task's link expired mid-download; it waits `linkRenewalWait` seconds for a new URI
    /// (segget's `segget.onLinkExpired`, answered with aria2's `changeUri`).
    case linkExpired(TaskID, LinkRenewalRequest)

    public var id: TaskID {
        switch self {
        case .started(let id), .paused(let id), .stopped(let id), .completed(let id), .failed(let id),
            .linkExpired(let id, _): id
        }
    }
}

/// How ``DownloadQueue/changePosition(_:_:_:)`` reads its number, as aria2's POS_SET/POS_CUR/POS_END.
public enum PositionOrigin: String, Sendable {
    /// From the front of the queue.
    case set
    /// Relative to the task's current place.
    case current
    /// Relative to the end (0 is the last place, -1 the one before).
    case end
}

/// An error from the queue's API: a category and a full sentence.
public struct QueueError: Error, CustomStringConvertible, Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// No task has that id.
        case notFound
        /// The task cannot do that in its current state (e.g. pausing a finished task).
        case invalidState
        /// An option or URL was refused (bad directory, header with a line break…).
        case badOption
        /// The database could not be read or written.
        case storage
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    static func notFound(_ id: TaskID) -> QueueError {
        QueueError(.notFound, "GID \(id.gid) is not found")
    }
}

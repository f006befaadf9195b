import Segget
import SeggetJournal
import SeggetSystem

extension DownloadQueue {
    // MARK: Helpers

    /// `directory/name`, numbered (`name.1.ext`, …) when another task or a file already has it;
    /// but a partial download of `url` (its journal records that URL) that no active, waiting or
    /// paused task holds is this task's to continue, whoever left it: a task of the same URL that
    /// failed or was removed (a front-end's "retry" adds the URL again), or one whose result was
    /// removed. It numbered such a task's name before, and the retry started over beside the bytes
    /// the failed task had saved.
    /// The files of tasks left aside unread (``DownloadQueue/tasksLeftAside``) are held too: the
    /// segget that wrote them may continue them.
    static func freePath(
        name: String, directory: String, records: [TaskID: TaskRecord], except: TaskID, url: String?,
        leftAside: [LeftAsideTask] = []
    ) -> String {
        let others = records.values.filter { $0.id != except }
        let aside = leftAside.compactMap(\.path)
        let taken = Set(others.compactMap(\.path) + aside)
        let held = Set(others.filter { !$0.status.isStopped }.compactMap(\.path) + aside)
        var n = 0
        while true {
            let candidate = OutputNames.join(directory, n == 0 ? name : OutputNames.numbered(name, n))
            if !taken.contains(candidate) && !exists(candidate) && !exists(candidate + ".segget-part") {
                return candidate
            }
            if let url, !held.contains(candidate), !exists(candidate), isPartial(of: url, at: candidate) {
                return candidate
            }
            n += 1
        }
    }

    /// Whether the side files at `path` are a partial download of `url` (its data file, and a
    /// journal that records that URL, credentials redacted as journals keep it).
    static func isPartial(of url: String, at path: String) -> Bool {
        guard exists(path + ".segget-part"), let header = Journal.header(at: path + ".segget-journal") else { return false }
        return header.url == JournalHeader.redactingCredentials(url)
    }

    static func exists(_ path: String) -> Bool {
        FileSystem.exists(path)
    }

    /// Whether no partial download is kept for `path`: neither its data file nor its journal.
    static func keepsNothing(at path: String) -> Bool {
        !exists(path + ".segget-part") && !exists(path + ".segget-journal")
    }

    /// Refuses an `out` that another task still to finish (active, waiting or paused) saves to:
    /// the two would take the file from each other, and which one failed (with errorCode 13 and
    /// advice to add the other's URL, then running) depended on which opened the file first, not on
    /// their order (exploratory run 7).
    static func refuseClaimed(_ path: String?, _ records: [TaskID: TaskRecord], except: TaskID?) throws(QueueError) {
        guard let path, let other = claimant(of: path, records, except: except) else { return }
        throw QueueError(
            .badOption,
            "Task \(other.id.gid) (\(other.status.rawValue)) already saves to \(path); give this task another out, or remove that task first."
        )
    }

    /// The same for the tasks left aside unread (``DownloadQueue/tasksLeftAside``): their files may
    /// hold a partial download that the segget that wrote them will continue.
    static func refuseClaimed(_ path: String?, leftAside: [LeftAsideTask]) throws(QueueError) {
        guard let path, let other = leftAside.first(where: { $0.path == path }) else { return }
        throw QueueError(
            .badOption,
            "Task \(other.gid), which this segget cannot read (it was left in the queue as it is), saves to \(path); give this task another out."
        )
    }

    /// Another task still to finish (active, waiting or paused) that saves to `path`, if any.
    static func claimant(of path: String, _ records: [TaskID: TaskRecord], except: TaskID?) -> TaskRecord? {
        records.values.first { $0.id != except && $0.path == path && !$0.status.isStopped }
    }

    static func want(_ o: TaskOptions) -> QueueState.Want {
        QueueState.Want(
            connections: o.connections, maxSpeed: o.maxSpeed.flatMap { $0 > 0 ? $0 : nil }, perServer: o.maxConnectionsPerServer)
    }

    static func limits(_ s: QueueSettings) -> QueueState.Limits {
        // The overall speed is not split into grants: every download pays into one live
        // `SharedRateLimit` (``DownloadQueue/overallSpeed``), which the speed schedule changes and
        // `SpeedShares` shares out among the running tasks.
        QueueState.Limits(maxActive: s.maxActive, connectionBudget: s.connectionBudget, defaultConnections: s.defaultConnections)
    }

    static func checkSettings(_ s: QueueSettings) throws(QueueError) {
        guard (1...1000).contains(s.maxActive) else {
            throw QueueError(
                .badOption, "The number of active downloads must be between 1 and 1000 (got \(s.maxActive)).")
        }
        guard (1...1024).contains(s.connectionBudget) else {
            throw QueueError(
                .badOption, "The connection budget must be between 1 and 1024 (got \(s.connectionBudget)).")
        }
        guard (1...128).contains(s.defaultConnections) else {
            throw QueueError(
                .badOption, "The default number of connections must be between 1 and 128 (got \(s.defaultConnections))."
            )
        }
        guard (1...16).contains(s.maxConnectionsPerServer) else {
            throw QueueError(
                .badOption,
                "The connections per server must be between 1 and 16, as in aria2 (got \(s.maxConnectionsPerServer)).")
        }
        if let g = s.maxOverallSpeed, g < 0 {
            throw QueueError(.badOption, "The overall speed limit cannot be negative (got \(g)); use 0 for no limit.")
        }
        do throws(OptionError) {
            try s.taskRetries.check()
        } catch {
            throw QueueError(.badOption, "The tasks' default \(error.key): \(error.message)")
        }
        guard s.progressSaveInterval > 0 else {
            throw QueueError(.badOption, "The progress save interval must be positive (got \(s.progressSaveInterval)).")
        }
    }

    /// The byte ranges of the chunks the journal at `path` records, for a file of `totalLength`;
    /// nil where there is no journal, or it is another length's.
    static func journalRanges(_ path: String, totalLength: Int64) -> [Range<Int64>]? {
        guard let (header, chunks) = Journal.recordedChunks(at: path), header.totalLength == totalLength, header.chunkSize > 0
        else { return nil }
        return ChunkPlan(totalLength: header.totalLength, chunkSize: header.chunkSize)
            .byteRanges { chunks.count > $0 && chunks[$0] }
    }

    static func snapshot(_ r: TaskRecord, _ c: Core, position: Int) -> TaskSnapshot {
        let live = c.live[r.id]
        let p = live?.progress
        let pieceLength = TaskSnapshot.pieceLength
        let numPieces = PieceMap.pieceCount(totalLength: r.totalLength)
        // The running download's finished chunks; else those its last run ended with, or for a task
        // this daemon has not run yet those its journal records (read at open); else the completed
        // length read as a prefix of the file.
        let finished: [Range<Int64>]
        if r.status == .complete {
            finished = [0..<r.totalLength]
        } else if let p, p.totalBytes != nil {
            finished = p.finishedRanges
        } else if let last = c.lastFinished[r.id] {
            finished = last
        } else {
            finished = r.completedLength > 0 ? [0..<r.completedLength] : []
        }
        let bitfield = PieceMap.bitfield(finished: finished, totalLength: r.totalLength)
        return TaskSnapshot(
            id: r.id, urls: r.urls, status: r.status, options: r.options, path: r.path, directory: r.directory,
            totalLength: r.totalLength, completedLength: r.completedLength,
            downloadSpeed: Int64(p?.bytesPerSecond ?? 0),
            connections: p?.connections.filter { $0.state != .idle }.count ?? 0,
            grantedConnections: live?.grant.connections ?? 0, grantedSpeed: live?.grant.speed,
            pieceLength: pieceLength, numPieces: numPieces, bitfield: bitfield,
            errorCode: r.status == .error ? r.errorCode : nil, errorMessage: r.status == .error ? r.errorMessage : nil,
            failure: r.status == .error ? r.failure : nil, position: position, createdAt: r.createdAt,
            finishedAt: r.finishedAt)
    }

    /// aria2's slice: `[offset, offset+count)`, or for a negative offset, backwards from `count + offset`.
    static func window<T>(_ items: [T], offset: Int, count: Int) -> [T] {
        guard count > 0 else { return [] }
        if offset >= 0 {
            guard offset < items.count else { return [] }
            return Array(items[offset..<(offset + min(count, items.count - offset))])
        }
        let first = items.count + offset
        guard first >= 0 else { return [] }
        return stride(from: first, to: max(-1, first - count), by: -1).map { items[$0] }
    }

    /// aria2's error numbers for segget's failures (front-ends show or match them).
    static func aria2ErrorCode(_ e: SeggetError) -> Int {
        switch e.kind {
        case .network:
            switch e.networkCause {
            case .nameNotResolved: return 19
            case .couldNotConnect: return 1
            case .timedOut: return 2
            case nil: return 6
            }
        case .httpStatus:
            // As aria2 1.36 numbers them (measured with aria2c against each status): only a 401 is
            // its "authorization failed"; a 403, a 407 and a 410 are its 22, a 503 its "service
            // unavailable".
            switch e.httpStatus {
            case 404: return 3
            case 401: return 24
            case 503: return 29
            default: return 22
            }
        case .fileSystem:
            let m = e.message
            if m.contains("already exists") || e.nameHeldByAnotherDownload { return 13 }
            if m.contains("space") || m.contains("disk is full") { return 9 }
            return 16
        case .verification: return 32
        // aria2's "too many redirects" for a loop or a chain past the limit, as aria2 reports both.
        case .protocolViolation: return e.tooManyRedirects ? 23 : 22
        case .usage: return 28
        case .interrupted: return 7
        case .internalError: return 1
        }
    }
}

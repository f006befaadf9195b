import Segget
import SeggetSystem

/// A task whose link expired, waiting for a new one.
struct PendingRenewal: Sendable, Equatable {
    /// The URL that expired.
    var expiredURL: String
    /// The new link, once `changeURIs` gave one.
    var newURL: String?
}

extension DownloadQueue {
    // MARK: Links that expire

    /// The renewer of task `id`'s download: it announces ``QueueEvent/linkExpired(_:_:)`` and waits
    /// for a new URI from ``changeURIs(_:fileIndex:delete:add:position:)``.
    func linkRenewer(_ id: TaskID) -> LinkRenewer {
        LinkRenewer { [weak self] request in
            guard let self else { throw SeggetError(.interrupted, "the queue has shut down") }
            return try self.awaitNewLink(id, request)
        }
    }

    /// Blocks the download's thread until a client gives task `id` a new link, the task is stopped
    /// (paused, removed, shut down), or `linkRenewalWait` seconds have passed.
    ///
    /// A link given before it expired (`changeUri` on the running task) is used at once, with no
    /// event: the task's first URI is no longer the one that expired.
    func awaitNewLink(_ id: TaskID, _ request: LinkRenewalRequest) throws(SeggetError) -> String {
        enum Start { case ready(String), wait(Double), stopped }
        let start: Start = core.withLock { c in
            guard c.live[id] != nil, let r = c.records[id] else { return .stopped }
            if let first = r.urls.first, first != request.url { return .ready(first) }
            c.renewals[id] = PendingRenewal(expiredURL: request.url)
            for s in c.subscribers.values { s.yield(.linkExpired(id, request)) }
            return .wait(c.settings.linkRenewalWait)
        }
        let wait: Double
        switch start {
        case .ready(let url): return url
        case .stopped: throw SeggetError(.interrupted, "the task stopped")
        case .wait(let seconds): wait = seconds
        }
        defer { core.withLock { _ = $0.renewals.removeValue(forKey: id) } }
        let deadline = monotonicNow() + wait
        while true {
            let (url, gone) = core.withLock { c in (c.renewals[id]?.newURL, c.live[id] == nil || c.closed) }
            if let url { return url }
            if request.interrupt.isSet || gone { throw SeggetError(.interrupted, "the task stopped while waiting for a new link") }
            if monotonicNow() >= deadline {
                throw SeggetError(
                    .httpStatus,
                    "no RPC client gave a new link (segget.onLinkExpired, answered with aria2.changeUri) within \(Format.seconds(wait)); change the task's URI and unpause it to resume",
                    httpStatus: request.status)
            }
            SystemThread.sleep(seconds: 0.05)
        }
    }

    /// aria2's `changeUri`: removes each URI of `delete` once (first match), then inserts `add` at
    /// `position` of what is left (the end when nil); returns how many were removed and added. The
    /// task keeps at least one URI. A task waiting for a new link (``QueueEvent/linkExpired(_:_:)``)
    /// takes the first URI of the new list that is not the one that expired.
    ///
    /// Only for a task that has not stopped; `fileIndex` is 1 (a task is one file).
    public func changeURIs(
        _ id: TaskID, fileIndex: Int, delete: [String], add: [String], position: Int?
    ) throws(QueueError) -> (deleted: Int, added: Int) {
        guard let current = core.withLock({ $0.records[id] }) else { throw QueueError.notFound(id) }
        guard fileIndex == 1 else {
            throw QueueError(.badOption, "The file index \(fileIndex) is out of range; a segget task has one file, index 1.")
        }
        if let position, position < 0 {
            throw QueueError(.badOption, "The position must not be negative.")
        }
        try OptionRules.check(urls: add.isEmpty ? current.urls : add, options: current.options)
        return try core.withLock { (c: inout Core) throws(QueueError) -> (deleted: Int, added: Int) in
            try Self.checkOpen(c)
            guard var r = c.records[id] else { throw QueueError.notFound(id) }
            guard !r.status.isStopped else {
                throw QueueError(
                    .invalidState, "Task \(id.gid) has already stopped (\(r.status.rawValue)); its URIs can no longer change.")
            }
            let (urls, deleted) = Self.editedURIs(r.urls, delete: delete, add: add, position: position)
            guard !urls.isEmpty else {
                throw QueueError(.badOption, "A task needs at least one URI; add one in the same call that removes the last.")
            }
            r.urls = urls
            c.records[id] = r
            let saved = r
            store(&c) { s throws(SQLiteError) in try s.update(saved) }
            if let pending = c.renewals[id], pending.newURL == nil,
                let next = urls.first(where: { $0 != pending.expiredURL })
            {
                c.renewals[id]?.newURL = next
            }
            try Self.takeStorageError(&c)
            return (deleted, add.count)
        }
    }

    /// aria2's rules for `changeUri`, as a value: each URI of `delete` removes its first match, then
    /// `add` goes in at `position` (clamped to the end; nil: the end).
    static func editedURIs(
        _ urls: [String], delete: [String], add: [String], position: Int?
    ) -> (urls: [String], deleted: Int) {
        var left = urls
        var deleted = 0
        for d in delete {
            if let i = left.firstIndex(of: d) {
                left.remove(at: i)
                deleted += 1
            }
        }
        let at = min(position ?? left.count, left.count)
        left.insert(contentsOf: add, at: at)
        return (left, deleted)
    }
}

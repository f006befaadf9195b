import SeggetSystem

/// The bytes of a download, in file order, as an asynchronous sequence of chunks: what `segget -o -`
/// writes to standard output, for a Swift program.
///
/// Iterating starts the download on a thread of its own (see ``Download/stream(to:settings:progress:events:interrupt:)``):
/// `options.connections` connections, a reorder window of `settings.window` bytes, connections that
/// get too far ahead of the reader paused. Each element is the next run of bytes (at most 1 MiB); at
/// most `queuedChunks` of them wait for the reader, so memory stays within the window plus 4 MiB
/// however slowly it reads. A failure (the server, a checksum that does not match after the last
/// byte) is thrown by `next()`; ending the iteration early (or dropping the iterator) stops the download.
///
/// ```swift
/// for try await chunk in Download(url: url, options: options).bytes() {
///     decompressor.feed(chunk)
/// }
/// ```
public struct DownloadBytes: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    let download: Download
    let settings: StreamSettings
    let events: (@Sendable (DownloadEvent) -> Void)?

    /// How many chunks may wait for the reader.
    public static let queuedChunks = 4

    public func makeAsyncIterator() -> Iterator { Iterator(self) }

    /// Hands out the chunks; the download stops when the iterator goes away.
    public final class Iterator: AsyncIteratorProtocol {
        private let channel = ChunkChannel()

        init(_ sequence: DownloadBytes) {
            let channel = channel
            let failed = DownloadThread.startReportingError {
                let outcome: Result<StreamResult, SeggetError>
                do throws(SeggetError) {
                    outcome = .success(try sequence.download.stream(
                        to: { try channel.push(Array($0)) }, settings: sequence.settings, events: sequence.events,
                        interrupt: channel.interrupt))
                } catch {
                    outcome = .failure(error)
                }
                channel.finish(outcome)
            }
            if let failed { channel.finish(.failure(SeggetError(.internalError, "could not start the download thread: \(failed)."))) }
        }

        deinit { channel.cancel() }

        /// The next chunk, or nil after the last byte (and a passed checksum). Throws `SeggetError`.
        public func next() async throws -> [UInt8]? {
            try await channel.next()
        }

        /// What the stream delivered, once `next()` returned nil.
        public var result: StreamResult? { channel.result }
    }
}

extension Download {
    /// This download's bytes, in order, as an asynchronous sequence of chunks (see ``DownloadBytes``).
    public func bytes(
        settings: StreamSettings = StreamSettings(), events: (@Sendable (DownloadEvent) -> Void)? = nil
    ) -> DownloadBytes {
        DownloadBytes(download: self, settings: settings, events: events)
    }
}

/// The hand-over between the download's output thread and the async reader: a queue of at most
/// `DownloadBytes.queuedChunks` chunks (the producer waits while it is full), the outcome, and a
/// waiting reader.
final class ChunkChannel: @unchecked Sendable {
    let interrupt = InterruptFlag()
    private let lock = ConditionLock()
    // Guarded by `lock`.
    private var queue: [[UInt8]] = []
    private var outcome: Result<StreamResult, SeggetError>?
    private var waiter: CheckedContinuation<[UInt8]?, any Error>?
    private var cancelled = false

    /// Called on the output thread: waits while the queue is full; throws once the reader is gone.
    func push(_ chunk: [UInt8]) throws {
        let reader: CheckedContinuation<[UInt8]?, any Error>? = try lock.withLock {
            while queue.count >= DownloadBytes.queuedChunks && !cancelled { lock.wait() }
            if cancelled { throw SeggetError(.interrupted, "the reader of the stream stopped reading.") }
            if let w = waiter {
                waiter = nil
                return w
            }
            queue.append(chunk)
            return nil
        }
        reader?.resume(returning: chunk)
    }

    func finish(_ result: Result<StreamResult, SeggetError>) {
        let reader: CheckedContinuation<[UInt8]?, any Error>? = lock.withLock {
            outcome = result
            lock.broadcast()
            guard queue.isEmpty, let w = waiter else { return nil }
            waiter = nil
            return w
        }
        guard let reader else { return }
        switch result {
        case .success: reader.resume(returning: nil)
        case .failure(let e): reader.resume(throwing: e)
        }
    }

    var result: StreamResult? { lock.withLock { if case .success(let r)? = outcome { r } else { nil } } }

    func cancel() {
        interrupt.set()
        lock.withLock {
            cancelled = true
            lock.broadcast()
        }
    }

    func next() async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { (k: CheckedContinuation<[UInt8]?, any Error>) in
            enum Now { case chunk([UInt8]), done(Result<StreamResult, SeggetError>), wait }
            let now: Now = lock.withLock {
                if !queue.isEmpty {
                    lock.broadcast()
                    return .chunk(queue.removeFirst())
                }
                if let outcome { return .done(outcome) }
                waiter = k
                return .wait
            }
            switch now {
            case .chunk(let c): k.resume(returning: c)
            case .done(.success): k.resume(returning: nil)
            case .done(.failure(let e)): k.resume(throwing: e)
            case .wait: break
            }
        }
    }
}

import SeggetCurl
import SeggetSystem

/// The warm-up requests of one probe (see `ConnectionWarmUp`): each asks `url` for its first byte on
/// a driver's multi handle, so that the connection it opens stays in that handle's cache for the
/// download's ranged requests. Runs on the loop thread; `outcome` may be read from any thread.
///
/// A warm-up's answer is read like a probe's (`ProbeContext`, one byte); anything but a 206 is
/// ended at its head, but for a redirect's short text, read to its end so that its connection
/// stays. Each is bounded by `timeout` so that a server that never answers holds no transfer on the
/// driver for long. Held by the probe's result; once it goes away its transfers
/// still running end on the driver by themselves (`TransferDriver` holds clients weakly).
final class ConnectionWarmUps: TransferClient, @unchecked Sendable, Equatable {
    /// The most a warm-up may take, seconds.
    static let timeout = 30.0

    private let lock = ConditionLock()
    /// Guarded by `lock`.
    private var tally = WarmUpOutcome()
    private var requests: [ObjectIdentifier: ProbeContext] = [:]
    /// When the warm-ups were sent (monotonic seconds).
    private let sentAt: Double

    /// Starts `count` warm-ups of `url` on `driver`, `lag` seconds after the probe's request; those
    /// libcurl refuses to start are counted failed.
    init(count: Int, url: String, options: TransferOptions, driver: TransferDriver, lag: Double) {
        tally.lag = lag
        let sentAt = monotonicSeconds()
        self.sentAt = sentAt
        for _ in 0..<count {
            let context = ProbeContext(limit: 1)
            let easy = EasyHandle()
            do throws(CurlError) {
                try easy.configure(url: url, options: options)
                try easy.setRange("0-0")
                try easy.setTimeout(milliseconds: Int(Self.timeout * 1000))
                try easy.setConnectTimeout(milliseconds: Int(min(Self.timeout, options.connectTimeout) * 1000))
                easy.delegate = context
                try driver.start(easy, for: self)
                requests[ObjectIdentifier(easy)] = context
                lock.withLock { tally.sent += 1 }
            } catch {
                lock.withLock {
                    tally.sent += 1
                    tally.failed += 1
                }
            }
        }
    }

    /// Guarded by `lock`: the outcome `take` returned last.
    private var taken: WarmUpOutcome?

    /// How the warm-ups have ended so far.
    var outcome: WarmUpOutcome { lock.withLock { tally } }

    /// How the warm-ups have ended so far, when that changed since the last call (`always`: anyway).
    func take(always: Bool = false) -> WarmUpOutcome? {
        lock.withLock {
            guard always || taken != tally else { return nil }
            taken = tally
            return tally
        }
    }

    func transferDriver(_ driver: TransferDriver, completed handle: EasyHandle, with code: CurlCode) {
        guard let context = requests.removeValue(forKey: ObjectIdentifier(handle)) else { return }
        let head = context.head
        let opened = (try? handle.newConnections()) ?? 1
        lock.withLock {
            tally.opened += min(1, max(0, opened))
            if head.isComplete, head.status == 429 || head.status == 503 {
                tally.refused += 1
                if let w = head.refusalWait { tally.wait = max(tally.wait ?? 0, w) }
            } else if head.isComplete {
                tally.accepted += 1
                if tally.firstRound == nil { tally.firstRound = max(0, monotonicSeconds() - sentAt) }
            } else {
                tally.failed += 1
            }
        }
    }

    /// Notes that the probe was sent again on a warm connection.
    func noteProbeResent() { lock.withLock { tally.probeResent = true } }

    static func == (a: ConnectionWarmUps, b: ConnectionWarmUps) -> Bool { a === b }
}

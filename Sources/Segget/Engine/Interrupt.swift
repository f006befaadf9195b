import SeggetSystem
import Synchronization

/// A flag that asks a running download to stop at the next opportunity (Ctrl-C, SIGTERM, task
/// cancellation). Safe to set from any thread or a signal-handling queue.
public final class InterruptFlag: Sendable {
    private let state = Atomic<Bool>(false)
    public init() {}
    public func set() { state.store(true, ordering: .relaxed) }
    public var isSet: Bool { state.load(ordering: .relaxed) }
}

/// Seconds on a monotonic clock.
func monotonicSeconds() -> Double {
    (ContinuousClock.now - ContinuousClock.Instant.zeroReference).inSeconds
}

extension ContinuousClock.Instant {
    static let zeroReference = ContinuousClock.now
}

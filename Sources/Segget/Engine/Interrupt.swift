import SeggetSystem
import Synchronization

/// A flag that asks a running download to stop at the next opportunity (Ctrl-C, SIGTERM, task
/// cancellation). Safe to set from any thread or a signal-handling queue.
public final class InterruptFlag: Sendable {
    private let state = Atomic<Bool>(false)
    /// A flag this one follows: set when it is (a part of a download that may end on its own, such
    /// as its mirrors' probes, follows the download's flag).
    private let parent: InterruptFlag?
    public init() { parent = nil }
    init(following parent: InterruptFlag) { self.parent = parent }
    public func set() { state.store(true, ordering: .relaxed) }
    public var isSet: Bool { state.load(ordering: .relaxed) || parent?.isSet == true }
}

/// Seconds on a monotonic clock.
func monotonicSeconds() -> Double {
    (ContinuousClock.now - ContinuousClock.Instant.zeroReference).inSeconds
}

extension ContinuousClock.Instant {
    static let zeroReference = ContinuousClock.now
}

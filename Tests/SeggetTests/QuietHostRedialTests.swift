import Testing
@testable import Segget

/// A slow connection is not re-dialled while the host's named wait runs (a refusal's `Retry-After`):
/// the re-dial is a request like any other, and went out at once, against the wait.
@Suite struct QuietHostRedialTests {
    static let MiB = 1 << 20

    /// Connections 0-2 at 2.5 MiB/s and connection 3 at 0.6 MiB/s on a short path, sampled every 50 ms
    /// to 1.1 s (as `CoordinatorTests.aRedialOnALongPathPaysItsHandshakes`), with the host quiet
    /// until `quietUntil`: whether connection 3 is re-dialled at 1.1 s.
    static func redialled(quietUntil: Double?) -> Bool {
        let mib = Double(Self.MiB)
        let now = 1.1
        var config = Coordinator.Config()
        config.url = "https://example.com/f"
        var c = Coordinator(plan: ChunkPlan(totalLength: 256 * Int64(Self.MiB), chunkSize: Int64(Self.MiB)), connections: 4, config: config)
        c.firstByteWaits = [0.001, 0.01, 0.01, 0.01]
        if let quietUntil { c.host.asked(wait: quietUntil - 0.5, now: 0.5) }
        for id in 0..<4 {
            if c.scheduler.run(of: id) == nil { _ = c.scheduler.nextAssignment(for: id) }
            guard let run = c.scheduler.run(of: id) else { return false }
            var conn = c.connections[id]
            conn.machine.start()
            _ = conn.machine.headArrived(refusal: nil)
            _ = conn.machine.bytesArrived(budgetAllows: true, now: 0.01)
            conn.firstByteAt = 0.01
            conn.requestStart = c.plan.byteRange(ofChunk: run.lowerBound).lowerBound
            conn.requestEnd = c.plan.byteRange(ofChunk: run.upperBound - 1).upperBound
            conn.chunkEnd = conn.requestStart + Int64(Self.MiB)
            conn.pos = conn.requestStart
            var t = 0.01
            conn.sample(now: t)
            while t < now - 1e-9 {
                t += 0.05
                conn.transferBytes = Int64((t - 0.01) * (id == 3 ? 0.6 * mib : 2.5 * mib))
                conn.pos = conn.requestStart + conn.transferBytes
                conn.sample(now: t)
            }
            c.connections[id] = conn
        }
        return c.judgeSlowConnections(now: now).contains { if case .remove(3) = $0 { true } else { false } }
    }

    @Test func aSlowConnectionWaitsForTheHostsWait() {
        #expect(Self.redialled(quietUntil: nil), "the counter-case: re-dialled when the host named no wait")
        #expect(!Self.redialled(quietUntil: 2.0), "re-dialled 0.9 s before the host's wait was over")
        #expect(Self.redialled(quietUntil: 1.0), "the wait is over: re-dialled as usual")
    }
}

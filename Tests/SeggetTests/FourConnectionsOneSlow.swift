@testable import Segget

/// The slow rule's common case for tests: connections 0-2 at 2.5 MiB/s and connection 3 at 0.6 MiB/s
/// on a short path, 256 MiB in 1 MiB chunks, sampled every 50 ms to `now` (as
/// `CoordinatorTests.aRedialOnALongPathPaysItsHandshakes`).
enum FourConnectionsOneSlow {
    static let MiB = 1 << 20

    /// The coordinator after the samples; `prepare` runs on it before the connections start.
    static func coordinator(now: Double, prepare: (inout Coordinator) -> Void = { _ in }) -> Coordinator? {
        let mib = Double(Self.MiB)
        var config = Coordinator.Config()
        config.url = "https://example.com/f"
        var c = Coordinator(plan: ChunkPlan(totalLength: 256 * Int64(Self.MiB), chunkSize: Int64(Self.MiB)), connections: 4, config: config)
        c.firstByteWaits = [0.001, 0.01, 0.01, 0.01]
        prepare(&c)
        for id in 0..<4 {
            if c.scheduler.run(of: id) == nil { _ = c.scheduler.nextAssignment(for: id) }
            guard let run = c.scheduler.run(of: id) else { return nil }
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
        return c
    }

    /// Whether a round of the slow rule at `now` re-dials connection 3.
    static func redialsTheSlowOne(_ c: inout Coordinator, now: Double) -> Bool {
        c.judgeSlowConnections(now: now).contains { if case .remove(3) = $0 { true } else { false } }
    }
}

import Testing
@testable import Segget

/// The slow rule's common case for tests: connections 0-2 at 2.5 MiB/s and connection 3 at `slowRate`,
/// 256 MiB in 1 MiB chunks, all asked at 0 with their first bytes at the longest of `waits` (the
/// usual first-byte waits), sampled every 50 ms to `now`. The defaults are a short path with
/// connection 3 at 0.6 MiB/s.
enum FourConnectionsOneSlow {
    static let MiB = 1 << 20
    static let shortPath = [0.001, 0.01, 0.01, 0.01]

    /// The coordinator after the samples; `prepare` runs on it before the connections start. nil (an
    /// issue recorded) when a connection got no run.
    static func coordinator(url: String = "https://example.com/f", waits: [Double] = shortPath,
                            slowRate: Double = 0.6 * Double(MiB), now: Double,
                            prepare: (inout Coordinator) -> Void = { _ in }) -> Coordinator? {
        var config = Coordinator.Config()
        config.url = url
        var c = Coordinator(plan: ChunkPlan(totalLength: 256 * Int64(Self.MiB), chunkSize: Int64(Self.MiB)), connections: 4, config: config)
        c.firstByteWaits = waits
        let first = waits.max() ?? 0
        prepare(&c)
        for id in 0..<4 {
            if c.scheduler.run(of: id) == nil { _ = c.scheduler.nextAssignment(for: id) }
            guard let run = c.scheduler.run(of: id) else { Issue.record("no run for \(id)"); return nil }
            var conn = c.connections[id]
            conn.machine.start()
            _ = conn.machine.headArrived(refusal: nil)
            _ = conn.machine.bytesArrived(budgetAllows: true, now: first)
            conn.firstByteAt = first
            conn.requestStart = c.plan.byteRange(ofChunk: run.lowerBound).lowerBound
            conn.requestEnd = c.plan.byteRange(ofChunk: run.upperBound - 1).upperBound
            conn.chunkEnd = conn.requestStart + Int64(Self.MiB)
            conn.pos = conn.requestStart
            var t = first
            conn.sample(now: t)
            while t < now - 1e-9 {
                t += 0.05
                conn.transferBytes = Int64((t - first) * (id == 3 ? slowRate : 2.5 * Double(Self.MiB)))
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

import Testing
@testable import Segget

/// A connection whose answer the kernel holds unread is not judged slow: the server delivered it and
/// segget fell behind (a loop starved of CPU), so a re-dial would throw the bytes away and pay a
/// request for nothing. Through an emulated 400 Mbit/s WAN on 2 cores, most runs of a 256 MiB download
/// had rounds where connections held 74 KiB-2.5 MiB unread (Benchmarks/RESULTS.md, 2026-12-03 23:28).
@Suite struct UnreadBacklogTests {
    static let MiB = 1 << 20

    /// `FourConnectionsOneSlow` at 1.1 s, with `unread` bytes of connection 3's answer in the kernel:
    /// whether connection 3 is re-dialled.
    static func redialled(unread: Int?) -> Bool {
        let now = 1.1
        guard var c = FourConnectionsOneSlow.coordinator(now: now) else { return false }
        if let unread { c.noteUnread(3, bytes: unread) }
        return FourConnectionsOneSlow.redialsTheSlowOne(&c, now: now)
    }

    @Test func aConnectionWhoseAnswerWaitsUnreadIsNotRedialled() {
        #expect(Self.redialled(unread: nil), "the counter-case: re-dialled when nothing was told")
        #expect(Self.redialled(unread: 0), "re-dialled with nothing unread")
        #expect(Self.redialled(unread: 4 << 10), "a few segments unread are a loop that keeps up")
        #expect(!Self.redialled(unread: Coordinator.unreadBehind), "re-dialled with 64 KiB unread in the kernel")
        #expect(!Self.redialled(unread: 3 * Self.MiB), "re-dialled with 3 MiB unread in the kernel")
    }

    /// The shell tells the unread bytes before the passes whose `performed` judges, and only those.
    @Test func theCoreSaysWhichPassesJudge() {
        var config = Coordinator.Config()
        config.url = "https://example.com/f"
        let c = Coordinator(plan: ChunkPlan(totalLength: 64 * Int64(Self.MiB), chunkSize: Int64(Self.MiB)), connections: 2, config: config)
        var core = EngineCore(ranged: c)
        #expect(core.judgesSlow(passStartedAt: 0))
        _ = core.handle(.performed(passStartedAt: 0), now: 0)
        #expect(!core.judgesSlow(passStartedAt: Coordinator.slowJudgeInterval / 2))
        #expect(core.judgesSlow(passStartedAt: Coordinator.slowJudgeInterval))
        _ = core.handle(.unread(1, bytes: 5000), now: 0.01)
        #expect(core.connections[1].unread == 5000)
        _ = core.handle(.unread(7, bytes: 5000), now: 0.01)
    }
}

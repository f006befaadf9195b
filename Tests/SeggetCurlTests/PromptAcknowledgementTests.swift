import Foundation
import SeggetCurl
import SeggetTestServer
import Testing

/// The end of an answer is not held up by the client's delayed acknowledgement: a server whose
/// socket buffer filled before the last bytes (nginx with `sendfile` and `tcp_nopush`, on loopback)
/// sends them only once the bytes before them are acknowledged, and Linux holds an acknowledgement
/// back for 40 ms on a kept-alive connection that carries answer after answer.
@Suite(.serialized) struct PromptAcknowledgementTests {
    static let answers = 24

    /// `answers` GETs of 64 KiB, one after the other over one kept-alive connection, from a server
    /// that sends each answer's last 8 KiB only after the rest was acknowledged. Returns how long
    /// each tail waited at the server, and how many acknowledgements the multi handle sent at once.
    ///
    /// The transfers run on a thread of their own: the control below waits about a second, which
    /// on a 2-core runner would hold one of the two threads of the pool that other suites' async
    /// tests (a cancellation that must be delivered in time) run on.
    static func tailWaits(promptly: Bool) async throws -> (waits: [Double], prompt: Int, connections: Int) {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try blockingTailWaits(promptly: promptly) })
            }
            thread.start()
        }
    }

    static func blockingTailWaits(promptly: Bool) throws -> (waits: [Double], prompt: Int, connections: Int) {
        let server = try TestServer()
        defer { server.stop() }
        server.addResource(name: "f", bytes: (0..<(64 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try server.start()
        let multi = MultiHandle()
        multi.promptAcknowledging = promptly
        let handle = EasyHandle()
        let sink = ByteCounter()
        for _ in 0..<answers {
            handle.reset()
            handle.delegate = sink
            try handle.setURL(server.url("f") + "?acktail=8k")
            try handle.setNoSignal(true)
            #expect(try multi.performAlone(handle, cut: { false }) == .ok)
        }
        #expect(sink.bytes == answers << 16)
        let requests = server.requests
        return (requests.compactMap(\.tailWait), multi.promptAcknowledgements, Set(requests.map(\.remotePort)).count)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    @Test func eachAnswersTailWaitsNoLongerThanARoundTrip() async throws {
        let (waits, prompt, connections) = try await Self.tailWaits(promptly: true)
        #expect(connections == 1)
        #expect(waits.count == Self.answers)
        // The first answers come before Linux judges the connection interactive.
        let median = Self.median(Array(waits.dropFirst(4)))
        // Half the kernel's 40 ms delayed acknowledgement: what it tells apart, with room for a
        // loaded machine's scheduling (a prompt one is under a millisecond here).
        #expect(median < 0.02, "tails waited \(waits.map { Int($0 * 1000) }) ms")
        #expect(prompt >= Self.answers - 4)
    }

    /// The control: without the prompt acknowledgement the kernel holds it back (its delayed
    /// acknowledgement, 40 ms at least), which is what the test above would see if it broke.
    @Test func withoutThemTheKernelHoldsTheTailBack() async throws {
        let (waits, prompt, _) = try await Self.tailWaits(promptly: false)
        #expect(prompt == 0)
        let median = Self.median(Array(waits.dropFirst(4)))
        #expect(median > 0.02, "tails waited \(waits.map { Int($0 * 1000) }) ms")
    }

    @Test func onlyAnAnswerNearItsEndButNotAtItAsksForOne() {
        let window = EasyHandle.promptAcknowledgementWindow
        #expect(EasyHandle.promptAcknowledgementDue(length: 65536, received: 61440))
        #expect(EasyHandle.promptAcknowledgementDue(length: 65536, received: 0))
        #expect(!EasyHandle.promptAcknowledgementDue(length: 65536, received: 65536))
        #expect(!EasyHandle.promptAcknowledgementDue(length: -1, received: 100))
        #expect(!EasyHandle.promptAcknowledgementDue(length: 0, received: 0))
        #expect(EasyHandle.promptAcknowledgementDue(length: 1 << 30, received: (1 << 30) - window))
        #expect(!EasyHandle.promptAcknowledgementDue(length: 1 << 30, received: (1 << 30) - window - 1))
    }

    /// The multi handle's book follows its connections: one entry per open connection, none once a
    /// connection that may not be reused is closed.
    @Test func theBookOfSocketsFollowsTheConnections() throws {
        let server = try TestServer()
        defer { server.stop() }
        server.addResource(name: "f", bytes: [UInt8](repeating: 1, count: 1000))
        try server.start()
        let multi = MultiHandle()
        let handle = EasyHandle()
        try handle.setURL(server.url("f"))
        try handle.setNoSignal(true)
        #expect(try multi.performAlone(handle, cut: { false }) == .ok)
        #expect(multi.trackedSockets == 1)
        handle.reset()
        try handle.setURL(server.url("f"))
        try handle.setNoSignal(true)
        try handle.setFreshConnect(true)
        try handle.setForbidReuse(true)
        #expect(try multi.performAlone(handle, cut: { false }) == .ok)
        // The fresh connection was closed after its transfer; the first one stays in the cache.
        #expect(multi.trackedSockets == 1)
    }
}

/// Counts a transfer's bytes and keeps none (UnreadBytesTests too).
final class ByteCounter: TransferDelegate {
    var bytes = 0
    func transfer(_ handle: EasyHandle, received body: UnsafeRawBufferPointer) -> WriteDecision {
        bytes += body.count
        return .proceed
    }
    func transfer(_ handle: EasyHandle, receivedHeaderLine line: String, latin1: Bool) {}
}

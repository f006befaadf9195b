import Foundation
import SeggetCurl
import SeggetTestServer
import Testing

/// The multi handle watches the sockets libcurl names and hands it only what is ready
/// (`curl_multi_socket_action`, events.h): waits, wakes, and passes that never wait.
@Suite struct MultiHandleEventsTests {
    private static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = Date()
        try body()
        return Date().timeIntervalSince(start)
    }

    /// A loop that goes round again at once, pass after pass (a transfer ended, work of its own),
    /// still has its sockets looked at: without a wait in between, `perform` polls them itself.
    @Test func transfersGoOnThroughPassesThatNeverWait() throws {
        let server = try TestServer()
        var bodies: [[UInt8]] = []
        for k in 0..<3 {
            let body = (0..<(300_000 + k * 1_001)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ k) }
            bodies.append(body)
            server.addResource(name: "f\(k)", bytes: body)
        }
        try server.start()
        defer { server.stop() }

        let multi = MultiHandle()
        var sinks: [Sink] = []
        var handles: [EasyHandle] = []
        for k in 0..<3 {
            let e = try WriteDecisionTests.handle(server.url("f\(k)"))
            let sink = Sink()
            e.delegate = sink
            try multi.add(e)
            sinks.append(sink)
            handles.append(e)
        }
        var codes: [ObjectIdentifier: CurlCode] = [:]
        let start = Date()
        while codes.count < 3 && Date().timeIntervalSince(start) < 20 {
            try multi.perform()
            for (h, code) in multi.completed() {
                codes[ObjectIdentifier(h)] = code
                multi.remove(h)
            }
        }
        #expect(codes.count == 3)
        for (k, e) in handles.enumerated() {
            #expect(codes[ObjectIdentifier(e)] == .ok)
            #expect(sinks[k].bytes == bodies[k])
        }
    }

    /// A wake from another thread ends a wait at once; it is used up by that wait, so the next
    /// one lasts its whole timeout (a wake left unread would make every wait return at once).
    @Test func aWakeEndsOneWait() throws {
        let multi = MultiHandle()
        // `wakeUp` is the one call made from another thread.
        struct Waking: @unchecked Sendable { let multi: MultiHandle }
        let waking = Waking(multi: multi)
        let waker = Thread {
            Thread.sleep(forTimeInterval: 0.05)
            try? waking.multi.wakeUp()
        }
        let woken = try Self.seconds {
            waker.start()
            try multi.poll(timeoutMs: 5_000)
        }
        #expect(woken < 2)
        let idle = try Self.seconds { try multi.poll(timeoutMs: 200) }
        #expect(idle >= 0.15)
        // A wake sent before the wait ends it too.
        try multi.wakeUp()
        let early = try Self.seconds { try multi.poll(timeoutMs: 5_000) }
        #expect(early < 2)
    }

    /// A transfer just added is started by the next `perform` (libcurl's timer, due at once), and a
    /// wait while it runs returns when its socket is ready, long before the timeout.
    @Test func aTransferStartsAtTheNextPerformAndItsSocketEndsTheWait() throws {
        let server = try TestServer()
        server.addResource(name: "f", bytes: [UInt8](repeating: 9, count: 10_000))
        try server.start()
        defer { server.stop() }

        let multi = MultiHandle()
        let e = try WriteDecisionTests.handle(server.url("f"))
        let sink = Sink()
        e.delegate = sink
        try multi.add(e)
        var code: CurlCode?
        let took = try Self.seconds {
            for _ in 0..<200 where code == nil {
                try multi.perform()
                code = multi.completed().first?.code
                if code == nil { try multi.poll(timeoutMs: 5_000) }
            }
        }
        #expect(code == .ok)
        #expect(sink.bytes.count == 10_000)
        // A handful of waits, each ended by the socket: far less than one 5-second timeout.
        #expect(took < 4)
        multi.remove(e)
    }
}

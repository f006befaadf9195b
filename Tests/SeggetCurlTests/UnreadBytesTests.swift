import Foundation
import SeggetCurl
import SeggetTestServer
import Testing

/// `MultiHandle.unreadBytes(of:)` reads how much of an answer the kernel holds that no read has taken:
/// what tells a loop that fell behind from a slow server (`Coordinator.unreadBehind`).
@Suite(.serialized) struct UnreadBytesTests {
    /// A 4 MiB answer: performed until its first bytes came, then left unread for a while (the loop
    /// starved), then read to the end.
    @Test func bytesLeftUnreadAreCountedAndGoneOnceRead() throws {
        let server = try TestServer()
        defer { server.stop() }
        server.addResource(name: "f", bytes: (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        try server.start()
        let multi = MultiHandle()
        let handle = EasyHandle()
        let sink = ByteCounter()
        handle.delegate = sink
        try handle.setURL(server.url("f"))
        try handle.setNoSignal(true)
        #expect(multi.unreadBytes(of: handle) == nil, "not connected yet")
        #expect(multi.roundTrip(of: handle) == nil, "not connected yet")
        try multi.add(handle)
        defer { multi.remove(handle) }
        let deadline = Date().addingTimeInterval(10)
        while sink.bytes == 0, Date() < deadline {
            try multi.perform()
            try multi.poll(timeoutMs: 20)
        }
        #expect(sink.bytes > 0)
        // Not read for 0.3 s: the server's bytes pile up in the receive queue, as far as its window
        // lets them (about 128 KiB on a young connection; megabytes once autotuning grew it).
        Thread.sleep(forTimeInterval: 0.3)
        let held = multi.unreadBytes(of: handle) ?? 0
        #expect(held >= 64 << 10, "the kernel held \(held) bytes after 0.3 s unread")
        #expect(multi.roundTrip(of: handle) != nil, "the same socket's round trip, asked the same way")
        while multi.completed().isEmpty, Date() < deadline {
            try multi.perform()
            try multi.poll(timeoutMs: 20)
        }
        #expect(sink.bytes == 4 << 20)
        #expect(multi.unreadBytes(of: handle) ?? 0 == 0, "all of it read")
    }
}

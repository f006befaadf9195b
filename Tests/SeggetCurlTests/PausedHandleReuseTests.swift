import Foundation
import SeggetCurl
import Testing

/// A handle whose transfer was removed while paused, then reset for another range, must hand its next
/// transfer only that transfer's bytes. libcurl 7.88 over HTTP/2 with multiplexing kept the removed
/// transfer's held bytes (and, while another transfer read the shared connection, went on collecting
/// its stream's data) and handed them to the next transfer on the same handle at its first unpause:
/// `segget --http2 --max-speed` wrote another range's bytes into a chunk and exited 0 (about one run
/// in a hundred after an end-game race, against Caddy). Needs an HTTP/2 server over TLS:
/// `scripts/tests/servers.sh` runs this against its Caddy (`SEGGET_H2_URL`, the file's URL, and
/// `SEGGET_H2_FILE`, the same file on disk). nginx 1.22 does not show it: it stops sending a reset
/// stream's data at once.
@Suite(
    .enabled(
        if: getenv("SEGGET_H2_URL") != nil && getenv("SEGGET_H2_FILE") != nil, "needs an HTTP/2 server (servers.sh)"))
struct PausedHandleReuseTests {
    /// Counts the body, keeps its first `keep` bytes, and pauses once when `pauseAt` bytes are in.
    final class Receiver: TransferDelegate {
        var bytes: [UInt8] = []
        var count = 0
        var pauseAt: Int?
        let keep: Int
        init(pauseAt: Int?, keep: Int) {
            self.pauseAt = pauseAt
            self.keep = keep
        }

        func transfer(_ handle: EasyHandle, received body: UnsafeRawBufferPointer) -> WriteDecision {
            if let p = pauseAt, count >= p {
                pauseAt = nil
                return .pause
            }
            if bytes.count < keep { bytes.append(contentsOf: body.prefix(keep - bytes.count)) }
            count += body.count
            return .proceed
        }

        func transfer(_ handle: EasyHandle, receivedHeaderLine line: String, latin1: Bool) {}
    }

    static func configure(_ e: EasyHandle, _ url: String, range: String, _ r: Receiver) throws {
        try e.setURL(url)
        try e.setNoSignal(true)
        try e.setVerifyTLS(false)
        try e.setHTTPVersion(.http2OverTLS)
        do throws(CurlError) {
            try e.setReceiveBufferSize(512 << 10)
        } catch  where error.code == .easy(.badFunctionArgument) {
            // libcurl 7.88 keeps a handle's buffer after an HTTP/2 transfer (see TransferOptions).
        }
        try e.setRange(range)
        e.delegate = r
    }

    /// Drives `m` until `done` (at most 20 s): perform, then a wait of at most 10 ms.
    static func run(_ m: MultiHandle, until done: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(20)
        while !done() && Date() < deadline {
            try m.perform()
            try m.poll(timeoutMs: 10)
        }
    }

    @Test func aHandleRemovedWhilePausedStartsItsNextTransferClean() throws {
        let url = String(cString: getenv("SEGGET_H2_URL"))
        let file = try Data(contentsOf: URL(fileURLWithPath: String(cString: getenv("SEGGET_H2_FILE"))))
        let size = Int64(file.count)
        #expect(size >= 8 << 20)
        let m = MultiHandle()
        try m.setMultiplexing(true)

        // A transfer of the whole file keeps the one HTTP/2 connection read.
        let keeper = EasyHandle()
        let reader = Receiver(pauseAt: nil, keep: 0)
        try Self.configure(keeper, url, range: "0-", reader)
        try m.add(keeper)
        try Self.run(m) { reader.count >= 1 << 20 }

        // A range from the middle, paused after 100 KiB; the connection is read on (its stream's data
        // keeps coming), then the transfer is removed while paused, as a lost race's is.
        let e = EasyHandle()
        let lost = Receiver(pauseAt: 100 << 10, keep: 0)
        try Self.configure(e, url, range: "\(size / 2)-", lost)
        try m.add(e)
        try Self.run(m) { e.isPaused }
        #expect(e.isPaused)
        let readAtPause = reader.count
        var keeperDone = false
        try Self.run(m) {
            keeperDone = keeperDone || m.completed().contains { $0.handle === keeper }
            return keeperDone || reader.count >= readAtPause + (4 << 20)
        }
        #expect(try keeper.localPort() == e.localPort(), "both transfers on one HTTP/2 connection")
        m.remove(e)

        // The same handle, reset, for 1 MiB further on, paused once after 64 KiB (--max-speed).
        e.reset()
        let start = size * 3 / 4
        let want = start..<(start + (1 << 20))
        let next = Receiver(pauseAt: 64 << 10, keep: 1 << 20)
        try Self.configure(e, url, range: "\(want.lowerBound)-\(want.upperBound - 1)", next)
        try m.add(e)
        try Self.run(m) { e.isPaused }
        #expect(e.isPaused)
        try e.unpause()
        var code: CurlCode?
        try Self.run(m) {
            if let done = m.completed().first(where: { $0.handle === e }) { code = done.code }
            return code != nil
        }
        m.remove(e)
        m.remove(keeper)
        #expect(code == .ok)
        #expect(next.count == want.count, "the transfer of \(want.count) bytes delivered \(next.count)")
        let expected = [UInt8](file[Int(want.lowerBound)..<Int(want.upperBound)])
        let firstWrong = zip(next.bytes, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        // Compared apart: a failed #expect on two arrays of 1 MiB would compute their difference.
        let same = next.bytes == expected
        #expect(same, "its bytes differ from the file's from byte \(firstWrong.map(String.init) ?? "?")")
    }
}

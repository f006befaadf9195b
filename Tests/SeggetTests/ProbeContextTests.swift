import SeggetCurl
import SeggetSystem
import Testing

@testable import Segget

/// The probe's body: kept whole and byte for byte, in whichever memory it goes.
@Suite struct ProbeContextTests {
    private func answer(total: Int, brings: Int, limit: Int, pieces: [Int]) -> ProbeContext {
        let ctx = ProbeContext(limit: limit)
        let easy = EasyHandle()
        for line in [
            "HTTP/1.1 206 Partial Content\r\n", "Content-Length: \(brings)\r\n",
            "Content-Range: bytes 0-\(brings - 1)/\(total)\r\n", "\r\n",
        ] {
            ctx.transfer(easy, receivedHeaderLine: line, latin1: false)
        }
        var offset = 0
        for n in pieces {
            let bytes = (offset..<offset + n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
            #expect(bytes.withUnsafeBytes { ctx.transfer(easy, received: $0) } == .proceed)
            offset += n
        }
        return ctx
    }

    private func expected(_ n: Int) -> ProbeBytes { ProbeBytes((0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }) }

    /// A 1 MiB file the answer brings whole (a prefilled buffer), a file larger than the answer
    /// (an array), a small one (an array): the same bytes either way.
    @Test(arguments: [(1 << 20, 1 << 20), (8 << 20, 1 << 20), (100_000, 100_000), (600_000, 600_000)])
    func keepsEveryByte(total: Int, brings: Int) {
        let ctx = answer(total: total, brings: brings, limit: 1 << 20, pieces: [65_536, 3, brings - 65_539])
        #expect(ctx.bodyCount == brings)
        #expect(ctx.body == expected(brings))
    }

    /// An answer that brings more than its head said still keeps every byte (up to the limit).
    @Test func keepsBytesBeyondWhatTheHeadSaid() {
        let ctx = answer(total: 600_000, brings: 600_000, limit: 1 << 20, pieces: [300_000, 300_000, 1000])
        #expect(ctx.bodyCount == 601_000)
        #expect(ctx.body == expected(601_000))
    }
}

/// A probe's bytes are a value: bytes that reach the same buffer later do not change them.
@Suite struct ProbeBytesTests {
    @Test func aValueKeepsTheBytesItWasMadeWith() {
        let buffer = FilledBuffer(capacity: 1 << 20)
        let first = [UInt8](repeating: 1, count: 1000)
        #expect(first.withUnsafeBytes { buffer.append($0) })
        let value = ProbeBytes(buffer)
        #expect([UInt8](repeating: 2, count: 500).withUnsafeBytes { buffer.append($0) })
        #expect(value.count == 1000)
        #expect(value == ProbeBytes(first))
        #expect(ProbeBytes(buffer).count == 1500)
    }
}

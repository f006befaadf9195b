import Testing
@testable import Segget

/// What the first request of a download of several connections asks for, over HTTP and over TLS
/// (set up only: nothing is sent).
@Suite struct ProbeRequestTests {
    func prober() -> Prober {
        var p = Prober(options: TransferOptions(), firstBytes: 1 << 20)
        p.holdsTransfer = true
        p.holdsAtHead = true
        return p
    }

    @Test func overHTTPTheProbeIsHeldAtItsHead() throws {
        let r = try prober().makeRequest("http://198.18.0.2/f.bin", options: TransferOptions(), holding: true)
        #expect(r.holding && r.holdsAtHead)
        #expect(r.context.limit == 1 << 20)
    }

    /// Over TLS the head would come a round trip late inside a 16 KiB record (see
    /// `Prober.tlsFirstAnswerBytes`): a small whole answer instead, not held.
    @Test func overTLSTheProbeAsksForASmallWholeAnswer() throws {
        for url in ["https://198.18.0.2/f.bin", "HTTPS://example.com/f.bin"] {
            let r = try prober().makeRequest(url, options: TransferOptions(), holding: true)
            #expect(!r.holding, "\(url)")
            #expect(r.context.limit == Prober.tlsFirstAnswerBytes, "\(url)")
            #expect(!r.context.holdsAtLimit)
        }
    }

    /// With HTTP/2 offered the head comes in a frame of its own, in the first round trip: held at
    /// it, so that a file one connection downloads takes one request.
    @Test func overTLSWithHTTP2OfferedTheProbeIsHeldAtItsHead() throws {
        var options = TransferOptions()
        options.http2 = true
        var p = Prober(options: options, firstBytes: 1 << 20)
        p.holdsTransfer = true
        p.holdsAtHead = true
        let r = try p.makeRequest("https://198.18.0.2/f.bin", options: options, holding: true)
        #expect(r.holding && r.holdsAtHead)
        #expect(r.context.limit == 1 << 20)
        #expect(r.context.holdsAtLimit)
    }

    /// A download whose host the run's other downloads share (`smallFirstAnswerOverTLS` off) asks
    /// for the whole file over TLS too: its other connections do not start together on the answer.
    @Test func overTLSOnASharedHostTheProbeIsHeldAtItsHead() throws {
        var p = prober()
        p.smallFirstAnswerOverTLS = false
        let r = try p.makeRequest("https://198.18.0.2/f.bin", options: TransferOptions(), holding: true)
        #expect(r.holding && r.holdsAtHead)
        #expect(r.context.limit == 1 << 20)
    }

    @Test func aDownloadOfOneConnectionStillHoldsItsProbeOverTLS() throws {
        var p = prober()
        p.holdsAtHead = false
        let r = try p.makeRequest("https://198.18.0.2/f.bin", options: TransferOptions(), holding: true)
        #expect(r.holding)
        #expect(r.context.limit == 1 << 20)
    }
}

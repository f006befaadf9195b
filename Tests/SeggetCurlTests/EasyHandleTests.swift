import SeggetCurl
import SeggetTestServer
import Testing

/// Setters and info report libcurl's refusals; nothing is discarded.
@Suite struct EasyHandleSetterTests {
    @Test func aValueLibcurlRefusesIsReportedWithTheOptionsName() {
        let e = EasyHandle()
        #expect(throws: CurlError(.badFunctionArgument, "CURLOPT_MAXREDIRS")) { try e.setMaxRedirects(-2) }
        #expect(throws: CurlError(.badFunctionArgument, "CURLOPT_LOW_SPEED_TIME")) {
            try e.setLowSpeedLimit(bytesPerSecond: 1, seconds: -1)
        }
    }

    @Test func anUnknownSchemeInTheProtocolListIsAnError() {
        #expect(throws: CurlError.self) { try EasyHandle().setAllowedProtocols("http,no-such-scheme") }
    }

    @Test func validValuesAreAccepted() throws {
        let e = EasyHandle()
        try e.setURL("http://127.0.0.1:1/x")
        try e.setRange(0..<100)
        try e.setRange(nil)
        try e.setFreshConnect(true)
        try e.setLocalPort(40000, tries: 10)
        try e.setTimeout(milliseconds: 1000)
        try e.setHTTPVersion(.http1_1)
        try e.setHeaders(["X-A: 1", "X-B: 2"])
        try e.setHeaders([])
        try e.setCloseSocketsOnExec()
        e.reset()
        try e.setURL("http://127.0.0.1:1/y")
    }

    @Test func anOptionTooNewForLibcurlSaysSo() {
        let e = CurlError(CurlCode.unknownOption, "CURLOPT_SOMETHING_NEW")
        #expect(e.description.contains("CURLOPT_SOMETHING_NEW is not known to libcurl"))
        #expect(CurlError(.badFunctionArgument, "CURLOPT_RANGE").description.contains("refused CURLOPT_RANGE"))
    }

    @Test func transientCodesAreClassified() {
        #expect(CurlCode.couldNotConnect.isTransient)
        #expect(CurlCode.partialFile.isTransient)
        #expect(!CurlCode.writeError.isTransient)
        #expect(!CurlCode.urlMalformed.isTransient)
    }

    /// The failures met on the way are said in a user's words, not libcurl's.
    @Test func commonFailuresHavePlainWords() {
        #expect(CurlCode.partialFile.plainWords == "the connection closed before the end of the answer")
        #expect(CurlCode.receiveError.plainWords?.hasPrefix("the connection broke while receiving") == true)
        for code in [CurlCode.partialFile, .receiveError, CurlCode(rawValue: 52), CurlCode(rawValue: 55), CurlCode(rawValue: 92)] {
            let words = code.plainWords ?? ""
            #expect(!words.isEmpty && words != code.description, "\(code.rawValue)")
        }
        #expect(CurlCode.writeError.plainWords == nil && CurlCode.ok.plainWords == nil)
    }

    @Test func locationsResolveAgainstTheirBase() {
        #expect(resolveURL("/b?q=1", against: "http://h/a/x") == "http://h/b?q=1")
        #expect(resolveURL("c", against: "http://h/a/x") == "http://h/a/c")
        #expect(resolveURL("ftp://o/f", against: "http://h/") == "ftp://o/f")
    }
}

/// What a delegate decides about body bytes becomes what libcurl does, against a local server.
@Suite struct WriteDecisionTests {
    static let body: [UInt8] = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }

    static func server() throws -> TestServer {
        let s = try TestServer()
        s.addResource(name: "f", bytes: body)
        try s.start()
        return s
    }

    static func handle(_ url: String, receiveBuffer: Int = 16 << 10) throws -> EasyHandle {
        let e = EasyHandle()
        try e.setURL(url)
        try e.setNoSignal(true)
        try e.setReceiveBufferSize(receiveBuffer)
        return e
    }

    @Test func pausedThenResumedDeliversEveryByte() throws {
        let server = try Self.server()
        defer { server.stop() }
        let e = try Self.handle(server.url("f"))
        let sink = Sink(pauseEvery: 3)
        e.delegate = sink
        let client = Recorder()
        let driver = TransferDriver()
        try driver.start(e, for: client)
        var resumes = 0
        try driver.run(maxWaitMs: 5) {
            if e.isPaused {
                resumes += 1
                try e.unpause()
            }
            return !client.completed.isEmpty
        }
        #expect(client.completed.map(\.code) == [.ok])
        #expect(sink.pauses > 3)
        #expect(resumes > 0)
        #expect(sink.bytes == Self.body)
        #expect(try e.responseCode() == 200)
        #expect(try e.bytesReceived() == Int64(Self.body.count))
        #expect(try e.contentLength() == Int64(Self.body.count))
        #expect(try e.localPort() > 0)
        #expect(try e.effectiveURL() == server.url("f"))
    }

    @Test func abortEndsTheTransferWithAWriteError() throws {
        let server = try Self.server()
        defer { server.stop() }
        let e = try Self.handle(server.url("f"))
        let sink = Sink(abortAfter: 2)
        e.delegate = sink
        #expect(e.perform() == .writeError)
        #expect(sink.calls == 3)
        #expect(sink.bytes.count < Self.body.count)
        #expect(Array(Self.body.prefix(sink.bytes.count)) == sink.bytes)

        // The same on a multi handle, through the driver.
        let again = try Self.handle(server.url("f"))
        let aborter = Sink(abortAfter: 0)
        again.delegate = aborter
        let driver = TransferDriver()
        let code = try driver.perform(again) { false }
        #expect(code == .writeError)
        #expect(aborter.calls == 1 && aborter.bytes.isEmpty)
        #expect(driver.multi.count == 0)
    }

    @Test func headerLinesReachTheDelegate() throws {
        let server = try Self.server()
        defer { server.stop() }
        let e = try Self.handle(server.url("f"))
        try e.setRange(10..<20)
        let sink = Sink()
        e.delegate = sink
        #expect(e.perform() == .ok)
        #expect(sink.headerLines.first?.hasPrefix("HTTP/1.1 206") == true)
        #expect(sink.headerLines.contains { $0.lowercased().hasPrefix("content-range: bytes 10-19/") })
        #expect(sink.headerLines.last == "\r\n")
        #expect(sink.bytes == Array(Self.body[10..<20]))
    }
}

/// Receives a transfer's bytes, pausing or aborting on schedule.
final class Sink: TransferDelegate {
    var bytes: [UInt8] = []
    var headerLines: [String] = []
    var calls = 0
    var pauses = 0
    let pauseEvery: Int?
    let abortAfter: Int?
    init(pauseEvery: Int? = nil, abortAfter: Int? = nil) {
        self.pauseEvery = pauseEvery
        self.abortAfter = abortAfter
    }

    func transfer(_ handle: EasyHandle, received body: UnsafeRawBufferPointer) -> WriteDecision {
        calls += 1
        if let abortAfter, calls > abortAfter { return .abort }
        if let pauseEvery, calls % pauseEvery == 0 {
            // These bytes are not taken: libcurl hands them over again after `unpause()`.
            pauses += 1
            return .pause
        }
        bytes.append(contentsOf: body)
        return .proceed
    }

    func transfer(_ handle: EasyHandle, receivedHeaderLine line: String, latin1: Bool) { headerLines.append(line) }
}

/// A client that records its completions and ticks.
final class Recorder: TransferClient {
    var completed: [(handle: EasyHandle, code: CurlCode)] = []
    var ticks = 0
    func transferDriver(_ driver: TransferDriver, completed handle: EasyHandle, with code: CurlCode) {
        #expect(driver.owner(of: handle) == nil)
        #expect(!driver.multi.contains(handle))
        completed.append((handle, code))
    }
    func transferDriverTick(_ driver: TransferDriver, now: Double) { ticks += 1 }
}

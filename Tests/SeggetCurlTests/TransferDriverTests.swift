import SeggetCurl
import SeggetTestServer
import Testing

/// Several clients share one driver; each hears about its own transfers only.
@Suite struct TransferDriverTests {
    @Test func completionsGoBackToTheClientThatStartedTheTransfer() throws {
        let server = try TestServer()
        var bodies: [String: [UInt8]] = [:]
        for k in 0..<6 {
            let body = (0..<(100_000 + k * 7_001)).map { UInt8(truncatingIfNeeded: $0 &+ k * 13) }
            bodies["f\(k)"] = body
            server.addResource(name: "f\(k)", bytes: body)
        }
        try server.start()
        defer { server.stop() }

        let driver = TransferDriver()
        let a = Recorder(), b = Recorder()
        driver.register(a, tickInterval: 0)
        driver.register(b, tickInterval: 0)
        var sinks: [ObjectIdentifier: (name: String, sink: Sink)] = [:]
        var started: [ObjectIdentifier: ObjectIdentifier] = [:]  // handle → client
        var handles: [EasyHandle] = []
        for k in 0..<6 {
            let e = try WriteDecisionTests.handle(server.url("f\(k)"))
            let sink = Sink()
            e.delegate = sink
            let client: Recorder = k % 2 == 0 ? a : b
            try driver.start(e, for: client)
            #expect(driver.owner(of: e) === client)
            sinks[ObjectIdentifier(e)] = ("f\(k)", sink)
            started[ObjectIdentifier(e)] = ObjectIdentifier(client)
            handles.append(e)
        }
        #expect(driver.handles(of: a).count == 3)
        #expect(driver.handles(of: b).count == 3)
        try driver.run(maxWaitMs: 20) { a.completed.count + b.completed.count == 6 }

        #expect(a.completed.count == 3)
        #expect(b.completed.count == 3)
        for (client, record) in [(a, a.completed), (b, b.completed)] {
            for (handle, code) in record {
                #expect(code == .ok)
                #expect(started[ObjectIdentifier(handle)] == ObjectIdentifier(client))
                let (name, sink) = try #require(sinks[ObjectIdentifier(handle)])
                #expect(sink.bytes == bodies[name])
            }
        }
        #expect(Set((a.completed + b.completed).map { ObjectIdentifier($0.handle) }) == Set(handles.map(ObjectIdentifier.init)))
        #expect(a.ticks > 0 && b.ticks > 0)
        #expect(driver.multi.count == 0)
    }

    @Test func aClientMayStartItsNextTransferFromACompletion() throws {
        let server = try TestServer()
        let body = [UInt8](repeating: 7, count: 50_000)
        server.addResource(name: "f", bytes: body)
        try server.start()
        defer { server.stop() }

        let driver = TransferDriver()
        let client = try Chain(driver: driver, url: server.url("f"), times: 4)
        try client.startNext()
        try driver.run(maxWaitMs: 20) { client.done }
        #expect(client.codes == [.ok, .ok, .ok, .ok])
        #expect(client.sink.bytes.count == 4 * body.count)
        // One kept-alive connection served all four requests.
        #expect(server.connectionsAccepted == 1)
    }

    @Test func unregisteringRemovesTheClientsTransfersWithoutCompletions() throws {
        let server = try TestServer()
        server.addResource(name: "f", bytes: [UInt8](repeating: 1, count: 1000))
        try server.start()
        defer { server.stop() }

        let driver = TransferDriver()
        let gone = Recorder(), stays = Recorder()
        driver.register(gone, tickInterval: 0)
        let e1 = try WriteDecisionTests.handle(server.url("f"))
        let e2 = try WriteDecisionTests.handle(server.url("f"))
        try driver.start(e1, for: gone)
        try driver.start(e2, for: stays)
        driver.unregister(gone)
        #expect(driver.handles(of: gone).isEmpty)
        #expect(!driver.multi.contains(e1))
        try driver.run(maxWaitMs: 20) { !stays.completed.isEmpty }
        #expect(gone.completed.isEmpty)
        #expect(stays.completed.map(\.code) == [.ok])
    }

    @Test func clientsTickAtTheirOwnIntervals() throws {
        let driver = TransferDriver()
        let slow = Recorder(), everyPass = Recorder()
        driver.register(slow, tickInterval: 0.05)
        driver.register(everyPass, tickInterval: 0)
        let start = driver.clock()
        try driver.run(maxWaitMs: 10) { driver.clock() - start >= 0.3 }
        // About six ticks of 50 ms in 300 ms (a loaded machine may lose some); a pass every 10 ms at most.
        #expect((2...7).contains(slow.ticks))
        #expect(everyPass.ticks > slow.ticks)
    }

    @Test func theMultiHandleKeepsItsHandlesUntilRemoved() throws {
        let multi = MultiHandle()
        weak var weakHandle: EasyHandle?
        do {
            let e = EasyHandle()
            try e.setURL("http://127.0.0.1:1/")
            weakHandle = e
            try multi.add(e)
        }
        let e = try #require(weakHandle)
        #expect(multi.contains(e))
        multi.remove(e)
        multi.remove(e)  // a second removal does nothing
        #expect(multi.count == 0)
    }
}

/// Starts the same request again from each completion, `times` times.
final class Chain: TransferClient {
    let driver: TransferDriver
    let handle: EasyHandle
    let sink = Sink()
    let times: Int
    var codes: [CurlCode] = []
    var done: Bool { codes.count == times }

    init(driver: TransferDriver, url: String, times: Int) throws {
        self.driver = driver
        self.times = times
        handle = try WriteDecisionTests.handle(url)
        handle.delegate = sink
    }

    func startNext() throws { try driver.start(handle, for: self) }

    func transferDriver(_ driver: TransferDriver, completed handle: EasyHandle, with code: CurlCode) {
        codes.append(code)
        if !done { #expect(throws: Never.self) { try self.startNext() } }
    }
}

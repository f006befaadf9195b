import Glibc
import NIOCore
import Synchronization
import Testing

@testable import SeggetRPC

/// The port a server reported once bound.
final class PortBox: Sendable {
    let port = Mutex<Int?>(nil)
}

/// Lines a server logged.
final class LogLines: Sendable {
    let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

/// Reads one byte from `fd` with a receive timeout: what `recv` answered (0 when the server closed
/// the connection) and how long it took.
func awaitClose(_ fd: Int32, timeoutSeconds: Int) -> (read: Int, after: Duration) {
    var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var byte: UInt8 = 0
    let started = ContinuousClock.now
    let n = recv(fd, &byte, 1, 0)
    return (n, ContinuousClock.now - started)
}

/// A real RPCServer on a loopback port with the echo handler, for one test.
struct RunningServer {
    let server: RPCServer
    let port: Int
    let task: Task<Void, any Error>
    let log: LogLines

    /// A `Host` value the server answers.
    var host: String { "127.0.0.1:\(port)" }

    init(
        maxRequestBytes: Int = 4096, idleTimeout: TimeAmount = .seconds(120), maxConnections: Int = 64,
        hostPolicy: HostPolicy = .loopback, alsoHost: String? = nil, unbound: LogLines? = nil,
        throttle: AuthThrottle.Settings = .init(), handler: any RPCMethodHandler = EchoHandler(), hub: NotificationHub = NotificationHub()
    ) async throws {
        let log = LogLines()
        let server = RPCServer(
            processor: RPCProcessor(secret: "k", handler: handler), hub: hub,
            rpcGuard: RPCGuard(hostPolicy: hostPolicy, throttle: throttle, log: { log.append($0) }), host: "127.0.0.1",
            alsoHost: alsoHost, port: 0, maxRequestBytes: maxRequestBytes, idleTimeout: idleTimeout,
            maxConnections: maxConnections)
        self.log = log
        let box = PortBox()
        task = Task {
            try await server.run(ready: { p in box.port.withLock { $0 = p } }, unbound: { h, e in unbound?.append("\(h): \(e)") })
        }
        var port: Int?
        // Up to 30 s: a loaded machine may take a while to run the server's task; usually 10 ms.
        let deadline = ContinuousClock.now + .seconds(30)
        while port == nil && ContinuousClock.now < deadline {
            port = box.port.withLock { $0 }
            if port == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        self.server = server
        self.port = try #require(port)
    }

    func stop() async {
        server.close()
        _ = await task.result
    }

    /// Sends raw bytes, returns everything the server sent until it closed.
    func raw(_ request: String) throws -> String {
        let fd = try RPCClient(port: port).connectSocket().descriptor
        defer { close(fd) }
        var bytes = Array(request.utf8)
        _ = bytes.withUnsafeMutableBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// A handler whose `stop` method stops the server from inside the call, as the daemon's shutdown does,
/// and returns only after the stop has closed what it closes at once.
final class StopHook: RPCMethodHandler {
    let server = Mutex<RPCServer?>(nil)

    func handle(_ call: RPCCall) throws(RPCError) -> JSON {
        guard call.method == "stop" else { throw .methodNotFound(call.method) }
        server.withLock { $0 }?.close()
        usleep(100_000)
        return .string("OK")
    }
}

/// Answers `big` with 8,000 bytes, counting the calls it answered.
final class BigAnswers: RPCMethodHandler, Sendable {
    let answered = Mutex(0)

    func handle(_ call: RPCCall) throws(RPCError) -> JSON {
        guard call.method == "big" else { throw .methodNotFound(call.method) }
        answered.withLock { $0 += 1 }
        return .string(String(repeating: "y", count: 8000))
    }
}

@Suite(.serialized) struct RPCServerTests {
    /// The daemon listens on [::1] as well as 127.0.0.1, on one port, as aria2c does (exploratory run
    /// 3: only 127.0.0.1); a second address that cannot be bound is reported and the first serves.
    @Test func aSecondAddressServesOnTheSamePort() async throws {
        let s = try await RunningServer(alsoHost: "::1")
        #expect(try RPCClient(host: "127.0.0.1", port: s.port, secret: "k").call("echo", [.int(4)]) == .array([.int(4)]))
        #expect(try RPCClient(host: "::1", port: s.port, secret: "k").call("echo", [.int(6)]) == .array([.int(6)]))
        await s.stop()

        let unbound = LogLines()
        let t = try await RunningServer(alsoHost: "192.0.2.1", unbound: unbound)  // TEST-NET-1: no such address here
        #expect(try RPCClient(host: "127.0.0.1", port: t.port, secret: "k").call("echo", [.int(7)]) == .array([.int(7)]))
        #expect(unbound.all.count == 1 && unbound.all.first?.hasPrefix("192.0.2.1: ") == true, "\(unbound.all)")
        await t.stop()
    }

    @Test func callsOverHTTPWithTheClient() async throws {
        let s = try await RunningServer()
        #expect(
            try RPCClient(port: s.port, secret: "k").call("echo", [.int(1), .string("a")])
                == .array([.int(1), .string("a")]))
        do {
            _ = try RPCClient(port: s.port, secret: "wrong").call("echo")
            Issue.record("a wrong secret was accepted")
        } catch {
            guard case .remote(let e) = error else { Issue.record("unexpected \(error)"); return }
            #expect(e == .unauthorized)
        }
        await s.stop()
    }

    /// A head NIO's decoder cannot read (a GET's query past its limit, a malformed line) gets 400 and
    /// the end of the connection at once, as the 400's `Connection: close` says: it stayed open until
    /// the idle timeout (30 s here).
    @Test func anUnreadableHeadIsAnsweredAndTheConnectionEnds() async throws {
        let s = try await RunningServer(idleTimeout: .seconds(30))
        for request in [
            "GET /jsonrpc?params=\(String(repeating: "x", count: 200_000)) HTTP/1.1\r\nHost: \(s.host)\r\n\r\n",
            "GET /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nno colon here\r\n\r\n",
        ] {
            let started = ContinuousClock.now
            let answer = try s.raw(request)
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer.prefix(200))")
            #expect(ContinuousClock.now - started < .seconds(10))
        }
        // The server goes on answering.
        #expect(try RPCClient(port: s.port, secret: "k").call("echo", [.int(2)]) == .array([.int(2)]))
        await s.stop()
    }

    @Test func corsPreflightAndHeaders() async throws {
        let s = try await RunningServer()
        let pre = try s.raw(
            "OPTIONS /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nOrigin: http://ui.example\r\nAccess-Control-Request-Method: POST\r\n"
                + "Access-Control-Request-Headers: content-type\r\nConnection: close\r\n\r\n")
        #expect(pre.hasPrefix("HTTP/1.1 200"))
        #expect(pre.lowercased().contains("access-control-allow-origin: *"))
        #expect(pre.lowercased().contains("access-control-allow-methods: post"))
        #expect(pre.lowercased().contains("access-control-allow-headers: content-type"))
        let body = #"{"id":1,"method":"echo","params":["token:k"]}"#
        let post = try s.raw(
            "POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
                + body)
        #expect(post.hasPrefix("HTTP/1.1 200"))
        #expect(post.lowercased().contains("access-control-allow-origin: *"))
        #expect(post.hasSuffix(#"{"id":1,"jsonrpc":"2.0","result":[]}"#))
        await s.stop()
    }

    @Test func oversizeAndWrongPaths() async throws {
        let s = try await RunningServer(maxRequestBytes: 100)
        let declared = try s.raw("POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nContent-Length: 1000000000\r\n\r\n")
        #expect(declared.hasPrefix("HTTP/1.1 413"))
        let body = String(repeating: "x", count: 500)
        let sent = try s.raw(
            "POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nTransfer-Encoding: chunked\r\n\r\n1f4\r\n\(body)\r\n0\r\n\r\n"
        )
        #expect(sent.hasPrefix("HTTP/1.1 413"))
        #expect(
            try s.raw("POST /other HTTP/1.1\r\nHost: \(s.host)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .hasPrefix(
                    "HTTP/1.1 404"))
        let put = try s.raw("PUT /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        #expect(put.hasPrefix("HTTP/1.1 405") && put.lowercased().contains("allow: post, get, options"), "\(put)")
        // Still serving after all that.
        #expect(try RPCClient(port: s.port, secret: "k").call("echo") == .array([]))
        await s.stop()
    }

    /// aria2's GET form through the real server: a call, JSONP, a batch, Invalid Request, a wrong
    /// token (which the throttle counts as a POST's would be), and a callback that is not a name.
    @Test func callsByGet() async throws {
        let s = try await RunningServer()
        func get(_ query: String) throws -> (head: String, body: String) {
            let answer = try s.raw("GET /jsonrpc?\(query) HTTP/1.1\r\nHost: \(s.host)\r\nConnection: close\r\n\r\n")
            guard let gap = answer.firstRange(of: "\r\n\r\n") else { return (answer.lowercased(), "") }
            return (answer[..<gap.lowerBound].lowercased(), String(answer[gap.upperBound...]))
        }
        let params = "WyJ0b2tlbjprIiwxXQ%3D%3D"  // ["token:k",1]
        let call = try get("method=echo&id=abc&params=\(params)")
        #expect(call.head.hasPrefix("http/1.1 200") && call.head.contains("content-type: application/json-rpc"), "\(call.head)")
        #expect(call.head.contains("cache-control: no-cache"))
        #expect(call.body == #"{"id":"abc","jsonrpc":"2.0","result":[1]}"#, "\(call.body)")
        let jsonp = try get("method=echo&id=7&params=\(params)&jsoncallback=ui.cb_1")
        #expect(jsonp.head.contains("content-type: text/javascript"), "\(jsonp.head)")
        #expect(jsonp.body == #"ui.cb_1({"id":"7","jsonrpc":"2.0","result":[1]})"#, "\(jsonp.body)")
        // [{"method":"echo","id":1,"params":["token:k"]},{"method":"echo","id":2,"params":["token:k",2]}]
        let batch = "W3sibWV0aG9kIjoiZWNobyIsImlkIjoxLCJwYXJhbXMiOlsidG9rZW46ayJdfSx7Im1ldGhvZCI6ImVjaG8iLCJpZCI6MiwicGFyYW1zIjpbInRva2VuOmsiLDJdfV0="
        #expect(try get("params=\(batch)").body == #"[{"id":1,"jsonrpc":"2.0","result":[]},{"id":2,"jsonrpc":"2.0","result":[2]}]"#)
        let invalid = #"{"id":null,"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request."}}"#
        // An error is sent with 400, as aria2 sends it (a batch with 200, whatever its calls answered).
        for query in ["", "method=echo&params=\(params)", "method=echo&id=1&params=@@"] {
            let answer = try get(query)
            #expect(answer.body == invalid && answer.head.hasPrefix("http/1.1 400"), "\(query): \(answer)")
        }
        #expect(try get("jsoncallback=f").body == "f(\(invalid))")
        let refused = try get("method=echo&id=1")
        #expect(refused.body == #"{"id":"1","jsonrpc":"2.0","error":{"code":1,"message":"Unauthorized"}}"#)
        #expect(refused.head.hasPrefix("http/1.1 400"))
        #expect(try get("params=W3sibWV0aG9kIjoiZWNobyIsImlkIjoxfV0=").head.hasPrefix("http/1.1 200"))  // [{"method":"echo","id":1}]
        #expect(try get("method=echo&id=1&params=YQ").head.hasPrefix("http/1.1 500"))  // "a": not JSON
        let bad = try get("method=echo&id=1&params=\(params)&jsoncallback=a%3Balert(1)")
        #expect(bad.head.hasPrefix("http/1.1 400") && bad.body.contains("jsoncallback"), "\(bad)")
        #expect(!bad.body.contains("alert"))
        await s.stop()
    }

    @Test func keepAliveServesSeveralRequestsOnOneConnection() async throws {
        let s = try await RunningServer()
        let one = #"{"id":1,"method":"echo","params":["token:k",1]}"#
        let two = #"{"id":2,"method":"echo","params":["token:k",2]}"#
        let reply = try s.raw(
            "POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nContent-Length: \(one.utf8.count)\r\n\r\n" + one
                + "POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nContent-Length: \(two.utf8.count)\r\nConnection: close\r\n\r\n"
                + two)
        #expect(reply.contains(#"{"id":1,"jsonrpc":"2.0","result":[1]}"#))
        #expect(reply.contains(#"{"id":2,"jsonrpc":"2.0","result":[2]}"#))
        await s.stop()
    }

    @Test func stopClosesAnIdleKeepAliveConnection() async throws {
        let s = try await RunningServer()
        let fd = try RPCClient(port: s.port).connectSocket().descriptor
        defer { close(fd) }
        let started = ContinuousClock.now
        await s.stop()
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    /// The daemon's `aria2.shutdown`: the stop (`close()`) begins inside the call, before its answer is
    /// written, and the caller must still get the answer, over HTTP keep-alive and over a WebSocket.
    @Test(arguments: [false, true]) func aCallThatStopsTheServerIsStillAnswered(webSocket: Bool) async throws {
        let hook = StopHook()
        let s = try await RunningServer(handler: hook)
        hook.server.withLock { $0 = s.server }
        let call = #"{"id":3,"method":"stop","params":["token:k"]}"#
        let started = ContinuousClock.now
        if webSocket {
            let ws = try RawWebSocket(port: s.port, host: s.host)
            defer { ws.close() }
            #expect(ws.receive().hasPrefix("HTTP/1.1 101"))
            #expect(ws.call(call) == #"{"id":3,"jsonrpc":"2.0","result":"OK"}"#)
        } else {
            let reply = try s.raw(
                "POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nContent-Length: \(call.utf8.count)\r\n\r\n" + call)
            #expect(reply.hasPrefix("HTTP/1.1 200"))
            #expect(reply.hasSuffix(#"{"id":3,"jsonrpc":"2.0","result":"OK"}"#))
        }
        _ = await s.task.result
        // The answered connection closed itself: the stop did not wait for the grace period.
        #expect(ContinuousClock.now - started < .seconds(4))
    }

    @Test func silentHTTPConnectionIsClosedButAWebSocketIsNot() async throws {
        let s = try await RunningServer(idleTimeout: .milliseconds(300))
        let quiet = try RPCClient(port: s.port).connectSocket().descriptor
        defer { close(quiet) }
        let (read, after) = awaitClose(quiet, timeoutSeconds: 5)
        #expect(read == 0)  // closed by the server, not timed out here
        #expect(after < .seconds(3))
        var tv = timeval(tv_sec: 5, tv_usec: 0)

        let ws = try RPCClient(port: s.port).connectSocket().descriptor
        defer { close(ws) }
        _ = setsockopt(ws, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let handshake = Array(
            ("GET /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8)
        _ = handshake.withUnsafeBytes { send(ws, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { recv(ws, $0.baseAddress, $0.count, 0) }
        #expect(String(decoding: buffer[0..<max(0, n)], as: UTF8.self).hasPrefix("HTTP/1.1 101"))
        try await Task.sleep(for: .milliseconds(900))  // three idle timeouts
        // One masked text frame carrying a call; the reply frame must come back.
        let payload = Array(#"{"id":5,"method":"echo","params":["token:k",7]}"#.utf8)
        let mask: [UInt8] = [1, 2, 3, 4]
        var frame: [UInt8] = [0x81, 0x80 | UInt8(payload.count)] + mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        _ = frame.withUnsafeBytes { send(ws, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let m = buffer.withUnsafeMutableBytes { recv(ws, $0.baseAddress, $0.count, 0) }
        #expect(m > 2)
        let reply = String(decoding: buffer[min(2, max(0, m))..<max(0, m)], as: UTF8.self)
        #expect(reply == #"{"id":5,"jsonrpc":"2.0","result":[7]}"#)
        await s.stop()
    }

    /// A connection that trickles a request head a few bytes at a time never delivers a whole request,
    /// so it is closed `idleTimeout` after its accept although it is never silent; a keep-alive
    /// connection is closed `idleTimeout` after its answer; a well-behaved call still works. Found by
    /// an exploratory test against aria2c 1.36: 300 connections holding half-sent heads kept every
    /// call out once the daemon's open-file limit was reached (the old read-idle timer never fired
    /// for a trickle, and took 120 s for silence); aria2c drops them after 30 s.
    @Test func aConnectionThatNeverDeliversAWholeRequestIsClosed() async throws {
        let s = try await RunningServer(idleTimeout: .milliseconds(500))
        var tv = timeval(tv_sec: 0, tv_usec: 50_000)
        func send(_ fd: Int32, _ text: String) {
            _ = Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        /// Waits up to 4 s for the server to close `fd`, trickling one header byte each 50 ms when
        /// `trickle`; answers how long it took, or nil if it stayed open.
        func closedAfter(_ fd: Int32, trickle: Bool) -> Duration? {
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            let started = ContinuousClock.now
            var buffer = [UInt8](repeating: 0, count: 4096)
            while ContinuousClock.now - started < .seconds(4) {
                if trickle { send(fd, "X") }
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n == 0 { return ContinuousClock.now - started }
                if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK { return ContinuousClock.now - started }
            }
            return nil
        }
        let slow = try RPCClient(port: s.port).connectSocket().descriptor
        defer { close(slow) }
        send(slow, "POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nX-Slow: ")
        let trickled = try #require(closedAfter(slow, trickle: true))
        #expect(trickled >= .milliseconds(300) && trickled < .seconds(3))

        // A keep-alive connection is answered, then closed once it has been idle as long.
        let kept = try RPCClient(port: s.port).connectSocket().descriptor
        defer { close(kept) }
        let call = #"{"id":1,"method":"echo","params":["token:k",3]}"#
        send(kept, "POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nContent-Length: \(call.utf8.count)\r\n\r\n" + call)
        var buffer = [UInt8](repeating: 0, count: 4096)
        var tv5 = timeval(tv_sec: 5, tv_usec: 0)
        _ = setsockopt(kept, SOL_SOCKET, SO_RCVTIMEO, &tv5, socklen_t(MemoryLayout<timeval>.size))
        let n = buffer.withUnsafeMutableBytes { recv(kept, $0.baseAddress, $0.count, 0) }
        let answer = String(decoding: buffer[0..<max(0, n)], as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 200") && answer.hasSuffix(#""result":[3]}"#), "\(answer)")
        #expect(closedAfter(kept, trickle: false) != nil)

        // Meanwhile a whole request is answered as ever.
        #expect(try RPCClient(port: s.port, secret: "k").call("echo", [.int(4)]) == .array([.int(4)]))
        await s.stop()
    }

    /// Past `maxConnections` open connections one more is closed as soon as it is accepted, so that
    /// RPC connections alone never use up the daemon's descriptors: at EMFILE libdispatch's
    /// worker-pool monitor traps (SIGILL; seen with `ulimit -n 256` and 300 half-sent requests).
    /// Once one closes, calls are answered again.
    @Test func connectionsPastTheLimitAreClosedAtOnce() async throws {
        let s = try await RunningServer(maxConnections: 3)
        let head = Array("POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\n".utf8)
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<3 {
            let fd = try RPCClient(port: s.port).connectSocket().descriptor
            _ = head.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            held.append(fd)
        }
        try await Task.sleep(for: .milliseconds(200))  // all three accepted
        let extra = try RPCClient(port: s.port).connectSocket().descriptor
        defer { close(extra) }
        let (read, after) = awaitClose(extra, timeoutSeconds: 3)
        #expect(read <= 0 && after < .seconds(2))  // closed (EOF or reset), not timed out
        close(held.removeLast())
        var answered = false
        let deadline = ContinuousClock.now + .seconds(5)
        while !answered && ContinuousClock.now < deadline {
            answered = (try? RPCClient(port: s.port, secret: "k").call("echo", [.int(5)])) == .array([.int(5)])
            if !answered { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(answered)
        await s.stop()
    }

    /// A WebSocket client that sends thousands of calls before it reads a byte gets every answer, in
    /// order: before, answers waited in a mailbox of 4,096 that dropped the oldest, and 7,036 of
    /// 12,000 were lost in silence (aria2c answered all).
    @Test func aWebSocketClientThatReadsLateLosesNoAnswer() async throws {
        let big = BigAnswers()
        let s = try await RunningServer(handler: big)
        let ws = try RawWebSocket(port: s.port, host: s.host)
        defer { ws.close() }
        #expect(ws.receive().hasPrefix("HTTP/1.1 101"))
        let calls = 10000
        var frames: [UInt8] = []
        for i in 0..<calls {
            let payload = Array(#"{"id":\#(i),"method":"big","params":["token:k"]}"#.utf8)
            let mask: [UInt8] = [3, 1, 4, 1]
            frames += [0x81, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        }
        var sent = 0
        while sent < frames.count {
            let n = frames[sent...].withUnsafeBytes { send(ws.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            try #require(n > 0)
            sent += n
        }
        // Until the server takes no more calls: all of them before, a socket's worth now.
        var taken = -1
        for _ in 0..<120 where taken < calls {
            try await Task.sleep(for: .milliseconds(500))
            let now = big.answered.withLock { $0 }
            if now == taken { break }
            taken = now
        }
        var ids: [Int] = []
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while ids.count < calls {
            let n = buffer.withUnsafeMutableBytes { recv(ws.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            pending += buffer[0..<n]
            while pending.count >= 4 {
                let length = pending[1] == 126 ? Int(pending[2]) << 8 | Int(pending[3]) : Int(pending[1])
                let start = pending[1] == 126 ? 4 : 2
                guard pending.count >= start + length else { break }
                let text = String(decoding: pending[start..<start + length], as: UTF8.self)
                if let id = text.split(separator: ",").first?.dropFirst(6).description, let n = Int(id) { ids.append(n) }
                pending.removeFirst(start + length)
            }
        }
        #expect(ids == Array(0..<calls))
        await s.stop()
    }

    /// A WebSocket whose client reads none of the notifications sent to it is closed once its mailbox
    /// is full, rather than left to miss some in silence.
    @Test func aWebSocketThatReadsNoNotificationsIsClosed() async throws {
        let hub = NotificationHub(mailboxLimit: 8)
        let s = try await RunningServer(hub: hub)
        let deaf = try RawWebSocket(port: s.port, host: s.host)
        defer { deaf.close() }
        #expect(deaf.receive().hasPrefix("HTTP/1.1 101"))
        for _ in 0..<1000 where hub.clientCount == 0 { try await Task.sleep(for: .milliseconds(10)) }
        try #require(hub.clientCount == 1)
        let padding = JSON.string(String(repeating: "x", count: 4000))
        for i in 0..<20000 { hub.notify(method: "aria2.onDownloadStart", gid: String(i), fields: [("pad", padding)]) }
        // Read it all: the server must have closed it (recv 0), not left it open (the 5 s timeout).
        var buffer = [UInt8](repeating: 0, count: 65536)
        var last = 1
        let started = ContinuousClock.now
        while last > 0 { last = buffer.withUnsafeMutableBytes { recv(deaf.fd, $0.baseAddress, $0.count, 0) } }
        #expect(last == 0)
        #expect(ContinuousClock.now - started < .seconds(5))
        await s.stop()
    }

    @Test func clientResponseParsing() throws {
        let ok = Array("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"result\":1}".utf8)
        #expect(try RPCClient.parseResponse(ok) == .object([("result", .int(1))]))
        #expect(throws: RPCClientError.self) {
            try RPCClient.parseResponse(Array("HTTP/1.1 413 Too Large\r\n\r\nbig\n".utf8))
        }
        #expect(throws: RPCClientError.self) { try RPCClient.parseResponse(Array("garbage".utf8)) }
        #expect(throws: RPCClientError.self) { try RPCClient.parseResponse(Array("HTTP/1.1 200 OK\r\n\r\n{nope".utf8)) }
    }
}

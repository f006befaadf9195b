import Glibc
import Testing

@testable import SeggetRPC

/// A WebSocket opened by hand: the handshake with a chosen `Host`, then masked text frames.
struct RawWebSocket {
    let fd: Int32

    /// Connects and sends the upgrade request; `answer` is what came back to it.
    init(port: Int, host: String, origin: String = "http://evil.example") throws {
        fd = try RPCClient(port: port).connectSocket().descriptor
        var tv = timeval(tv_sec: 5, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        send(
            "GET /jsonrpc HTTP/1.1\r\nHost: \(host)\r\nOrigin: \(origin)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func receive() -> String {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return String(decoding: buffer[0..<max(0, n)], as: UTF8.self)
    }

    /// Sends one call as a masked text frame (under 126 bytes) and returns the payload of the reply frame.
    func call(_ json: String) -> String {
        let payload = Array(json.utf8)
        precondition(payload.count < 126)
        let mask: [UInt8] = [9, 8, 7, 6]
        var frame: [UInt8] = [0x81, 0x80 | UInt8(payload.count)] + mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        _ = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let reply = receive()
        return String(reply.dropFirst(2))
    }

    func close() { _ = Glibc.close(fd) }
}

/// The server's guards over real sockets: `Host` checks on HTTP, preflights and WebSocket upgrades,
/// and the slow-down of wrong tokens that never touches the right one.
@Suite(.serialized) struct RPCServerGuardTests {
    static let unauthorized = #"{"code":1,"message":"Unauthorized"}"#

    @Test func rebindingHostIsRefusedOverHTTPEvenWithTheToken() async throws {
        let s = try await RunningServer()
        let body = #"{"id":1,"method":"echo","params":["token:k",1]}"#
        for host in ["evil.example:\(s.port)", "evil.example", "localhost.evil.example:\(s.port)"] {
            let post = try s.raw(
                "POST /jsonrpc HTTP/1.1\r\nHost: \(host)\r\nOrigin: http://evil.example\r\nContent-Length: \(body.utf8.count)\r\n\r\n"
                    + body)
            #expect(post.hasPrefix("HTTP/1.1 421"), "\(host): \(post)")
            #expect(!post.contains("result"))
        }
        let preflight = try s.raw(
            "OPTIONS /jsonrpc HTTP/1.1\r\nHost: evil.example:\(s.port)\r\nOrigin: http://evil.example\r\n"
                + "Access-Control-Request-Method: POST\r\n\r\n")
        #expect(preflight.hasPrefix("HTTP/1.1 421"))
        let none = try s.raw("POST /jsonrpc HTTP/1.0\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
        #expect(none.hasPrefix("HTTP/1.0 421"))
        for host in ["localhost:\(s.port)", "[::1]:\(s.port)", s.host, "127.0.0.1:\(s.port + 1)", "localhost"] {
            let ok = try s.raw(
                "POST /jsonrpc HTTP/1.1\r\nHost: \(host)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
                    + body)
            #expect(ok.hasSuffix(#"{"id":1,"jsonrpc":"2.0","result":[1]}"#), "\(host): \(ok)")
        }
        await s.stop()
    }

    @Test func crossOriginCallsStayAllowedButNeedTheToken() async throws {
        let s = try await RunningServer()
        let preflight = try s.raw(
            "OPTIONS /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nOrigin: http://evil.example\r\n"
                + "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n")
        #expect(preflight.hasPrefix("HTTP/1.1 200"))
        #expect(preflight.lowercased().contains("access-control-allow-origin: *"))
        let body = #"{"id":1,"method":"echo","params":[1]}"#
        let post = try s.raw(
            "POST /jsonrpc HTTP/1.1\r\nHost: \(s.host)\r\nOrigin: http://evil.example\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
                + body)
        #expect(post.contains(Self.unauthorized))
        await s.stop()
    }

    @Test func webSocketUpgradeChecksHostAndEveryCallChecksTheToken() async throws {
        let s = try await RunningServer()
        let evil = try RawWebSocket(port: s.port, host: "evil.example:\(s.port)")
        defer { evil.close() }
        let refused = evil.receive()
        #expect(refused.hasPrefix("HTTP/1.1 421"), "\(refused)")
        // Not the switch: the refusal names the port, which may itself contain "101".
        #expect(!refused.contains("101 Switching Protocols"))
        #expect(!refused.lowercased().contains("upgrade: websocket"))

        let ws = try RawWebSocket(port: s.port, host: "localhost:\(s.port)")
        defer { ws.close() }
        #expect(ws.receive().hasPrefix("HTTP/1.1 101"))
        #expect(ws.call(#"{"id":1,"method":"echo","params":[1]}"#).contains(Self.unauthorized))
        #expect(
            ws.call(#"{"id":2,"method":"echo","params":["token:k",2]}"#) == #"{"id":2,"jsonrpc":"2.0","result":[2]}"#)
        #expect(ws.call(#"{"id":3,"method":"echo","params":["token:x",3]}"#).contains(Self.unauthorized))
        #expect(ws.call(#"{"id":4,"method":"system.listMethods"}"#) == #"{"id":4,"jsonrpc":"2.0","result":[]}"#)
        await s.stop()
    }

    @Test func refusedHostsAreLoggedOnceAndEscaped() async throws {
        let s = try await RunningServer()
        for _ in 0..<3 {
            // Control characters never get this far (the HTTP parser refuses them); bytes outside ASCII
            // and a backslash do, and are escaped.
            _ = try s.raw("GET /jsonrpc HTTP/1.1\r\nHost: evil\u{E9}\\x.example\r\nConnection: close\r\n\r\n")
        }
        let lines = s.log.all.filter { $0.contains("refused a request") }
        #expect(lines.count == 1)
        #expect(lines.first?.contains(#"'evil\xc3\xa9\x5cx.example'"#) == true, "\(lines)")
        await s.stop()
    }

    @Test func refusedHostsStopBeingLoggedAfterALimitAndSaySo() async throws {
        let s = try await RunningServer()
        for i in 0..<(RPCGuard.loggedHostLimit + 3) {
            let reply = try s.raw("GET /jsonrpc HTTP/1.1\r\nHost: evil\(i).example\r\nConnection: close\r\n\r\n")
            #expect(reply.hasPrefix("HTTP/1.1 421"))
        }
        let lines = s.log.all.filter { $0.contains("refused a request") }
        #expect(lines.count == RPCGuard.loggedHostLimit)
        #expect(lines.last?.contains("the last refused Host value logged") == true)
        await s.stop()
    }

    @Test func wrongTokensWaitButTheRightTokenNever() async throws {
        var settings = AuthThrottle.Settings()
        settings.freeFailures = 2
        // Delays long enough that "at once" below has half a second on a loaded machine.
        settings.firstDelay = .milliseconds(600)
        settings.maxDelay = .milliseconds(1200)
        let s = try await RunningServer(throttle: settings)
        let clock = ContinuousClock()
        var times: [Duration] = []
        for _ in 0..<5 {
            let started = clock.now
            do {
                _ = try RPCClient(port: s.port, secret: "wrong").call("echo")
            } catch {
                guard case .remote(let e) = error else { Issue.record("unexpected \(error)"); return }
                #expect(e == .unauthorized)
            }
            times.append(clock.now - started)
        }
        #expect(times[0] < .milliseconds(500) && times[1] < .milliseconds(500), "\(times)")
        #expect(times[2] >= .milliseconds(600), "\(times)")
        #expect(times[3] >= .milliseconds(1200) && times[4] >= .milliseconds(1200), "\(times)")
        // Capped: doubled again it would be 2.4 s.
        #expect(times[4] < .milliseconds(2200), "\(times)")
        // The user, from the same address, is answered at once.
        let started = clock.now
        #expect(try RPCClient(port: s.port, secret: "k").call("echo", [.int(1)]) == .array([.int(1)]))
        #expect(clock.now - started < .milliseconds(500))
        // One log line for the burst.
        #expect(s.log.all.filter { $0.contains("wrong or missing RPC token") }.count == 1)
        await s.stop()
    }

    @Test func listeningOnAllInterfacesAnswersAnyHost() async throws {
        let s = try await RunningServer(hostPolicy: .anyHost)
        let body = #"{"id":1,"method":"echo","params":["token:k"]}"#
        let post = try s.raw(
            "POST /jsonrpc HTTP/1.1\r\nHost: nas.lan:\(s.port)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
                + body)
        #expect(post.hasPrefix("HTTP/1.1 200"))
        await s.stop()
    }
}

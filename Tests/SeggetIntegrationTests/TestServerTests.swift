import Foundation
import SeggetTestServer
import Testing

#if canImport(Glibc)
import Glibc
#endif

// Tests of the misbehaving test server itself, spoken to over plain sockets (and curl where a real
// client matters), so that the engine's tests can trust what it does.

// MARK: - Helpers

/// Deterministic, non-repeating bytes (xorshift), so that a shifted or truncated body is detectable.
private func patternBytes(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var state = seed
    var out = [UInt8](repeating: 0, count: count)
    for i in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        out[i] = UInt8(truncatingIfNeeded: state >> 24)
    }
    return out
}

private struct RawResponse {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]
    /// False when the connection ended before the framing said the body was complete.
    var complete: Bool
    /// The status line as sent.
    var statusLine = ""
}

/// A tiny blocking HTTP/1.1 client over a plain socket, with a 10 s receive timeout so a broken
/// server fails the test instead of hanging it.
private final class RawClient {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int, host: String = "127.0.0.1") throws {
        let v6 = host.contains(":")
        fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClientError.connect }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let rc: Int32
        if v6 {
            var addr = sockaddr_in6()
            addr.sin6_family = sa_family_t(AF_INET6)
            addr.sin6_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET6, host, &addr.sin6_addr)
            rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET, host, &addr.sin_addr)
            rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard rc == 0 else {
            close(fd)
            throw ClientError.connect
        }
    }

    deinit { close(fd) }

    enum ClientError: Error { case connect, send, malformed }

    var localPort: Int {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard n == bytes.count else { throw ClientError.send }
    }

    /// Sends a request with the given extra header lines.
    func request(_ method: String = "GET", _ target: String, _ headers: [String] = []) throws {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: test\r\n"
        for line in headers { text += line + "\r\n" }
        try send(text + "\r\n")
    }

    /// Reads more bytes; false at end of stream, error or timeout.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        buffer.append(contentsOf: chunk[..<n])
        return true
    }

    private func take(_ count: Int) -> [UInt8]? {
        while buffer.count < count { if !fill() { return nil } }
        let out = Array(buffer[..<count])
        buffer.removeFirst(count)
        return out
    }

    private func line() -> String? {
        while true {
            if let i = buffer.firstIndex(of: 10) {
                let out = String(decoding: buffer[..<i], as: UTF8.self)
                buffer.removeFirst(i + 1)
                return out.hasSuffix("\r") ? String(out.dropLast()) : out
            }
            if !fill() { return nil }
        }
    }

    /// Reads `count` body bytes or as many as arrive before the stream ends.
    func readUpTo(_ count: Int) -> [UInt8] {
        while buffer.count < count { if !fill() { break } }
        let n = min(count, buffer.count)
        let out = Array(buffer[..<n])
        buffer.removeFirst(n)
        return out
    }

    /// True if the server closed the connection (EOF) with nothing more to read.
    func isClosedByPeer() -> Bool {
        buffer.isEmpty && !fill()
    }

    func readResponse(method: String = "GET") throws -> RawResponse {
        var response = try readResponseWithoutStatusLine(method: method)
        response.statusLine = lastStatusLine
        return response
    }

    private var lastStatusLine = ""

    private func readResponseWithoutStatusLine(method: String) throws -> RawResponse {
        guard let statusLine = line() else { throw ClientError.malformed }
        lastStatusLine = statusLine
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw ClientError.malformed }
        var headers: [String: String] = [:]
        while let header = line(), !header.isEmpty {
            guard let colon = header.firstIndex(of: ":") else { throw ClientError.malformed }
            headers[header[..<colon].lowercased()] = header[header.index(after: colon)...]
                .trimmingCharacters(in: .whitespaces)
        }
        if method == "HEAD" || status == 304 { return RawResponse(status: status, headers: headers, body: [], complete: true) }
        if headers["transfer-encoding"]?.lowercased() == "chunked" {
            var body: [UInt8] = []
            while let sizeLine = line(), let size = Int(sizeLine.split(separator: ";")[0], radix: 16) {
                if size == 0 {
                    _ = line()
                    return RawResponse(status: status, headers: headers, body: body, complete: true)
                }
                guard let chunk = take(size) else { break }
                body += chunk
                _ = line()
            }
            return RawResponse(status: status, headers: headers, body: body, complete: false)
        }
        if let length = headers["content-length"].flatMap({ Int($0) }) {
            let body = readUpTo(length)
            return RawResponse(status: status, headers: headers, body: body, complete: body.count == length)
        }
        var body = buffer
        buffer = []
        while fill() {
            body += buffer
            buffer = []
        }
        return RawResponse(status: status, headers: headers, body: body, complete: true)
    }
}

/// Starts a server with `resources`, runs `body`, and always stops the server.
private func withServer<T>(
    host: String = "127.0.0.1", _ resources: [String: [UInt8]], _ body: (TestServer) throws -> T
) throws -> T {
    let server = try TestServer(host: host)
    for (name, bytes) in resources { server.addResource(name: name, bytes: bytes) }
    try server.start()
    defer { server.stop() }
    return try body(server)
}

/// One request on a fresh connection.
private func fetch(_ server: TestServer, _ target: String, _ headers: [String] = [], method: String = "GET") throws
    -> RawResponse
{
    let client = try RawClient(port: server.port, host: server.host)
    try client.request(method, target, headers + ["Connection: close"])
    return try client.readResponse(method: method)
}

private func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

private func temporaryFile(_ bytes: [UInt8]) throws -> String {
    let path = NSTemporaryDirectory() + "segget-testserver-\(UUID().uuidString).bin"
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
}

/// base64 of the hex digest printed by `sha256sum`/`md5sum`.
private func base64OfToolDigest(_ tool: String, _ path: String) throws -> String {
    let (status, output) = try run("/usr/bin/env", [tool, path])
    #expect(status == 0)
    let hex = Array(output.prefix { $0 != " " })
    var bytes: [UInt8] = []
    var i = 0
    while i + 1 < hex.count {
        bytes.append(UInt8(String(hex[i...i + 1]), radix: 16) ?? 0)
        i += 2
    }
    return Data(bytes).base64EncodedString()
}

// MARK: - Normal mode

@Suite struct TestServerTests {
    let body = patternBytes(100_000)

    @Test func singleRangeAnswers206WithExactBytesAndHeaders() throws {
        try withServer(["f.bin": body]) { server in
            let r = try fetch(server, "/f.bin", ["Range: bytes=1000-1999"])
            #expect(r.status == 206)
            #expect(r.headers["content-range"] == "bytes 1000-1999/100000")
            #expect(r.headers["content-length"] == "1000")
            #expect(r.headers["accept-ranges"] == "bytes")
            #expect(r.headers["etag"]?.hasPrefix("\"") == true)
            #expect(r.headers["last-modified"]?.hasSuffix("GMT") == true)
            #expect(r.body == Array(body[1000..<2000]))

            let open = try fetch(server, "/f.bin", ["Range: bytes=99000-"])
            #expect(open.status == 206)
            #expect(open.headers["content-range"] == "bytes 99000-99999/100000")
            #expect(open.body == Array(body[99000...]))

            let suffix = try fetch(server, "/f.bin", ["Range: bytes=-500"])
            #expect(suffix.status == 206)
            #expect(suffix.headers["content-range"] == "bytes 99500-99999/100000")
            #expect(suffix.body == Array(body[99500...]))

            let clamped = try fetch(server, "/f.bin", ["Range: bytes=99990-200000"])
            #expect(clamped.headers["content-range"] == "bytes 99990-99999/100000")
            #expect(clamped.body.count == 10)

            let full = try fetch(server, "/f.bin")
            #expect(full.status == 200)
            #expect(full.body == body)
        }
    }

    @Test func unsatisfiableRangeAnswers416() throws {
        try withServer(["f.bin": body, "empty": []]) { server in
            let r = try fetch(server, "/f.bin", ["Range: bytes=100000-100010"])
            #expect(r.status == 416)
            #expect(r.headers["content-range"] == "bytes */100000")
            #expect(r.body.isEmpty)

            // Documented choice: an empty resource has no satisfiable range.
            let empty = try fetch(server, "/empty", ["Range: bytes=0-0"])
            #expect(empty.status == 416)
            #expect(empty.headers["content-range"] == "bytes */0")
            let emptyFull = try fetch(server, "/empty")
            #expect(emptyFull.status == 200)
            #expect(emptyFull.headers["content-length"] == "0")

            let missing = try fetch(server, "/nope")
            #expect(missing.status == 404)
        }
    }

    @Test func ifRangeMismatchAnswers200WithTheNewBody() throws {
        try withServer(["f.bin": body]) { server in
            let first = try fetch(server, "/f.bin", ["Range: bytes=0-0"])
            let etag = try #require(first.headers["etag"])
            let date = try #require(first.headers["last-modified"])

            let sameTag = try fetch(server, "/f.bin", ["Range: bytes=10-19", "If-Range: \(etag)"])
            #expect(sameTag.status == 206)
            let sameDate = try fetch(server, "/f.bin", ["Range: bytes=10-19", "If-Range: \(date)"])
            #expect(sameDate.status == 206)

            let changed = patternBytes(100_000, seed: 42)
            server.replaceResource(name: "f.bin", bytes: changed, etag: nil, lastModified: "Sun, 06 Nov 2016 08:49:37 GMT")
            let stale = try fetch(server, "/f.bin", ["Range: bytes=10-19", "If-Range: \(etag)"])
            #expect(stale.status == 200)
            #expect(stale.body == changed)
            #expect(stale.headers["etag"] != etag)
            let staleDate = try fetch(server, "/f.bin", ["Range: bytes=10-19", "If-Range: \(date)"])
            #expect(staleDate.status == 200)
        }
    }

    @Test func keepAliveServesSeveralRequestsOnOneConnection() throws {
        try withServer(["f.bin": body]) { server in
            let client = try RawClient(port: server.port)
            try client.request("GET", "/f.bin", ["Range: bytes=0-99"])
            let a = try client.readResponse()
            try client.request("HEAD", "/f.bin")
            let head = try client.readResponse(method: "HEAD")
            try client.request("GET", "/f.bin", ["Range: bytes=100-199", "Connection: close"])
            let b = try client.readResponse()
            #expect(a.body == Array(body[0..<100]))
            #expect(head.status == 200 && head.headers["content-length"] == "100000")
            #expect(b.body == Array(body[100..<200]))
            #expect(b.headers["connection"] == "close")
            #expect(client.isClosedByPeer())
            #expect(server.connectionsAccepted == 1)
            let ports = Set(server.requests.map(\.remotePort))
            #expect(ports == [client.localPort])
            // Each record knows its connection: accepted once, before the first request, and the
            // requests' places on it in order.
            let records = server.requests
            #expect(records.map(\.indexOnConnection) == [0, 1, 2])
            #expect(Set(records.map(\.connectionAcceptedAt)).count == 1)
            #expect(records.allSatisfy { $0.connectionAcceptedAt > 0 && $0.connectionAcceptedAt <= $0.arrivedAt })
        }
    }

    @Test func stopClosesIdleKeepAliveConnections() throws {
        let server = try TestServer()
        server.addResource(name: "f.bin", bytes: body)
        try server.start()
        let client = try RawClient(port: server.port)
        try client.request("GET", "/f.bin", ["Range: bytes=0-9"])
        #expect(try client.readResponse().status == 206)
        let start = Date()
        server.stop()
        #expect(Date().timeIntervalSince(start) < 5)
        #expect(client.isClosedByPeer())
        #expect(throws: (any Error).self) { _ = try RawClient(port: server.port) }
    }

    @Test func bodyBytesAreCountedPerRequestAndInTotal() throws {
        try withServer(["f.bin": body]) { server in
            _ = try fetch(server, "/f.bin", ["Range: bytes=0-999"])
            _ = try fetch(server, "/f.bin", method: "HEAD")
            _ = try fetch(server, "/f.bin")
            _ = try fetch(server, "/short/f.bin?missing=100", ["Range: bytes=0-999"])
            let requests = server.requests
            #expect(requests.map(\.status) == [206, 200, 200, 206])
            #expect(requests.map(\.bodyBytesSent) == [1000, 0, 100_000, 900])
            #expect(requests.map(\.method) == ["GET", "HEAD", "GET", "GET"])
            #expect(requests[3].path == "/short/f.bin" && requests[3].query == "missing=100")
            #expect(requests[0].headers["range"] == "bytes=0-999")
            #expect(server.bodyBytesSent == 101_900)
            #expect(server.connectionsAccepted == 4)
            server.resetCounters()
            #expect(server.bodyBytesSent == 0)
            #expect(server.requests.isEmpty)
            #expect(server.connectionsAccepted == 0)
        }
    }

    @Test func ipv6LoopbackWorks() throws {
        try withServer(host: "::1", ["f.bin": body]) { server in
            #expect(server.baseURL == "http://[::1]:\(server.port)")
            let r = try fetch(server, "/f.bin", ["Range: bytes=5-9"])
            #expect(r.status == 206)
            #expect(r.body == Array(body[5..<10]))
        }
    }

    // MARK: Throttling

    @Test func rateCapHoldsRoughly() throws {
        let big = patternBytes(400 * 1024)
        try withServer(["f.bin": big]) { server in
            let start = Date()
            let r = try fetch(server, "/f.bin?rate=400k")
            let elapsed = Date().timeIntervalSince(start)
            #expect(r.body == big)
            // 400 KiB at 400 KiB/s is one second; allow a wide margin either way.
            #expect(elapsed > 0.6, "rate cap not applied: \(elapsed) s")
            #expect(elapsed < 8, "far slower than the cap: \(elapsed) s")
        }
    }

    @Test func slowPortsGetTheSlowRate() throws {
        let big = patternBytes(200 * 1024)
        try withServer(["f.bin": big]) { server in
            let slow = try RawClient(port: server.port)
            let digit = slow.localPort % 10
            let start = Date()
            try slow.request("GET", "/f.bin?slowports=\(digit)&slowrate=200k", ["Connection: close"])
            let r = try slow.readResponse()
            let slowElapsed = Date().timeIntervalSince(start)
            #expect(r.body == big)
            #expect(slowElapsed > 0.6, "slow port not throttled: \(slowElapsed) s")

            let fast = try RawClient(port: server.port)
            let other = (fast.localPort % 10 + 1) % 10
            let fastStart = Date()
            try fast.request("GET", "/f.bin?slowports=\(other)&slowrate=10k", ["Connection: close"])
            let f = try fast.readResponse()
            #expect(f.body == big)
            #expect(Date().timeIntervalSince(fastStart) < 3)
        }
    }

    // MARK: Fault modes

    /// `reason`, `header` and `body` send a hostile server's text raw, in any mode (issue 23).
    @Test func serverTextParametersAreSentRaw() throws {
        try withServer(["f.bin": body]) { server in
            let r = try fetch(server, "/status/f.bin?code=404&reason=Gone%1B%5B2J&header=X-Text:%20a%1B%5D52%3Bc%3BeA%3D%3D%07&body=%1B%5B2J%E2%80%AE")
            #expect(r.statusLine == "HTTP/1.1 404 Gone\u{1B}[2J")
            #expect(r.headers["x-text"] == "a\u{1B}]52;c;eA==\u{07}")
            #expect(r.body == Array("\u{1B}[2J\u{202E}".utf8))
            let file = try fetch(server, "/f.bin?header=Content-Encoding:%20x%1B&body=ignored")
            #expect(file.status == 200 && file.body == body, "the file's own body is kept")
            #expect(file.headers["content-encoding"] == "x\u{1B}")
        }
    }

    @Test func zeroOnlyHonoursOnlyRangesFromZero() throws {
        try withServer(["f.bin": body]) { server in
            let atZero = try fetch(server, "/zeroonly/f.bin", ["Range: bytes=0-99"])
            #expect(atZero.status == 206)
            #expect(atZero.body == Array(body[0..<100]))
            let later = try fetch(server, "/zeroonly/f.bin", ["Range: bytes=100-199"])
            #expect(later.status == 200)
            #expect(later.headers["content-range"] == nil)
            #expect(later.body == body)
        }
    }

    @Test func wrongRangeShiftsHeaderAndBytes() throws {
        try withServer(["f.bin": body]) { server in
            #expect(server.url("f.bin", mode: .wrongrange, query: "shift=7") == server.baseURL + "/wrongrange/f.bin?shift=7")
            let r = try fetch(server, "/wrongrange/f.bin?shift=7", ["Range: bytes=100-199"])
            #expect(r.status == 206)
            #expect(r.headers["content-range"] == "bytes 107-206/100000")
            #expect(r.body == Array(body[107..<207]))
        }
    }

    @Test func cappedAnswersAnHonestPrefixOfTheRange() throws {
        try withServer(["f.bin": body]) { server in
            let r = try fetch(server, "/capped/f.bin?max=1k", ["Range: bytes=100-9999"])
            #expect(r.status == 206)
            #expect(r.headers["content-range"] == "bytes 100-1123/100000")
            #expect(r.headers["content-length"] == "1024")
            #expect(r.body == Array(body[100..<1124]))
            // A range within the cap is answered whole.
            let small = try fetch(server, "/capped/f.bin?max=1k", ["Range: bytes=5-9"])
            #expect(small.headers["content-range"] == "bytes 5-9/100000")
        }
    }

    /// `slowevery=3` slows requests 3, 6, … for a target, and `slowafter` lets a slow one start fast.
    @Test func slowEveryPacesEveryNthRequestAndSlowAfterStartsFast() throws {
        let big = patternBytes(64 * 1024)
        try withServer(["f.bin": big]) { server in
            var elapsed: [Double] = []
            for _ in 0..<3 {
                let start = Date()
                let r = try fetch(server, "/f.bin?slowevery=3&slowrate=16k&slowafter=32k", ["Range: bytes=0-65535"])
                elapsed.append(Date().timeIntervalSince(start))
                #expect(r.body == big)
            }
            // The third: 32 KiB at once, then 32 KiB at 16 KiB/s (2 s). The fast ones are immediate;
            // the bound leaves a loaded machine a second and a half.
            #expect(elapsed[0] < 1.5 && elapsed[1] < 1.5, "\(elapsed)")
            #expect(elapsed[2] > 1.7 && elapsed[2] < 8, "\(elapsed)")
        }
    }

    /// `slowrate=1` trickles a byte at a time rather than a 512-byte slice every 512 s.
    @Test func trickleSendsSingleBytes() throws {
        try withServer(["f.bin": body]) { server in
            let client = try RawClient(port: server.port)
            try client.request("GET", "/stall/f.bin?slowfirst=1&slowrate=1&after=99999", ["Range: bytes=0-99"])
            Thread.sleep(forTimeInterval: 2.5)
            let sent = server.requests.last?.bodyBytesSent ?? 0
            #expect(sent >= 1 && sent <= 5, "\(sent) bytes in 2.5 s")
        }
    }

    @Test func shortBodyStopsEarlyAndCloses() throws {
        try withServer(["f.bin": body]) { server in
            let client = try RawClient(port: server.port)
            try client.request("GET", "/short/f.bin?missing=10", ["Range: bytes=0-99"])
            let r = try client.readResponse()
            #expect(r.status == 206)
            #expect(r.headers["content-length"] == "100")
            #expect(!r.complete)
            #expect(r.body == Array(body[0..<90]))
            #expect(client.isClosedByPeer())
        }
    }

    @Test func longBodySendsExtraBytes() throws {
        try withServer(["f.bin": body]) { server in
            let r = try fetch(server, "/long/f.bin?extra=5", ["Range: bytes=0-99"])
            #expect(r.headers["content-range"] == "bytes 0-99/100000")
            #expect(r.headers["content-length"] == "105")
            #expect(r.body == Array(body[0..<105]))
        }
    }

    @Test func chunkedIgnoresRangesAndHasNoLength() throws {
        try withServer(["f.bin": body]) { server in
            let r = try fetch(server, "/chunked/f.bin", ["Range: bytes=10-19"])
            #expect(r.status == 200)
            #expect(r.headers["transfer-encoding"] == "chunked")
            #expect(r.headers["content-length"] == nil)
            #expect(r.complete)
            #expect(r.body == body)
            #expect(server.bodyBytesSent == Int64(body.count))
        }
    }

    /// `chunked206`: ranges honoured, every answer chunked without a length; `ext=1` puts a chunk
    /// extension on every size line.
    @Test func chunkedPartialAnswersHaveNoLength() throws {
        try withServer(["f.bin": body]) { server in
            for query in ["", "?ext=1"] {
                let r = try fetch(server, "/chunked206/f.bin\(query)", ["Range: bytes=10-19"])
                #expect(r.status == 206)
                #expect(r.headers["transfer-encoding"] == "chunked")
                #expect(r.headers["content-length"] == nil)
                #expect(r.headers["content-range"] == "bytes 10-19/\(body.count)")
                #expect(r.complete && r.body == Array(body[10..<20]), "\(query)")
            }
        }
    }

    /// `close=1`: every answer says `Connection: close` and ends its connection.
    @Test func closeEndsEveryAnswersConnection() throws {
        try withServer(["f.bin": body]) { server in
            let client = try RawClient(port: server.port, host: server.host)
            try client.request("GET", "/f.bin?close=1", ["Range: bytes=0-9"])
            let r = try client.readResponse()
            #expect(r.status == 206 && r.headers["connection"] == "close")
            try? client.request("GET", "/f.bin?close=1", ["Range: bytes=0-9"])
            #expect((try? client.readResponse()) == nil, "the connection was kept")
        }
    }

    /// `workers=1`: requests wait in arrival order for the one worker, which thinks (`firstbyte`)
    /// and sends each body before it takes the next; a request whose client left while it waited
    /// still costs the worker its think time. The log's times show it.
    @Test func oneWorkerServesOneRequestAtATime() throws {
        try withServer(["f.bin": body]) { server in
            let target = "/f.bin?workers=1&firstbyte=0.2"
            let a = try RawClient(port: server.port, host: server.host)
            let b = try RawClient(port: server.port, host: server.host)
            let gone = try RawClient(port: server.port, host: server.host)
            let c = try RawClient(port: server.port, host: server.host)
            let started = TestServer.clock
            try a.request("GET", target, ["Range: bytes=0-9"])
            usleep(20_000)
            try b.request("GET", target, ["Range: bytes=10-19"])
            usleep(20_000)
            try gone.request("GET", target, ["Range: bytes=20-29"])
            usleep(20_000)
            try c.request("GET", target, ["Range: bytes=30-39"])
            #expect(try a.readResponse().body == Array(body[0..<10]))
            #expect(try b.readResponse().body == Array(body[10..<20]))
            _ = shutdown(gone.fd, Int32(SHUT_RDWR))
            #expect(try c.readResponse().body == Array(body[30..<40]))
            let elapsed = TestServer.clock - started
            // Four think times one after another, the abandoned one's included.
            #expect(elapsed >= 0.78, "\(elapsed) s")
            let served = server.requests.filter { $0.path == "/f.bin" }.compactMap(\.servedAt).sorted()
            #expect(served.count == 4)
            for (x, y) in zip(served, served.dropFirst()) { #expect(y - x >= 0.19, "\(served)") }
            #expect(server.longestWorkerQueue >= 2)
        }
    }

    @Test func closeDelimitedAndNoRangesIgnoreRanges() throws {
        try withServer(["f.bin": body]) { server in
            let cd = try fetch(server, "/close-delimited/f.bin", ["Range: bytes=10-19"])
            #expect(cd.status == 200 && cd.headers["content-length"] == nil && cd.body == body)
            let nr = try fetch(server, "/noranges/f.bin", ["Range: bytes=10-19"])
            #expect(nr.status == 200 && nr.headers["accept-ranges"] == nil && nr.body == body)
            let r200 = try fetch(server, "/range200/f.bin", ["Range: bytes=10-19"])
            #expect(r200.status == 200 && r200.headers["accept-ranges"] == "bytes" && r200.body == body)
            let a416 = try fetch(server, "/always416/f.bin", ["Range: bytes=0-0"])
            #expect(a416.status == 416)
            let gz = try fetch(server, "/encoding/f.bin", ["Range: bytes=0-9"])
            #expect(gz.headers["content-encoding"] == "gzip" && gz.body == Array(body[0..<10]))
        }
    }

    @Test func digestHeadersMatchCoreutils() throws {
        // Longer than one 256 KiB read and not a multiple of the 64-byte block.
        let body = patternBytes(300_001, seed: 7)
        let path = try temporaryFile(body)
        defer { unlink(path) }
        let sha = try base64OfToolDigest("sha256sum", path)
        let md5 = try base64OfToolDigest("md5sum", path)
        let server = try TestServer()
        server.addResource(name: "f.bin", filePath: path)
        try server.start()
        defer { server.stop() }

        let r = try fetch(server, "/digest/f.bin", ["Range: bytes=0-9"])
        #expect(r.status == 206)
        #expect(r.headers["repr-digest"] == "sha-256=:\(sha):")
        let legacy = try fetch(server, "/digest/f.bin?legacy=1")
        #expect(legacy.headers["digest"] == "SHA-256=\(sha)")
        #expect(legacy.body == body)
        let wrong = try fetch(server, "/digest/f.bin?wrong=1")
        #expect(wrong.headers["repr-digest"] != nil)
        #expect(wrong.headers["repr-digest"] != "sha-256=:\(sha):")
        let m = try fetch(server, "/digest/f.bin?md5=1")
        #expect(m.headers["content-md5"] == md5)
        #expect(m.headers["repr-digest"] == nil)
        let wrongMD5 = try fetch(server, "/digest/f.bin?md5=1&wrong=1")
        #expect(wrongMD5.headers["content-md5"] != nil && wrongMD5.headers["content-md5"] != md5)
    }

    @Test func statusModeAnswersTheCodeTheFirstTimes() throws {
        try withServer(["f.bin": body]) { server in
            let target = "/status/f.bin?code=503&retryafter=1&times=2"
            let first = try fetch(server, target)
            #expect(first.status == 503)
            #expect(first.headers["retry-after"] == "1")
            #expect(try fetch(server, target).status == 503)
            let third = try fetch(server, target, ["Range: bytes=0-9"])
            #expect(third.status == 206)
            #expect(try fetch(server, "/status/f.bin?code=404").status == 404)
        }
    }

    @Test func midStream200AndChangingSwitchAfterN() throws {
        try withServer(["f.bin": body]) { server in
            #expect(try fetch(server, "/mid200/f.bin?after=2", ["Range: bytes=0-9"]).status == 206)
            #expect(try fetch(server, "/mid200/f.bin?after=2", ["Range: bytes=0-9"]).status == 200)

            let v1 = try fetch(server, "/changing/f.bin?after=1", ["Range: bytes=0-99"])
            let v2 = try fetch(server, "/changing/f.bin?after=1", ["Range: bytes=0-99"])
            #expect(v1.body == Array(body[0..<100]))
            #expect(v2.status == 206)
            #expect(v2.body != v1.body)
            #expect(v2.headers["etag"] != v1.headers["etag"])
            #expect(v2.headers["last-modified"] != v1.headers["last-modified"])
            #expect(v2.headers["content-range"] == "bytes 0-99/100000")
            let longer = try fetch(server, "/changing/f.bin?after=0&newlength=200000", ["Range: bytes=0-0"])
            #expect(longer.headers["content-range"] == "bytes 0-0/200000")
        }
    }

    @Test func expiringURLsAreCheckedOnEveryRequest() throws {
        try withServer(["f.bin": body]) { server in
            // A minted URL works; the same path with another expiry or signature does not.
            let valid = server.signedURL("f.bin", ttl: 60)
            let target = String(valid.dropFirst(server.baseURL.count))
            let ok = try fetch(server, target, ["Range: bytes=0-99"])
            #expect(ok.status == 206 && ok.body == Array(body[0..<100]))
            let forged = target.replacingOccurrences(of: "sig=", with: "sig=0")
            let refused = try fetch(server, forged, ["Range: bytes=0-99"])
            #expect(refused.status == 403)
            #expect(String(decoding: refused.body, as: UTF8.self).contains("<Code>SignatureDoesNotMatch</Code>"))
            // Expired (ttl 0: valid until the current second): 403 with S3's body, or the asked status.
            let expired = String(server.signedURL("f.bin", ttl: 0).dropFirst(server.baseURL.count))
            let late = try fetch(server, expired, ["Range: bytes=0-99"])
            #expect(late.status == 403)
            #expect(String(decoding: late.body, as: UTF8.self).contains("<Message>Request has expired</Message>"))
            let gone = String(server.signedURL("f.bin", ttl: 0, query: "status=410").dropFirst(server.baseURL.count))
            #expect(try fetch(server, gone).status == 410)
            // version=2 is another object under the name; /_sign mints URLs with the other parameters kept.
            let v2 = String(server.signedURL("f.bin", ttl: 60, query: "version=2").dropFirst(server.baseURL.count))
            let other = try fetch(server, v2, ["Range: bytes=0-99"])
            #expect(other.status == 206 && other.body != ok.body && other.headers["etag"] != ok.headers["etag"])
            let minted = try fetch(server, "/_sign/f.bin?ttl=60&max=10")
            let url = String(decoding: minted.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(minted.status == 200 && url.hasPrefix(server.baseURL + "/expiring/f.bin?expires="))
            let capped = try fetch(server, String(url.dropFirst(server.baseURL.count)), ["Range: bytes=0-99"])
            #expect(capped.status == 206 && capped.headers["content-range"] == "bytes 0-9/100000")
        }
    }

    @Test func dispositionIsSentRaw() throws {
        try withServer(["f.bin": body]) { server in
            let r = try fetch(server, "/disposition/f.bin?cd=attachment%3B%20filename%3D%22..%2F..%2Fetc%2Fpasswd%22")
            #expect(r.headers["content-disposition"] == "attachment; filename=\"../../etc/passwd\"")
        }
    }

    @Test func dropClosesAfterKBytesForTheFirstTimes() throws {
        try withServer(["f.bin": body]) { server in
            let dropped = try fetch(server, "/drop/f.bin?after=500&times=1")
            #expect(!dropped.complete && dropped.body.count == 500)
            let whole = try fetch(server, "/drop/f.bin?after=500&times=1")
            #expect(whole.complete && whole.body == body)
        }
    }

    @Test func stallHoldsTheConnectionUntilStop() throws {
        let server = try TestServer()
        server.addResource(name: "f.bin", bytes: body)
        try server.start()
        let client = try RawClient(port: server.port)
        try client.request("GET", "/stall/f.bin?after=1000")
        let start = Date()
        // The head and 1000 bytes arrive, then nothing: the read below ends only because stop() closes it.
        let stopper = Thread {
            Thread.sleep(forTimeInterval: 0.5)
            server.stop()
        }
        stopper.start()
        let r = try client.readResponse()
        #expect(r.body.count == 1000)
        #expect(!r.complete)
        #expect(Date().timeIntervalSince(start) >= 0.4)
        server.stop()
        #expect(server.bodyBytesSent == 1000)
    }

    @Test func curlFollowsARedirectChain() throws {
        let path = NSTemporaryDirectory() + "segget-testserver-\(UUID().uuidString).out"
        defer { unlink(path) }
        try withServer(["f.bin": body]) { server in
            let (status, output) = try run(
                "/usr/bin/env",
                ["curl", "-s", "-L", "-o", path, "-w", "%{http_code} %{num_redirects}", server.baseURL + "/redirect/f.bin?hops=3"])
            #expect(status == 0)
            #expect(output == "200 3")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(body))
            #expect(server.requests.map(\.status) == [302, 302, 302, 200])
            let loop = try fetch(server, "/redirect/f.bin?loop=1")
            #expect(loop.headers["location"] == server.baseURL + "/redirect/f.bin?loop=1")
            let to = try fetch(server, "/redirect/f.bin?to=http%3A%2F%2Fexample.invalid%2Fx&code=301")
            #expect(to.status == 301 && to.headers["location"] == "http://example.invalid/x")
        }
    }

    /// The executable as shell tests use it: first line names the URL, --log gets one line per request,
    /// SIGTERM ends it cleanly.
    @Test func executablePrintsURLLogsAndExitsOnSIGTERM() throws {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("segget-testserver").path
        // `swift test` may run from inside an .xctest bundle; look one level up as well.
        let candidates = [
            executable,
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("segget-testserver").path,
        ]
        guard let binary = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            Issue.record("segget-testserver binary not found next to the test bundle: \(candidates)")
            return
        }
        let file = try temporaryFile(body)
        let log = NSTemporaryDirectory() + "segget-testserver-\(UUID().uuidString).log"
        defer {
            unlink(file)
            unlink(log)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--file", "f.bin=\(file)", "--log", log]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        var firstLine: [UInt8] = []
        while true {
            let byte = pipe.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte.first == 10 { break }
            firstLine += byte
        }
        let line = String(decoding: firstLine, as: UTF8.self)
        #expect(line.hasPrefix("listening on http://127.0.0.1:"))
        let port = Int(line.split(separator: ":").last ?? "") ?? 0
        let client = try RawClient(port: port)
        try client.request("GET", "/f.bin", ["Range: bytes=0-99", "Connection: close"])
        let r = try client.readResponse()
        #expect(r.body == Array(body[0..<100]))
        // `/_stats` (what benchmarks poll between runs) and a malformed request are logged too, with
        // their arrival times; the server still answers after them (a stats line logged with no
        // arrival time once stopped the server).
        let stats = try RawClient(port: port)
        try stats.request("GET", "/_stats", ["Connection: close"])
        #expect(try stats.readResponse().status == 200)
        let malformed = try RawClient(port: port)
        try malformed.send("NOT HTTP\r\n\r\n")
        _ = malformed.readUpTo(1)
        let again = try RawClient(port: port)
        try again.request("GET", "/f.bin", ["Range: bytes=0-9", "Connection: close"])
        #expect(try again.readResponse().body == Array(body[0..<10]))
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(lines)")
        #expect(lines.dropFirst().allSatisfy { $0.split(separator: " ").count == 7 }, "\(lines)")
        let logged = (lines.first ?? "") + "\n"
        // METHOD PATH STATUS BODYBYTES REMOTEPORT ARRIVED SERVED: seconds since the start, and no
        // worker queue here.
        let fields = logged.split(separator: " ").map(String.init)
        #expect(fields.count == 7 && fields.prefix(5) == ["GET", "/f.bin", "206", "100", "\(client.localPort)"], "\(logged)")
        #expect(fields.count == 7 && Double(fields[5]).map { $0 >= 0 && $0 < 60 } == true && fields[6] == "-\n", "\(logged)")
    }
}

// MARK: - Connection limits (maxconc)

extension TestServerTests {
    /// Opens a request that stays in flight (a `stall` body: 10 bytes, then the connection held)
    /// and waits until its response has started.
    private func holdRequest(_ server: TestServer, _ target: String) throws -> RawClient {
        let client = try RawClient(port: server.port)
        try client.request("GET", target, ["Range: bytes=0-999"])
        _ = client.readUpTo(10)
        return client
    }

    /// With `maxconc=2`, the third request while two are in flight gets 429 at once (no Retry-After,
    /// no rate-limit fields unless asked); once one finishes, the next is admitted again.
    @Test func concurrencyLimitRejectsOnlyTheExtraRequests() throws {
        try withServer(["f.bin": body]) { server in
            let target = "/stall/f.bin?after=10&maxconc=2"
            var first: RawClient? = try holdRequest(server, target)
            let second = try holdRequest(server, target)
            let start = Date()
            let third = try fetch(server, target, ["Range: bytes=0-999"])
            // At once: a third admitted or queued would wait for the stalled two, which never end.
            #expect(Date().timeIntervalSince(start) < 5)
            #expect(third.status == 429)
            #expect(third.headers["retry-after"] == nil)
            #expect(third.headers["ratelimit"] == nil && third.headers["ratelimit-limit"] == nil)
            #expect(server.concurrency.admitted == 2 && server.concurrency.rejected == 1)
            #expect(server.concurrency.inFlight == 2 && server.concurrency.maxInFlight == 2)
            #expect(server.concurrency.maxDemand == 3)
            // Another target (or a normal request for the same file) has a limit of its own.
            #expect(try fetch(server, "/f.bin?maxconc=2", ["Range: bytes=0-9"]).status == 206)

            #expect(first != nil)
            first = nil  // closes the connection: its slot is free as soon as the server sees that
            #expect(waitUntil(timeout: 5) { server.concurrency.inFlight == 1 })
            let fourth = try holdRequest(server, target)
            #expect(server.requests.last?.status == 206)
            #expect(server.concurrency.rejected == 1)
            #expect(server.concurrency.maxInFlight == 2)
            withExtendedLifetime((second, fourth)) {}
        }
    }

    @Test func rejectionCarriesTheStatusAndFieldsAsked() throws {
        try withServer(["f.bin": body]) { server in
            func rejected(_ query: String) throws -> RawResponse {
                let target = "/stall/f.bin?after=10&maxconc=1&" + query
                let holder = try holdRequest(server, target)
                return try withExtendedLifetime(holder) { try fetch(server, target, ["Range: bytes=0-999"]) }
            }
            let retry = try rejected("reject=503&retryafter=1")
            #expect(retry.status == 503)
            #expect(retry.headers["retry-after"] == "1")
            #expect(retry.headers["ratelimit"] == nil)

            let draft = try rejected("ratelimit=1")
            #expect(draft.status == 429)
            #expect(draft.headers["retry-after"] == nil)
            #expect(draft.headers["ratelimit-policy"] == "\"conc\";q=1;qu=\"concurrent-requests\"")
            #expect(draft.headers["ratelimit"] == "\"conc\";r=0;t=1")
            #expect(draft.headers["ratelimit-limit"] == nil)

            let legacy = try rejected("ratelimit=legacy&reset=2")
            #expect(legacy.headers["ratelimit-limit"] == "1")
            #expect(legacy.headers["ratelimit-remaining"] == "0")
            #expect(legacy.headers["ratelimit-reset"] == "2")
            #expect(legacy.headers["ratelimit"] == nil)

            #expect(server.concurrency.rejected == 3 && server.concurrency.admitted == 3)
        }
    }

    /// Admitted responses carry the rate-limit fields too, with the quota that remains.
    @Test func admittedResponsesCarryTheRemainingQuota() throws {
        try withServer(["f.bin": body]) { server in
            let target = "/f.bin?maxconc=3&ratelimit=1&retryafter=2"
            let r = try fetch(server, target, ["Range: bytes=0-9"])
            #expect(r.status == 206)
            #expect(r.headers["ratelimit"] == "\"conc\";r=2;t=2")
            #expect(r.headers["retry-after"] == nil)
            // The slot is given back just after the last byte went out.
            #expect(waitUntil(timeout: 5) { server.concurrency.inFlight == 0 })
            #expect(server.concurrency.admitted == 1)
        }
    }

    /// A trickling or silent response holds its slot; the client closing frees it at once.
    @Test func silentSlowRequestHoldsItsSlotUntilTheClientLeaves() throws {
        try withServer(["f.bin": body]) { server in
            let target = "/f.bin?maxconc=1&slowfirst=1&slowrate=0&slowafter=100"
            var holder: RawClient? = try RawClient(port: server.port)
            try holder?.request("GET", target, ["Range: bytes=0-999"])
            #expect(waitUntil(timeout: 5) { lastSent(server) == 100 })
            #expect(try fetch(server, target, ["Range: bytes=0-999"]).status == 429)
            #expect(holder != nil)
            holder = nil
            #expect(waitUntil(timeout: 5) { server.concurrency.inFlight == 0 })
            let after = try fetch(server, target, ["Range: bytes=0-999"])
            #expect(after.status == 206 && after.body == Array(body[0..<1000]))
            #expect(server.concurrency.rejected == 1 && server.concurrency.admitted == 2)
        }
    }

    /// `GET /_stats` serves the counts as one line; `?reset=1` clears them after answering.
    @Test func statsEndpointReportsTheCounts() throws {
        try withServer(["f.bin": body]) { server in
            _ = try fetch(server, "/f.bin?maxconc=1", ["Range: bytes=0-9"])
            #expect(waitUntil(timeout: 5) { server.concurrency.inFlight == 0 })
            let stats = try fetch(server, "/_stats?reset=1")
            #expect(stats.status == 200)
            let line = String(decoding: stats.body, as: UTF8.self)
            #expect(line == "admitted=1 rejected=0 in-flight=0 max-in-flight=1 max-demand=1 workers-busy=0 workers-queued=0\n")
            #expect(server.concurrency == ConcurrencyStats())
        }
    }
}

// MARK: - Trickle shapes

extension TestServerTests {
    /// Bytes the server has sent for the latest request.
    private func lastSent(_ server: TestServer) -> Int64 { server.requests.last?.bodyBytesSent ?? -1 }

    /// `slowfraction` picks the same requests for the same seed, about the fraction asked, and
    /// other requests for another seed.
    @Test func slowFractionIsDeterministicBySeed() throws {
        let small = patternBytes(4096)
        try withServer(["f.bin": small]) { server in
            func slowSet(_ query: String) throws -> [Int] {
                var slow: [Int] = []
                for n in 1...10 {
                    let start = Date()
                    let r = try fetch(server, "/f.bin?" + query, ["Range: bytes=0-4095"])
                    #expect(r.body == small)
                    // 4 KiB at 8 KiB/s is 0.5 s and never less; unthrottled it is immediate, and a
                    // loaded machine still has a quarter of a second before it is taken for slow.
                    if Date().timeIntervalSince(start) > 0.25 { slow.append(n) }
                }
                return slow
            }
            let a = try slowSet("slowfraction=0.5&seed=7&slowrate=8k")
            let b = try slowSet("slowfraction=0.5&seed=7&slowrate=8k&run=2")
            let c = try slowSet("slowfraction=0.5&seed=8&slowrate=8k")
            #expect(a == b)
            #expect((2...8).contains(a.count), "\(a)")
            #expect(a != c, "\(a) \(c)")
        }
    }

    /// `slowfrom` slows the bytes at or past a file offset, whatever the range: a range below it is
    /// fast, one across it slows at the offset, one past it trickles from its first byte.
    @Test func slowFromSlowsAtAFileOffset() throws {
        try withServer(["f.bin": body]) { server in
            let target = "/f.bin?slowfrom=32k&slowrate=1"
            let below = try fetch(server, target, ["Range: bytes=0-32767"])
            #expect(below.body == Array(body[0..<32768]))

            let across = try RawClient(port: server.port)
            let acrossStart = Date()
            try across.request("GET", target, ["Range: bytes=16384-65535"])
            // The fast part arrives whenever the machine gets to it; past it, 1 B/s.
            #expect(waitUntil(timeout: 10) { server.requests.count == 2 && lastSent(server) >= 16384 }, "\(server.requests)")
            Thread.sleep(forTimeInterval: 0.6)
            let acrossSent = lastSent(server)
            let acrossTrickle = Int64(Date().timeIntervalSince(acrossStart)) + 2
            #expect(acrossSent >= 16384 && acrossSent <= 16384 + acrossTrickle, "\(acrossSent)")

            let past = try RawClient(port: server.port)
            let pastStart = Date()
            try past.request("GET", target, ["Range: bytes=40000-49999"])
            #expect(waitUntil(timeout: 10) { server.requests.count == 3 }, "\(server.requests)")
            Thread.sleep(forTimeInterval: 0.6)
            #expect(lastSent(server) <= Int64(Date().timeIntervalSince(pastStart)) + 2, "\(lastSent(server))")
            withExtendedLifetime((across, past)) {}
        }
    }

    /// With a selector, `slowfrom` slows only the selected requests.
    @Test func slowFromWithASelectorSlowsOnlyTheSelectedRequests() throws {
        try withServer(["f.bin": body]) { server in
            let target = "/f.bin?slowfrom=32k&slowevery=2&slowrate=1"
            #expect(try fetch(server, target, ["Range: bytes=0-65535"]).body == Array(body[0..<65536]))
            let second = try RawClient(port: server.port)
            let start = Date()
            try second.request("GET", target, ["Range: bytes=0-65535"])
            #expect(waitUntil(timeout: 10) { server.requests.count == 2 && lastSent(server) >= 32768 }, "\(lastSent(server))")
            Thread.sleep(forTimeInterval: 0.6)
            let trickle = Int64(Date().timeIntervalSince(start)) + 2
            #expect((32768...32768 + trickle).contains(lastSent(server)), "\(lastSent(server))")
            withExtendedLifetime(second) {}
        }
    }

    /// `ramp` slows gradually: after a while some but not all of the ramp's bytes are out, and the
    /// ramp ends at the slow rate.
    @Test func rampSlowsGradually() throws {
        let big = patternBytes(300 * 1024)
        try withServer(["f.bin": big]) { server in
            // 256 KiB/s falling linearly to 1 B/s over 64 KiB: x(t) = 64 KiB (1 - e^(-4t)).
            // Polled rather than sampled at fixed times, so that a loaded machine, which only slows the
            // server down, cannot fail it: the count stays inside the window below for most of a second.
            let client = try RawClient(port: server.port)
            let start = Date()
            try client.request("GET", "/f.bin?rate=256k&slowfirst=1&slowrate=1&ramp=64k", ["Range: bytes=0-307199"])
            var early: Int64 = -1
            #expect(waitUntil(timeout: 10) { early = lastSent(server); return early > 16 * 1024 && early < 62 * 1024 },
                    "never part-way through the ramp: \(early) bytes")
            #expect(waitUntil(timeout: 10) { lastSent(server) > 56 * 1024 }, "\(lastSent(server)) bytes")
            // At 256 KiB/s throughout, 56 KiB would be out in 0.22 s; the ramp takes about 0.5 s.
            #expect(Date().timeIntervalSince(start) >= 0.35, "no gradual slowdown: 56 KiB in \(Date().timeIntervalSince(start)) s")
            Thread.sleep(forTimeInterval: 1)
            let late = lastSent(server)
            let trickle = Int64(Date().timeIntervalSince(start)) + 3
            #expect(late > early && late <= 64 * 1024 + trickle, "\(late) bytes after \(Date().timeIntervalSince(start)) s")
            withExtendedLifetime(client) {}
        }
    }

    /// `firstbyte` delays every head; `slowfirstbyte` only the slow requests' heads.
    @Test func firstByteDelaysTheHead() throws {
        try withServer(["f.bin": body]) { server in
            var start = Date()
            #expect(try fetch(server, "/f.bin?firstbyte=0.4", ["Range: bytes=0-9"]).status == 206)
            #expect(Date().timeIntervalSince(start) >= 0.35)

            var elapsed: [Double] = []
            for _ in 0..<2 {
                start = Date()
                let r = try fetch(server, "/f.bin?slowevery=2&slowfirstbyte=1.5", ["Range: bytes=0-9"])
                #expect(r.body == Array(body[0..<10]))
                elapsed.append(Date().timeIntervalSince(start))
            }
            // The first is immediate; a loaded machine gets a second before it looks delayed.
            #expect(elapsed[0] < 1 && elapsed[1] >= 1.45, "\(elapsed)")
        }
    }

    /// `slowrate=0` after `slowafter` bytes: silence with the connection open; the request after it
    /// (not slow) is whole.
    @Test func zeroSlowRateFallsSilentAfterNBytes() throws {
        try withServer(["f.bin": body]) { server in
            let target = "/f.bin?slowfirst=1&slowrate=0&slowafter=1000"
            let client = try RawClient(port: server.port)
            try client.request("GET", target, ["Range: bytes=0-9999"])
            #expect(waitUntil(timeout: 5) { lastSent(server) == 1000 })
            Thread.sleep(forTimeInterval: 0.5)
            #expect(lastSent(server) == 1000)
            let next = try fetch(server, target, ["Range: bytes=0-9999"])
            #expect(next.body == Array(body[0..<10000]))
            withExtendedLifetime(client) {}
        }
    }
}

import Glibc
import Testing

/// A plain-http download through an HTTP proxy that answers an error itself (a 502 when it cannot reach
/// the server): the message names the proxy, which may have given the answer. It blamed the server
/// alone ("http://origin… answered HTTP 502; the server failed").
@Suite(.serialized) struct ProxyAnswerTests {
    @Test func anErrorAnsweredThroughAnHTTPProxyNamesTheProxy() async throws {
        let bad = Array("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        let proxy = try ByteResponder(answers: Array(repeating: bad, count: 8))
        defer { proxy.stop() }
        let dir = try TempDir()
        // The test processes' NO_PROXY=* would bypass even --proxy (as libcurl has it).
        let p = try SpawnedProcess(
            executable: try SpawnedProcess.seggetPath(),
            arguments: ["--retries", "0", "--proxy", "http://127.0.0.1:\(proxy.port)", "-o", dir.path("out.bin"), "http://origin.invalid/f.bin"],
            environment: ["NO_PROXY": ""])
        let r = p.wait(timeout: 60)
        #expect(r.exitCode == 4, "\(r.exitCode): \(r.stderr)")
        #expect(r.stderr.contains("http://origin.invalid/f.bin answered HTTP 502 through the proxy http://127.0.0.1:\(proxy.port), which may have given that answer itself"),
                "\(r.stderr)")
        #expect(proxy.requestLines.first.map { String(decoding: $0, as: UTF8.self) } == "GET http://origin.invalid/f.bin HTTP/1.1")
        #expect(access(dir.path("out.bin"), F_OK) != 0)
    }

    /// A proxy that refuses the tunnel to an https URL (403 to its `CONNECT`): the message is the
    /// proxy's refusal, not the server's answer (a probe that takes an error's head as the answer
    /// once read it as "https://origin… answered HTTP 403; access is forbidden").
    @Test func aRefusedTunnelIsTheProxys() async throws {
        let refused = Array("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        let proxy = try ByteResponder(answers: Array(repeating: refused, count: 8))
        defer { proxy.stop() }
        let dir = try TempDir()
        let p = try SpawnedProcess(
            executable: try SpawnedProcess.seggetPath(),
            arguments: ["--retries", "0", "--proxy", "http://127.0.0.1:\(proxy.port)", "-o", dir.path("out.bin"), "https://origin.invalid/f.bin"],
            environment: ["NO_PROXY": ""])
        let r = p.wait(timeout: 60)
        #expect(r.stderr.contains("refused the tunnel to https://origin.invalid/f.bin with HTTP 403"), "\(r.exitCode): \(r.stderr)")
        #expect(!r.stderr.contains("access is forbidden"), "\(r.stderr)")
        #expect(proxy.requestLines.first.map { String(decoding: $0, as: UTF8.self) }?.hasPrefix("CONNECT origin.invalid:443") == true)
    }
}

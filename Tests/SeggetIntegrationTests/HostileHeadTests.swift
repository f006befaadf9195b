import Glibc
import SeggetTestServer
import Testing

/// Answers found by fuzzing segget with a server that mutates its heads (Benchmarks/RESULTS.md,
/// 2026-12-03): each crashed segget, held it past its bounds, left a wrong file with exit 0, or got
/// the wrong exit code. Each answer here is the smallest one that did it, sent by `ByteResponder`.
@Suite(.serialized) struct HostileHeadTests {
    static let body = TestFiles.pattern(2 << 20, seed: 31)

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Runs segget on `answers` (one a request, then 404s) with `args` before the URL.
    static func run(_ answers: [[UInt8]], _ args: [String]) async throws -> (exitCode: Int32, stdout: String, stderr: String) {
        let server = try ByteResponder(answers: answers)
        defer { server.stop() }
        return try await runSeggetAsync(args: args + ["http://127.0.0.1:\(server.port)/f.bin"], timeout: 60)
    }

    static func nothingUnder(_ path: String) -> Bool { access(path, F_OK) != 0 }

    /// A range that ends at byte 2^63 - 1 of a file of unknown length has a count of bytes no Int64
    /// holds: before, the probe trapped working it out (exit 132), with a body or without one.
    @Test(arguments: [false, true])
    func aRangeEndingAtTheLastInt64IsRefused(bodyOverAMebibyte: Bool) async throws {
        let dir = try TempDir()
        let head = bodyOverAMebibyte
            ? "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9223372036854775807/*\r\n\r\n"
            : "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9223372036854775807/*\r\nContent-Length: 1\r\n\r\n"
        let answer = Self.bytes(head) + [UInt8](repeating: 120, count: bodyOverAMebibyte ? (1 << 20) + 1 : 1)
        let r = try await Self.run([answer, answer], ["--retries", "1", "--retry-wait", "0.05", "-o", dir.path("out.bin")])
        // The range is refused as unusable; the request over one connection from the start gets the
        // same 206, an answer a request without a range cannot take: the server contradicts itself
        // (exit 7; it was exit 4, "the server refused the request", until exploratory run 5).
        #expect(r.exitCode == 7, "\(r.exitCode): \(r.stderr)")
        #expect(r.stderr.contains("unusable Content-Range") && !r.stderr.contains("Fatal error"), "\(r.stderr)")
        #expect(r.stderr.contains("206 Partial Content, which only a range request may get"), "\(r.stderr)")
        #expect(Self.nothingUnder(dir.path("out.bin")))
    }

    /// A head cut before its blank line is a cut answer: before, libcurl's success for it made an
    /// empty file under the final name, exit 0, also after a probe that said the file had 2 MiB.
    @Test func aHeadCutBeforeItsEndIsNoAnswer() async throws {
        let dir = try TempDir()
        let cut = Self.bytes("HTTP/1.1 200 OK\r\n")
        let alone = try await Self.run([cut, cut], ["--retries", "1", "--retry-wait", "0.05", "-o", dir.path("a.bin")])
        #expect(alone.exitCode == 3, "\(alone.exitCode): \(alone.stderr)")
        #expect(alone.stderr.contains("the connection closed before the end of the answer"), "\(alone.stderr)")
        #expect(Self.nothingUnder(dir.path("a.bin")))

        let probe = Self.bytes("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-65535/\(Self.body.count)\r\nContent-Length: 65536\r\n\r\n")
            + Self.body[0..<65536]
        let afterProbe = try await Self.run([probe] + Array(repeating: cut, count: 8),
                                            ["-n", "1", "--retries", "2", "--retry-wait", "0.05", "-o", dir.path("b.bin")])
        #expect(afterProbe.exitCode == 3, "\(afterProbe.exitCode): \(afterProbe.stderr)")
        #expect(Self.nothingUnder(dir.path("b.bin")))
    }

    /// A body of unknown length cut after more bytes than its retry then brings whole: the two
    /// answers are not the same file. Before, the part file kept the first answer's tail past the
    /// second's end and was published, exit 0 (2,097,157 bytes for a 2 MiB file).
    @Test(arguments: [false, true])
    func aRetryThatEndsShortOfAnEarlierAnswerFails(toStdout: Bool) async throws {
        let dir = try TempDir()
        let chunk = Self.body + Self.bytes("EXTRA")
        let cut = Self.bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\(String(chunk.count, radix: 16))\r\n") + chunk
        let whole = Self.bytes("HTTP/1.1 200 OK\r\nContent-Length: \(Self.body.count)\r\n\r\n") + Self.body
        let r = try await Self.run([cut, whole], ["--retry-wait", "0.05", "-o", toStdout ? "-" : dir.path("out.bin")])
        #expect(r.exitCode == 7, "\(r.exitCode): \(r.stderr)")
        #expect(r.stderr.contains("the server's answers disagree"), "\(r.stderr)")
        #expect(Self.nothingUnder(dir.path("out.bin")))
        #expect(!r.stderr.contains("bytes early"), "an unknown length has no count of missing bytes: \(r.stderr)")
    }

    /// A stream (`-o -`) has no disk to refuse a length past belief: 2^48 bytes held it planning past
    /// `--timeout`, 2^63 - 1 trapped (exit 132). Now it says the length is more than a stream plans.
    @Test(arguments: ["281474976710656", "9223372036854775807"])
    func aStreamOfAnUnbelievableLengthIsRefused(total: String) async throws {
        let answer = Self.bytes("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-0/\(total)\r\nContent-Length: 1\r\n\r\nx")
        let started = nowSeconds()
        let r = try await Self.run([answer], ["--timeout", "20", "-o", "-"])
        #expect(r.exitCode == 7, "\(r.exitCode): \(r.stderr)")
        #expect(r.stderr.contains("more than a stream plans") && r.stderr.contains("--chunk-size"), "\(r.stderr)")
        #expect(nowSeconds() - started < 15)
    }

    /// A `101 Switching Protocols` segget did not ask for, then a 206: libcurl hands what follows the
    /// 101 over as a body no head came for. It ended with libcurl's "Failed writing received data to
    /// disk/application" (exit 3); now the protocol violation is named (exit 7), nothing saved.
    @Test func anUnaskedSwitchOfProtocolsIsNamed() async throws {
        let dir = try TempDir()
        let answer = Self.bytes(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"
                + "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/10\r\nContent-Length: 10\r\n\r\n0123456789")
        let r = try await Self.run([answer, answer, answer], ["--retries", "1", "--retry-wait", "0.05", "-o", dir.path("out.bin")])
        #expect(r.exitCode == 7, "\(r.exitCode): \(r.stderr)")
        #expect(r.stderr.contains("switched protocols (101 Switching Protocols)") && !r.stderr.contains("Failed writing"), "\(r.stderr)")
        #expect(Self.nothingUnder(dir.path("out.bin")))
    }

    /// A Metalink the server points to that trickles (2 bytes a second: never slow enough for the
    /// low-speed limit) held the download with no range asked for as long as it trickled (10,000
    /// bytes: 80 minutes); now it is given up after `metalinkFetchSeconds` (20 s) and the download
    /// goes on without it.
    @Test func aTricklingMetalinkHoldsTheDownloadNoLongerThanItsBound() async throws {
        let body = TestFiles.pattern(4 << 20, seed: 32)
        let mirror = try TestServer()
        mirror.addResource(name: "f.bin", bytes: body, etag: "\"f\"")
        try mirror.start()
        let redirector = try TestServer()
        try redirector.start()
        defer { [mirror, redirector].forEach { $0.stop() } }
        redirector.addFixedAnswer(
            path: "/f.bin.meta4", status: 200, headers: [("Content-Type", "application/metalink4+xml")],
            body: [UInt8](repeating: 32, count: 10_000), rate: 2)
        redirector.addFixedAnswer(
            path: "/f.bin", status: 302,
            headers: [
                ("Location", mirror.url("f.bin")),
                ("Link", "<\(redirector.baseURL)/f.bin.meta4>; rel=describedby; type=\"application/metalink4+xml\""),
            ])
        let dir = try TempDir()
        let started = nowSeconds()
        let r = try await runSeggetAsync(args: ["-n", "4", "-o", dir.path("f.bin"), redirector.baseURL + "/f.bin"], timeout: 90)
        let seconds = nowSeconds() - started
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(fileBytes(dir.path("f.bin")) == body)
        #expect(seconds >= 19 && seconds < 45, "took \(seconds) s")
        #expect(r.stderr.contains("cannot be used") && r.stderr.contains("timed out"), "\(r.stderr)")
    }

    /// An answer that does not start with an HTTP status line is the server's fault (exit 7, one
    /// more try), not the user's URL: before, exit 2 and "uses a scheme segget does not download".
    @Test func anAnswerThatIsNotHTTPIsTheServers() async throws {
        let dir = try TempDir()
        let answer = Self.bytes("xHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
        let r = try await Self.run([answer, answer], ["-o", dir.path("out.bin")])
        #expect(r.exitCode == 7, "\(r.exitCode): \(r.stderr)")
        #expect(r.stderr.contains("does not start as HTTP does") && !r.stderr.contains("scheme"), "\(r.stderr)")
        #expect(Self.nothingUnder(dir.path("out.bin")))
    }
}

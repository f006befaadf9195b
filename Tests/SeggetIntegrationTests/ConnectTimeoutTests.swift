import Glibc
import SeggetJournal
import SeggetTestServer
import Testing

@testable import Segget

/// A loopback port where a connection is never made: a listener that never accepts, its queue
/// filled, so the kernel drops every new SYN and a client waits in `SYN_SENT` until it gives up.
private final class UnansweredPort {
    private let listener: Int32
    private var fillers: [Int32] = []
    let port: Int

    init() throws {
        (listener, port) = try loopbackListener(backlog: 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        // A queue of length 0 still takes one connection; the next SYNs are dropped.
        for _ in 0..<2 {
            let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            _ = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            fillers.append(s)
        }
        usleep(100_000)
    }

    deinit {
        for s in fillers { close(s) }
        close(listener)
    }
}

/// libcurl says "Timeout was reached" for every timeout; a connection that was never made is named
/// as such, with the option that sets its limit.
@Suite(.serialized) struct ConnectTimeoutTests {
    @Test func aServerThatNeverAcceptsIsNamedWithTheConnectTimeout() throws {
        let silent = try UnansweredPort()
        let dir = try TempDir(prefix: "segget-connect-timeout")
        let url = "http://127.0.0.1:\(silent.port)/f.bin"
        let r = try runSegget(args: ["--connect-timeout", "0.5", "--retries", "0", "-o", dir.path("f.bin"), url], timeout: 30)
        #expect(r.exitCode == 3, "\(r.stderr)")
        #expect(r.stderr.contains("could not connect to \(url) within 0.5 s (--connect-timeout)"), "\(r.stderr)")
        #expect(!TestFiles.exists(dir.path("f.bin")))
    }

    /// A silent answer on a kept-alive connection is not a connection never made (libcurl's connect
    /// time is 0 on a reused connection too): the second file of a list, asked on the first one's
    /// connection from a server that never answers it, times out as before.
    @Test func aSilentAnswerOnAReusedConnectionIsNotAConnectTimeout() throws {
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        server.addResource(name: "a.bin", bytes: TestFiles.pattern(1000, seed: 1))
        server.addResource(name: "b.bin", bytes: TestFiles.pattern(1000, seed: 2))
        let dir = try TempDir(prefix: "segget-connect-timeout")
        let r = try runSegget(args: [
            "-j", "1", "--stall-timeout", "1", "--retries", "0", "-d", dir.path,
            server.url("a.bin"), server.url("b.bin", mode: .silent),
        ], timeout: 60)
        #expect(r.exitCode == 3, "\(r.stderr)")
        #expect(TestFiles.exists(dir.path("a.bin")))
        #expect(r.stderr.contains("timed out"), "\(r.stderr)")
        #expect(!r.stderr.contains("could not connect"), "\(r.stderr)")
        #expect(server.connectionsAccepted == 1, "\(server.connectionsAccepted) connections")
    }

    /// A mirror is probed beside the fetch: dropped with the probe's message, the download goes on
    /// without it (paced to last beyond the connection timeout: a notice after the end is not shown).
    @Test func aMirrorThatNeverAcceptsIsDroppedWithTheReason() throws {
        let silent = try UnansweredPort()
        let server = try TestServer()
        try server.start()
        defer { server.stop() }
        let body = TestFiles.pattern(3 << 20, seed: 5)
        server.addResource(name: "m.bin", bytes: body)
        let dir = try TempDir(prefix: "segget-connect-timeout")
        let mirror = "http://127.0.0.1:\(silent.port)/m.bin"
        let r = try runSegget(args: [
            "-n", "4", "--chunk-size", "256k", "--connect-timeout", "0.5", "--retries", "1", "--retry-wait", "0.05",
            "--mirror", mirror, "-o", dir.path("m.bin"), server.url("m.bin", query: "rate=1m"),
        ], timeout: 60)
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(TestFiles.fileDifference(dir.path("m.bin"), body) == nil)
        #expect(r.stderr.contains("could not connect to \(mirror) within 0.5 s (--connect-timeout)"), "\(r.stderr)")
    }

    /// A stall timeout below the connection timeout does not cut a connect: a range's connection
    /// that is never made fails by the connection timeout, after it, not as a stall before it.
    @Test func aStallTimeoutBelowTheConnectTimeoutLeavesTheConnectAlone() throws {
        let started = monotonicSeconds()
        let message = try Self.fetchFromUnansweredPort {
            $0.retries = 0
            $0.transfer.connectTimeout = 1.5
            $0.transfer.stallTimeout = 0.3
        }
        let took = monotonicSeconds() - started
        #expect(message.contains("(last: could not connect within 1.5 s (--connect-timeout))"), "\(message)")
        #expect(took >= 1.4, "failed after \(took) s")
    }

    /// A range's connection that is never made: the retries' last reason names the connection
    /// timeout, not libcurl's "Timeout was reached", by the name it was set by: the command line's
    /// flag, or a daemon task's option (its message named a flag the daemon does not have).
    @Test(arguments: ["--connect-timeout", "connect-timeout"])
    func aRangeWhoseConnectionIsNeverMadeSaysSo(_ name: String) throws {
        let message = try Self.fetchFromUnansweredPort {
            $0.retries = 1
            $0.retryWait = 0.05
            $0.transfer.connectTimeout = 0.5
            $0.connectTimeoutName = name
        }
        #expect(message.contains("(last: could not connect within 0.5 s (\(name)))"), "\(message)")
    }

    /// One range of 1 MiB fetched on one connection from a port that never accepts, with the
    /// settings `configure` gives; the message of the error that ended it.
    private static func fetchFromUnansweredPort(_ configure: (inout FetchSettings) -> Void) throws -> String {
        let silent = try UnansweredPort()
        let dir = try TempDir(prefix: "segget-connect-timeout")
        let size: Int64 = 1 << 20
        let file = try PosixFile.open(path: dir.path("out.bin"), mode: .createExclusive(permissions: 0o600))
        defer { file.close() }
        try file.truncate(to: size)
        var settings = FetchSettings()
        settings.connections = 1
        settings.writePath = .pageCache
        configure(&settings)
        let plan = ChunkPlan(totalLength: size, chunkSize: 1 << 20)
        let target = FetchTarget(url: "http://127.0.0.1:\(silent.port)/f", totalLength: size, ranged: true)
        let loop = DownloadLoop()
        let engine = FetchEngine(target: target, settings: settings, data: file, journal: nil, plan: plan, isFinished: { _ in false }, interrupt: InterruptFlag(), driver: loop.driver)
        let error = loop.run([engine])[0]
        return (error as? SeggetError)?.message ?? "\(String(describing: error))"
    }
}

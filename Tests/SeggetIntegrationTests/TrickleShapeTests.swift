import Segget
import SeggetTestServer
import Testing

/// Issue 23: the real engine against every trickling shape of the test server (see `FaultMode`'s
/// pacing table), on a fast (unthrottled) and on a paced server, with a 24 MiB file and `-n 8`
/// defaults otherwise. Each shape must finish byte-identical within three times the healthy time
/// (measured in the same test, on the same server) plus 5 s; a hard limit interrupts a download
/// that would never finish, so a hang fails the test rather than blocking the suite.
///
/// The shapes on the fast server run through the `segget` binary as well (`SEGGET_BIN` picks
/// another build): a release build receives faster than the debug library in this process and
/// meets the tail of the download in another state.
///
/// Shapes the engine of today does not meet reliably are in `failingToday`: checked inside an
/// intermittent `withKnownIssue`, so the suite stays green whether they pass or fail; each run prints
/// its outcome (`trickle shape …`). Take a shape out once the engine meets it.
@Suite(.serialized) struct TrickleShapeTests {
    static let size = 24 << 20

    /// A shape: the pacing of the healthy baseline (`base`) and the trickle added to it.
    struct Shape: Sendable, CustomTestStringConvertible {
        var base: String
        var trickle: String
        var testDescription: String { (base.isEmpty ? "unthrottled" : base) + " + " + trickle }
    }

    static let fast = [
        "slowevery=3&slowrate=1",
        "slowevery=3&slowrate=1&slowafter=256k",
        "slowfraction=0.3&seed=7&slowrate=1",
        "slowfrom=16m&slowevery=3&slowrate=1",
        "slowevery=3&slowrate=1&slowafter=128k&ramp=1m",
        "slowevery=3&slowrate=0&slowafter=64k",
        "slowevery=3&slowfirstbyte=30",
    ].map { Shape(base: "", trickle: $0) }

    static let paced = [
        "slowevery=3&slowrate=1",
        "slowevery=3&slowrate=1&slowafter=256k",
        "slowfirst=5&slowrate=1",
        "slowports=01&slowrate=1",
        "slowfraction=0.3&seed=7&slowrate=1",
        "slowfrom=20m&slowrate=512k",
        "slowfrom=12m&slowevery=3&slowrate=1",
        "slowevery=3&slowrate=1&slowafter=128k&ramp=1m",
        "slowevery=3&slowrate=0&slowafter=64k",
        "slowevery=3&slowfirstbyte=30",
        "firstbyte=0.3",
    ].map { Shape(base: "rate=4m", trickle: $0) }

    /// Shapes on which the engine of 2026-11-25 (dec243e) does not finish within the bound every
    /// time, all on the fast server. A request that goes silent (after 64 KiB, or before its head)
    /// is left to the 20 s stall timeout: in the library, every third request silent after 64 KiB
    /// sat at 24,182,784 of 25,165,824 bytes with no re-dial until the hard limit (8.3 to 8.6 s) in
    /// 3 of 4 runs; every third head 30 s late sat at 24,117,248 bytes in 1 of 4; the release binary
    /// took 20.6 s in 5 of 6 runs of the two. Every third request at 1 B/s (issue 23's example): the
    /// release binary hung at 23.0 of 24.0 MiB, 2 to 3 B/s, in 4 of 5 runs (killed after 40 or
    /// 8.2 s), the debug binary in 5 of 9, the library at 24,117,255 bytes in 1 of 5 (else 0.4 to 0.9 s).
    /// Since the policy of issue 23 (slow rule on one measurement, exploration, late re-dials, finished
    /// requests of any speed teaching the typical rate), every shape is met: none is known to fail.
    static let failingToday: Set<String> = []

    @Test(arguments: fast + paced)
    func downloadFinishesWithinTheBound(_ shape: Shape) async throws {
        let body = TestFiles.pattern(Self.size, seed: 2323)
        let server = try TestServer.serving(body)
        defer { server.stop() }

        let healthyDir = try TempDir()
        let healthyURL = server.baseURL + "/f?" + (shape.base.isEmpty ? "" : shape.base + "&") + "run=healthy"
        let healthy = await boundedDownload(healthyURL, Self.options(healthyDir), hardLimit: 60)
        try #require(healthy.error == nil, "the healthy baseline failed: \(healthy)")
        #expect(TestFiles.fileDifference(healthyDir.path("out.bin"), body) == nil)

        let bound = 3 * healthy.seconds + 5
        let dir = try TempDir()
        let url = server.baseURL + "/f?" + (shape.base.isEmpty ? "" : shape.base + "&") + shape.trickle
        let run = await boundedDownload(url, Self.options(dir), hardLimit: bound + 3)
        let difference = run.error == nil ? TestFiles.fileDifference(dir.path("out.bin"), body) : "no file"
        let healthyTime = (healthy.seconds * 100).rounded() / 100
        let context = "\(shape.testDescription): \(run); healthy \(healthyTime) s"
        print("trickle shape \(context)")

        let check = {
            #expect(run.error == nil, "\(context)")
            #expect(difference == nil, "\(context)")
            #expect(run.seconds < bound, "\(context)")
        }
        if Self.failingToday.contains(shape.testDescription) {
            withKnownIssue(Self.knownIssue, isIntermittent: true, check)
        } else {
            check()
        }
    }

    static let knownIssue: Comment = "fails until the engine replaces trickling and silent requests in time"

    /// The fast-server shapes through the binary: `segget -n 8 -o OUT URL`, killed at the hard limit.
    @Test(arguments: fast)
    func binaryFinishesWithinTheBound(_ shape: Shape) async throws {
        let body = TestFiles.pattern(Self.size, seed: 2325)
        let server = try TestServer.serving(body)
        defer { server.stop() }

        let healthyDir = try TempDir()
        let healthy = try await Self.runBinary(server.baseURL + "/f?run=healthy", healthyDir, hardLimit: 60)
        try #require(healthy.exitCode == 0, "the healthy baseline failed: \(healthy.stderr)")
        #expect(TestFiles.fileDifference(healthyDir.path("out.bin"), body) == nil)

        let bound = 3 * healthy.seconds + 5
        let dir = try TempDir()
        let run = try await Self.runBinary(server.baseURL + "/f?" + shape.trickle, dir, hardLimit: bound + 3)
        let difference = run.exitCode == 0 ? TestFiles.fileDifference(dir.path("out.bin"), body) : "no file"
        let seconds = (run.seconds * 10).rounded() / 10
        let healthyTime = (healthy.seconds * 100).rounded() / 100
        let lastLines = run.stderr.split(separator: "\n").suffix(2).joined(separator: " / ")
        let end = run.timedOut ? "killed at the hard limit" : "exit \(run.exitCode)"
        let context =
            "\(shape.testDescription) (binary): \(end) after \(seconds) s; healthy \(healthyTime) s; \(lastLines)"
        print("trickle shape \(context)")

        let check = {
            #expect(run.exitCode == 0 && !run.timedOut, "\(context)")
            #expect(difference == nil, "\(context)")
            #expect(run.seconds < bound, "\(context)")
        }
        if Self.failingToday.contains(shape.testDescription) {
            withKnownIssue(Self.knownIssue, isIntermittent: true, check)
        } else {
            check()
        }
    }

    struct BinaryRun: Sendable {
        var exitCode: Int32
        var timedOut: Bool
        var seconds: Double
        var stderr: String
    }

    /// Runs `segget -n 8 -o DIR/out.bin URL` (progress lines on stderr), killed after `hardLimit` s.
    static func runBinary(_ url: String, _ dir: TempDir, hardLimit: Double) async throws -> BinaryRun {
        let out = dir.path("out.bin")
        return try await blocking {
            let started = nowSeconds()
            let p = try SpawnedProcess(
                executable: try SpawnedProcess.seggetPath(), arguments: ["-n", "8", "-o", out, url])
            let o = p.wait(timeout: hardLimit)
            return BinaryRun(
                exitCode: o.exitCode, timedOut: o.timedOut, seconds: nowSeconds() - started, stderr: o.stderr)
        }
    }

    /// `segget -n 8 -o OUT URL` as a user runs it: the library's defaults but for the output.
    static func options(_ dir: TempDir) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = 8
        o.outputPath = dir.path("out.bin")
        return o
    }
}

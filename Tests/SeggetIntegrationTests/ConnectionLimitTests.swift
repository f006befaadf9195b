import Segget
import SeggetTestServer
import Testing

/// Issue 23: the real engine against a server that serves at most 3 requests at a time per client
/// and answers the rest at once with 429 or 503 (`maxconc`), in every way such servers say so:
/// `Retry-After`, the IETF draft `RateLimit` fields, the older `RateLimit-*` triple, or nothing.
/// `-n 8` must finish byte-identical, with a handful of rejections (at most 8: the first burst of
/// connections beyond the limit, and a few tries), within three times the time of a `-n 3`
/// download from an unlimited server plus 5 s.
///
/// Variants the engine of today does not meet reliably are in `failingToday`: checked inside an
/// intermittent `withKnownIssue`, so the suite stays green whether they pass or fail; each run
/// prints its outcome (`connection limit …`). Take a variant out once the engine meets it.
@Suite(.serialized) struct ConnectionLimitTests {
    static let size = 24 << 20
    static let limit = 3

    static let variants = [
        "reject=429&retryafter=1",
        "reject=429&ratelimit=1",
        "reject=429&ratelimit=legacy",
        "reject=429",
        "reject=503",
        "reject=503&retryafter=1",
        // A trickling request holds its slot until the client lets it go.
        "reject=429&retryafter=1&slowevery=4&slowrate=1",
    ]

    /// Variants on which the engine of 2026-11-25 (dec243e) does not meet the checks every time: it
    /// finishes byte-identical within the bound, but the server rejected 5 to 87 requests per run
    /// (most of them from fresh connections near the end of the download), not at most 8.
    /// Since `HostLimit` (a refusal while others are in flight lowers the connection count), every
    /// variant is met: one rejection per run here.
    static let failingToday: Set<String> = []

    @Test(arguments: variants)
    func eightConnectionsAgainstALimitOfThree(_ variant: String) async throws {
        let body = TestFiles.pattern(Self.size, seed: 2324)
        let server = try TestServer.serving(body)
        defer { server.stop() }

        // The best a client can do: as many connections as the server allows.
        let healthyDir = try TempDir()
        var healthyOptions = Self.options(healthyDir)
        healthyOptions.connections = Self.limit
        let healthy = await boundedDownload(server.baseURL + "/f?rate=8m&run=healthy", healthyOptions, hardLimit: 60)
        try #require(healthy.error == nil, "the healthy baseline failed: \(healthy)")
        server.resetCounters()

        let bound = 3 * healthy.seconds + 5
        let dir = try TempDir()
        let url = server.baseURL + "/f?rate=8m&maxconc=\(Self.limit)&" + variant
        let run = await boundedDownload(url, Self.options(dir), hardLimit: bound + 3)
        let difference = run.error == nil ? TestFiles.fileDifference(dir.path("out.bin"), body) : "no file"
        let stats = server.concurrency
        let healthyTime = (healthy.seconds * 100).rounded() / 100
        let context =
            "\(variant): \(run); server \(stats); healthy (-n 3) \(healthyTime) s; \(Self.timeline(server.requests))"
        print("connection limit \(context)")

        #expect(stats.maxInFlight <= Self.limit, "\(context)")
        let check = {
            #expect(run.error == nil, "\(context)")
            #expect(difference == nil, "\(context)")
            #expect(run.seconds < bound, "\(context)")
            #expect(stats.rejected <= 8, "\(context)")
        }
        if Self.failingToday.contains(variant) {
            withKnownIssue("fails until the engine keeps to the server's connection limit", isIntermittent: true, check)
        } else {
            check()
        }
    }

    /// The requests in arrival order, one letter each (A admitted, R rejected), and how many
    /// connections (client ports) the rejected ones came from.
    static func timeline(_ requests: [RecordedRequest]) -> String {
        let limited = requests.filter { $0.query.contains("maxconc") }
        let letters = String(limited.map { $0.status == 429 || $0.status == 503 ? "R" : "A" })
        let ports = Set(limited.filter { $0.status == 429 || $0.status == 503 }.map(\.remotePort)).count
        return "requests \(letters), rejected from \(ports) connections"
    }

    /// `segget -n 8 -o OUT URL` as a user runs it: the library's defaults but for the output.
    static func options(_ dir: TempDir) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = 8
        o.outputPath = dir.path("out.bin")
        return o
    }
}

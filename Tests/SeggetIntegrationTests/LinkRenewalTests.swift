import Segget
import SeggetTestServer
import Synchronization
import SeggetJournal
import Testing

// Links that expire, end to end against the test server's `expiring` mode: its signed URLs answer
// 403 with S3's XML body once their time is up, and `/_sign` (here `signedURL`) mints new ones.
// 16 MiB over 4 connections at 1 MiB/s each, 1 MiB per request: about 4 s, so that links valid for
// 1-2 s expire several times in the middle of the download.

private enum Geometry {
    static let size = 16 << 20
    static let query = "rate=1m&max=1m"
    static let ttl: Int64 = 2
}

private final class ExpiringFixture: @unchecked Sendable {
    let server: TestServer
    let dir: TempDir
    let bytes: [UInt8]
    let name = "signed.bin"

    init() throws {
        bytes = TestFiles.pattern(Geometry.size, seed: 25)
        server = try TestServer()
        server.addResource(name: name, bytes: bytes, etag: "\"signed-v1\"")
        try server.start()
        dir = try TempDir(prefix: "segget-renew")
    }

    deinit { server.stop() }

    var output: String { dir.path("out.bin") }
    var part: String { output + ".segget-part" }
    var journal: String { output + ".segget-journal" }

    func freshURL(version: Int = 1) -> String {
        server.signedURL(name, ttl: Geometry.ttl, query: Geometry.query + (version == 1 ? "" : "&version=\(version)"))
    }

    func options(renewer: LinkRenewer?) -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = 4
        o.chunkSize = 256 << 10
        o.outputPath = output
        o.retryWait = 0.05
        o.linkRenewer = renewer
        return o
    }

    func run(_ url: String, renewer: LinkRenewer?, log: EventLog) async throws -> Result<DownloadResult, SeggetError> {
        let download = Download(url: url, options: options(renewer: renewer))
        return try await blocking { () -> Result<DownloadResult, SeggetError> in
            do {
                return .success(try download.run(events: { log.append($0) }))
            } catch let e as SeggetError {
                return .failure(e)
            } catch {
                return .failure(SeggetError(.internalError, "\(error)"))
            }
        }
    }
}

@Suite(.serialized) struct LinkRenewalIntegrationTests {
    @Test func aClosureRenewsTheLinkAndTheFileIsIdentical() async throws {
        let f = try ExpiringFixture()
        let requests = Mutex<[LinkRenewalRequest]>([])
        let renewer = LinkRenewer { request in
            requests.withLock { $0.append(request) }
            return f.freshURL()
        }
        let log = EventLog()
        let first = f.freshURL()
        let result = try await f.run(first, renewer: renewer, log: log).get()
        #expect(TestFiles.fileDifference(f.output, f.bytes) == nil)
        #expect(!TestFiles.exists(f.part) && !TestFiles.exists(f.journal))
        let asked = requests.withLock { $0 }
        #expect(asked.count >= 1, "the link expired at least once: \(log.notices)")
        #expect(result.resumedBytes == 0, "nothing was on disk when the run began")
        if let one = asked.first {
            #expect(one.url == first)
            #expect(one.status == 403)
            #expect(one.renewal == 1)
            #expect(one.totalLength == Int64(Geometry.size))
            #expect(one.bytesDone > 0 && one.bytesDone < Int64(Geometry.size))
            #expect(one.outputPath == f.output)
        }
        if !asked.isEmpty { #expect(asked.map(\.renewal) == Array(1...asked.count)) }
        #expect(log.hasNotice(containing: "renewed the link: it serves the same file"))
    }

    @Test(arguments: [401, 410])
    func otherExpiryStatusesAreRenewedToo(status: Int) async throws {
        let f = try ExpiringFixture()
        let statuses = Mutex<[Int]>([])
        let renewer = LinkRenewer { request in
            statuses.withLock { $0.append(request.status) }
            return f.server.signedURL(f.name, ttl: Geometry.ttl, query: Geometry.query + "&status=\(status)")
        }
        let first = f.server.signedURL(f.name, ttl: Geometry.ttl, query: Geometry.query + "&status=\(status)")
        _ = try await f.run(first, renewer: renewer, log: EventLog()).get()
        #expect(TestFiles.fileDifference(f.output, f.bytes) == nil)
        let seen = statuses.withLock { $0 }
        #expect(!seen.isEmpty && seen.allSatisfy { $0 == status }, "\(seen)")
    }

    /// A renewer that fails: its words end in a sentence, followed by what was kept and what to do
    /// (it read "... renewing it failed: the refresh command exited with status 3", and stopped).
    @Test func aFailedRenewalSaysWhatWasKeptAndWhatToDo() async throws {
        let f = try ExpiringFixture()
        let renewer = LinkRenewer { _ in throw SeggetError(.httpStatus, "the refresh command exited with status 3") }
        guard case .failure(let error) = try await f.run(f.freshURL(), renewer: renewer, log: EventLog()) else {
            Issue.record("a failed renewal was not a failure")
            return
        }
        #expect(error.message.contains("renewing it failed: the refresh command exited with status 3. Its progress is kept"), "\(error)")
        #expect(error.message.hasSuffix(NextStep.resume.cli), "\(error)")
        #expect(TestFiles.exists(f.part) && TestFiles.exists(f.journal))
    }

    @Test func aRenewedLinkToAnotherFileIsRefusedAndNothingFromItIsWritten() async throws {
        let f = try ExpiringFixture()
        // What the partial download held when the renewer was asked: nothing may change after that.
        let snapshot = Mutex<(part: [UInt8]?, journal: [UInt8]?)>((nil, nil))
        let renewer = LinkRenewer { _ in
            snapshot.withLock { $0 = (TestFiles.read(f.part), TestFiles.read(f.journal)) }
            return f.freshURL(version: 2)
        }
        let log = EventLog()
        let outcome = try await f.run(f.freshURL(), renewer: renewer, log: log)
        guard case .failure(let error) = outcome else {
            Issue.record("a link to another file was accepted")
            return
        }
        #expect(error.kind == .protocolViolation, "\(error)")
        #expect(error.exitCode == 7)
        #expect(error.message.contains("serves a different file"), "\(error)")
        #expect(error.message.contains("nothing from it was written"), "\(error)")
        #expect(!TestFiles.exists(f.output))
        let (part, journal) = snapshot.withLock { $0 }
        #expect(part != nil && journal != nil)
        #expect(TestFiles.read(f.part) == part, "the part file is as it was when the link expired")
        #expect(TestFiles.read(f.journal) == journal, "the journal is as it was when the link expired")
    }

    @Test func withoutARenewerTheMessageSaysHowAndAFreshLinkResumes() async throws {
        let f = try ExpiringFixture()
        let log = EventLog()
        let outcome = try await f.run(f.freshURL(), renewer: nil, log: log)
        guard case .failure(let error) = outcome else {
            Issue.record("the download finished although its link expired")
            return
        }
        #expect(error.kind == .httpStatus && error.httpStatus == 403 && error.exitCode == 4, "\(error)")
        #expect(error.message.contains("the link expired"), "\(error)")
        #expect(error.message.contains("answered HTTP 403 after"), "\(error)")
        #expect(error.message.contains("--refresh-command"), "\(error)")
        #expect(TestFiles.exists(f.journal))
        // A new signed link (another URL) of the same file continues the partial download.
        let again = EventLog()
        let renewer = LinkRenewer { _ in f.freshURL() }
        let result = try await f.run(f.freshURL(), renewer: renewer, log: again).get()
        #expect(result.resumedBytes > 0, "\(again.notices)")
        #expect(again.hasNotice(containing: "came from another URL"))
        #expect(TestFiles.fileDifference(f.output, f.bytes) == nil)
    }

    /// The rerun of the expired link itself, with a renewer: its first answer is the expiry, the
    /// renewed link resumes, and what it says it resumed is what was in the file: the chunks the
    /// journal marks and the parts of chunks the connections had written (before, the journal's
    /// chunks alone).
    @Test func theExpiredLinkRerunWithARenewerResumesWhatWasInTheFile() async throws {
        let f = try ExpiringFixture()
        let url = f.freshURL()
        guard case .failure = try await f.run(url, renewer: nil, log: EventLog()) else {
            Issue.record("the download finished although its link expired")
            return
        }
        let partly = try LeftBehind.partlyWrittenBytes(
            journal: f.journal, progress: f.output + ".segget-progress", total: Int64(f.bytes.count), chunkSize: 256 << 10)
        let marked = try LeftBehind.markedBytes(journal: f.journal, total: Int64(f.bytes.count), chunkSize: 256 << 10)
        let log = EventLog()
        let told = Mutex<[Int64]>([])
        let renewer = LinkRenewer { request in
            told.withLock { $0.append(request.bytesDone) }
            return f.freshURL()
        }
        let result = try await f.run(url, renewer: renewer, log: log).get()
        #expect(TestFiles.fileDifference(f.output, f.bytes) == nil)
        #expect(partly > 0, "no chunk was partly written when the link expired")
        #expect(result.resumedBytes == marked + partly, "\(log.notices)")
        // The renewer was told the same (before, the journal's chunks alone).
        #expect(told.withLock { $0.first } == marked + partly)
    }

    /// What the renewer is told is done, and what a stop while it waits says was saved, is what the
    /// file keeps for the next attempt: the chunks the journal marks and the parts of others in the
    /// progress slots (before, the whole chunks alone).
    @Test func theRenewerAndTheStopWhileRenewingCountWhatTheFileKeeps() async throws {
        let f = try ExpiringFixture()
        let total = Int64(f.bytes.count)
        let seen = Mutex<(told: Int64, marked: Int64, partly: Int64)?>(nil)
        let renewer = LinkRenewer { request in
            let marked = (try? LeftBehind.markedBytes(journal: f.journal, total: total, chunkSize: 256 << 10)) ?? -1
            let partly = (try? LeftBehind.partlyWrittenBytes(
                journal: f.journal, progress: f.output + ".segget-progress", total: total, chunkSize: 256 << 10)) ?? -1
            seen.withLock { $0 = (request.bytesDone, marked, partly) }
            throw SeggetError(.interrupted, "stopped while asking for a new link")
        }
        guard case .failure(let error) = try await f.run(f.freshURL(), renewer: renewer, log: EventLog()) else {
            Issue.record("the download finished although its link expired")
            return
        }
        let s = try #require(seen.withLock { $0 })
        #expect(s.partly > 0, "no chunk was partly written when the link expired")
        #expect(s.marked >= 0)
        #expect(s.told == s.marked + s.partly, "told \(s.told); the journal marks \(s.marked), the slots \(s.partly)")
        #expect(error.kind == .interrupted && error.exitCode == 130, "\(error)")
        #expect(error.message.contains("interrupted while renewing the link, with \(Format.bytes(s.marked + s.partly)) of"), "\(error.message)")
        // The rerun keeps exactly that.
        let result = try await f.run(f.freshURL(), renewer: LinkRenewer { _ in f.freshURL() }, log: EventLog()).get()
        #expect(result.resumedBytes == s.marked + s.partly)
        #expect(TestFiles.fileDifference(f.output, f.bytes) == nil)
    }

    @Test func aPartialDownloadOfAnotherFileUnderTheSameNameStartsOver() async throws {
        let f = try ExpiringFixture()
        _ = try await f.run(f.freshURL(), renewer: nil, log: EventLog())
        #expect(TestFiles.exists(f.journal))
        // The second object (other ETag) at a new URL: the partial download is not resumed from it.
        let log = EventLog()
        let renewer = LinkRenewer { _ in f.freshURL(version: 2) }
        let result = try await f.run(f.freshURL(version: 2), renewer: renewer, log: log).get()
        #expect(result.resumedBytes == 0)
        #expect(log.hasNotice(containing: "ETag/Last-Modified differ"), "\(log.notices)")
        #expect(TestFiles.read(f.output).map { $0 != f.bytes } == true)
    }
}

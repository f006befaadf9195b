import Glibc
import SeggetJournal
import SeggetVerify
import Testing
@testable import Segget

@Suite struct AttemptPlanTests {
    @Test func rangesIgnoredSwitchesToOneFreshStreamOnce() throws {
        let start = AttemptPlan(fresh: false)
        let (next, notice) = try start.next(after: .rangesIgnored(reason: "the server sent 200 to a range"))
        #expect(next == AttemptPlan(fresh: true, stream: true, changeRestarts: 0))
        #expect(notice == "the server sent 200 to a range; starting over with one connection from the start.")
        #expect(throws: SeggetError.self) { _ = try next.next(after: .rangesIgnored(reason: "again")) }
        do {
            _ = try next.next(after: .rangesIgnored(reason: "again"))
        } catch {
            #expect(error.kind == .protocolViolation)
            #expect(error.message == "the server ignored byte ranges even for a single stream; giving up.")
        }
    }

    @Test func aChangingFileRestartsTwiceThenGivesUp() throws {
        var plan = AttemptPlan(fresh: false, stream: true)
        for n in 1...AttemptPlan.maxChangeRestarts {
            let (next, notice) = try plan.next(after: .resourceChanged(reason: "ETag changed"))
            #expect(next == AttemptPlan(fresh: true, stream: true, changeRestarts: n))
            #expect(notice == "the file changed on the server (ETag changed); starting over from zero.")
            plan = next
        }
        do {
            _ = try plan.next(after: .resourceChanged(reason: "ETag changed"))
            Issue.record("a third change was accepted")
        } catch {
            #expect(error.kind == .protocolViolation)
            #expect(error.message == "the file keeps changing on the server (ETag changed); giving up. Try again later.")
        }
    }

    @Test func aRangesRestartAfterChangesKeepsTheCount() throws {
        let plan = AttemptPlan(fresh: true, stream: false, changeRestarts: 2)
        let (next, _) = try plan.next(after: .rangesIgnored(reason: "x"))
        #expect(next.changeRestarts == 2)
        #expect(throws: SeggetError.self) { _ = try next.next(after: .resourceChanged(reason: "y")) }
    }
}

@Suite struct ProbeRetryTests {
    @Test func retriesFollowTheTypedAdvice() {
        let never = SeggetError(.network, "refusing a redirect", retryAdvice: .never)
        #expect(!Download.probeIsRetryable(never, attempt: 1))
        let once = SeggetError(.network, "could not resolve the host", retryAdvice: .once)
        #expect(Download.probeIsRetryable(once, attempt: 1))
        #expect(!Download.probeIsRetryable(once, attempt: 2))
        // The message plays no part: "redirect" in a transient failure's text does not stop a retry.
        let network = SeggetError(.network, "the connection dropped after a redirect")
        #expect(Download.probeIsRetryable(network, attempt: 3))
        for status in [408, 429, 500, 502, 503, 504] {
            #expect(Download.probeIsRetryable(SeggetError(.httpStatus, "status", httpStatus: status), attempt: 1))
        }
        for status in [400, 401, 403, 404, 410, 416] {
            #expect(!Download.probeIsRetryable(SeggetError(.httpStatus, "status", httpStatus: status), attempt: 1))
        }
        #expect(!Download.probeIsRetryable(SeggetError(.protocolViolation, "lying framing"), attempt: 1))
    }
}

@Suite struct PartialDownloadTests {
    private func temporaryDirectory() -> String {
        var template = Array("/tmp/segget-partial-test-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    @Test func sideFilesAreNamedAfterTheFinalPath() {
        let paths = PartialDownload.Paths(final: "/d/f.iso")
        #expect(paths.part == "/d/f.iso.segget-part")
        #expect(paths.journal == "/d/f.iso.segget-journal")
        #expect(paths.progress == "/d/f.iso.segget-progress")
    }

    private func makePartial(_ dir: String, withJournal: Bool) throws -> PartialDownload {
        let paths = PartialDownload.Paths(final: dir + "/file")
        let data = try PosixFile.open(path: paths.part, mode: .createExclusive(permissions: 0o644))
        try data.tryLockExclusively()
        try data.write([1, 2, 3, 4], at: 0)
        var journal: Journal?
        if withJournal {
            let header = JournalHeader(
                url: "http://example.com/file", finalURL: "http://example.com/file", totalLength: 4, chunkSize: 16384,
                etag: "\"e\"", lastModified: nil, bootID: Journal.currentBootID(), createdAt: 0)
            journal = try Journal.create(path: paths.journal, header: header)
        }
        let progress = try PosixFile.open(path: paths.progress, mode: .createExclusive(permissions: 0o644))
        progress.close()
        return PartialDownload(paths: paths, data: data, journal: journal, trusted: nil, chunkSize: 16384, isNew: true)
    }

    @Test func publishRenamesAndDropsTheSideFiles() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let partial = try makePartial(dir, withJournal: true)
        try partial.publish(syncing: true)
        partial.close()
        #expect(PosixFile.fileSize(path: partial.paths.final) == 4)
        #expect(PosixFile.fileSize(path: partial.paths.part) == nil)
        #expect(PosixFile.fileSize(path: partial.paths.journal) == nil)
        #expect(PosixFile.fileSize(path: partial.paths.progress) == nil)
    }

    /// Without --force, a file another program made under the final name while the download ran is
    /// left alone (a plain rename replaced it, exit 0); the download stays under its partial name
    /// with its journal, and the error names both ways on. With --force it is replaced, as asked.
    @Test func publishWithoutForceLeavesAFileThatAppearedAlone() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let partial = try makePartial(dir, withJournal: true)
        #expect(system("printf other > '\(partial.paths.final)'") == 0)
        do {
            try partial.publish(syncing: false, replacing: false)
            Issue.record("published over a file that appeared")
        } catch {
            #expect(error.kind == .fileSystem)
            #expect(error.message.contains("appeared while the download ran") && error.message.contains("--force"))
        }
        #expect(PosixFile.fileSize(path: partial.paths.final) == 5)
        #expect(PosixFile.fileSize(path: partial.paths.part) == 4)
        #expect(PosixFile.fileSize(path: partial.paths.journal) != nil)
        try partial.publish(syncing: false, replacing: true)
        partial.close()
        #expect(PosixFile.fileSize(path: partial.paths.final) == 4)
        #expect(PosixFile.fileSize(path: partial.paths.part) == nil)
    }

    /// The rename that never replaces: a free name is taken; a name with a file, or with a dangling
    /// symbolic link, is refused with EEXIST and nothing changes.
    @Test func renameWithoutReplacingRefusesATakenName() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        #expect(system("printf a > '\(dir)/a' && printf bb > '\(dir)/b' && ln -s '\(dir)/nowhere' '\(dir)/l'") == 0)
        #expect(throws: Errno.fileExists) { try FileSystem.renameWithoutReplacing(from: dir + "/a", to: dir + "/b") }
        #expect(throws: Errno.fileExists) { try FileSystem.renameWithoutReplacing(from: dir + "/a", to: dir + "/l") }
        #expect(PosixFile.fileSize(path: dir + "/a") == 1 && PosixFile.fileSize(path: dir + "/b") == 2)
        try FileSystem.renameWithoutReplacing(from: dir + "/a", to: dir + "/c")
        #expect(PosixFile.fileSize(path: dir + "/a") == nil && PosixFile.fileSize(path: dir + "/c") == 1)
    }

    @Test func discardRemovesEverything() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let partial = try makePartial(dir, withJournal: true)
        partial.discard()
        partial.close()
        for path in [partial.paths.final, partial.paths.part, partial.paths.journal, partial.paths.progress] {
            #expect(PosixFile.fileSize(path: path) == nil)
        }
    }

    @Test func aJournalLeftBesideTheFinishedFileIsRecognised() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let partial = try makePartial(dir, withJournal: true)
        // The journal's header says 4 bytes; a run stopped between the rename and the journal's removal.
        partial.close()
        try PosixFile.rename(from: partial.paths.part, to: partial.paths.final)
        #expect(PartialDownload.finishedEarlier(paths: partial.paths, url: "http://other.example/file") == nil)
        #expect(PartialDownload.finishedEarlier(paths: partial.paths, url: "http://example.com/file") == 4)
        #expect(PosixFile.fileSize(path: partial.paths.journal) == nil)
        #expect(PosixFile.fileSize(path: partial.paths.progress) == nil)
    }

    private func probe(total: Int64, prefix: [UInt8]) -> ProbeResult {
        var p = ProbeResult(
            finalURL: "http://example.com/file", totalLength: total, acceptsRanges: true, etag: "\"e\"",
            lastModified: nil, suggestedFileName: "file", reprDigest: nil, digest: nil, contentMD5: nil, redirects: 0,
            noRangesReason: nil)
        p.prefix = ProbeBytes(prefix)
        return p
    }

    /// A file the probe brought whole gets neither a journal nor a reservation: its bytes are written
    /// at once. What an earlier run left (data file, journal) is replaced all the same.
    @Test func aFileTheProbeBroughtWholeIsWrittenWithoutJournalOrReservation() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let old = try makePartial(dir, withJournal: true)
        old.close()
        let bytes = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let p = probe(total: Int64(bytes.count), prefix: bytes)
        let partial = try PartialDownload.open(
            paths: old.paths, url: "http://example.com/file", probe: p, ranged: true, fresh: true, chunkSize: 16384,
            events: nil)
        #expect(partial.journal == nil)
        #expect(PosixFile.fileSize(path: partial.paths.journal) == nil)
        #expect(PosixFile.fileSize(path: partial.paths.part) == 0)
        let plan = ChunkPlan(totalLength: Int64(bytes.count), chunkSize: partial.chunkSize)
        try partial.placeProbePrefix(p.prefix, plan: plan)
        #expect(partial.trusted?.setCount == plan.chunkCount)
        try partial.publish(syncing: false)
        partial.close()
        let back = try PosixFile.open(path: partial.paths.final, mode: .readOnly)
        defer { back.close() }
        #expect(try back.read(count: bytes.count + 1, at: 0) == bytes)
    }

    private func wholeContext() -> Download.AttemptContext {
        Download.AttemptContext(started: 0, progress: nil, events: nil, interrupt: InterruptFlag())
    }

    /// A new file the probe brought whole is linked in under its name, with nothing beside it; whatever
    /// an earlier run left there sends it down the usual path instead.
    @Test func aFileTheProbeBroughtWholeIsLinkedInWithNothingBesideIt() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let bytes = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let p = probe(total: Int64(bytes.count), prefix: bytes)
        let paths = PartialDownload.Paths(final: dir + "/file")
        let download = Download(url: "http://example.com/file")
        let result = try download.publishWhole(
            probe: p, paths: paths, expected: [], deadline: nil, wholeContext())
        #expect(result?.bytes == Int64(bytes.count))
        #expect(result?.path == paths.final)
        let back = try PosixFile.open(path: paths.final, mode: .readOnly)
        #expect(try back.read(count: bytes.count + 1, at: 0) == bytes)
        back.close()
        for side in [paths.part, paths.journal, paths.progress] { #expect(PosixFile.fileSize(path: side) == nil) }

        // Not when the name is taken, the probe brought part of the file, or side files are there.
        let other = PartialDownload.Paths(final: dir + "/other")
        let taken = try PosixFile.open(path: other.final, mode: .createExclusive(permissions: 0o644))
        try taken.write([42], at: 0)
        taken.close()
        #expect(try download.publishWhole(
            probe: p, paths: other, expected: [], deadline: nil, wholeContext()) == nil)
        #expect(PosixFile.fileSize(path: other.final) == 1)
        try PosixFile.remove(path: other.final)
        #expect(try download.publishWhole(
            probe: probe(total: 50_000, prefix: bytes), paths: other, expected: [],
            deadline: nil, wholeContext()) == nil)
        for side in [other.part, other.journal] {
            let f = try PosixFile.open(path: side, mode: .createExclusive(permissions: 0o644))
            f.close()
            #expect(try download.publishWhole(
                probe: p, paths: other, expected: [], deadline: nil, wholeContext()) == nil)
            try PosixFile.remove(path: side)
        }
        #expect(PosixFile.fileSize(path: other.final) == nil)
    }

    /// The whole file is checked in memory: a match is reported, a mismatch saves nothing.
    @Test func aFileTheProbeBroughtWholeIsVerifiedBeforeItGetsAName() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let bytes = Array("hello".utf8)
        let p = probe(total: 5, prefix: bytes)
        let download = Download(url: "http://example.com/file")
        let sha = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        let good = try ExpectedDigest(parsing: "sha256=\(sha)")
        let paths = PartialDownload.Paths(final: dir + "/good")
        let result = try download.publishWhole(
            probe: p, paths: paths, expected: [good], deadline: nil, wholeContext())
        #expect(result?.verified == ["SHA-256=\(sha)"])
        let bad = try ExpectedDigest(parsing: "sha256=" + String(repeating: "0", count: 64))
        let badPaths = PartialDownload.Paths(final: dir + "/bad")
        do {
            _ = try download.publishWhole(
                probe: p, paths: badPaths, expected: [bad], deadline: nil, wholeContext())
            Issue.record("a mismatching file was saved")
        } catch {
            #expect(error.kind == .verification)
        }
        for path in [badPaths.final, badPaths.part, badPaths.journal] { #expect(PosixFile.fileSize(path: path) == nil) }
    }

    /// One the probe brought in part is reserved whole and journalled, in a fresh directory too.
    @Test func aFileTheProbeBroughtInPartIsReservedAndJournalled() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let p = probe(total: 100_000, prefix: Array(repeating: 9, count: 16384))
        let partial = try PartialDownload.open(
            paths: PartialDownload.Paths(final: dir + "/file"), url: "http://example.com/file", probe: p, ranged: true,
            fresh: false, chunkSize: 16384, events: nil)
        defer { partial.close() }
        #expect(partial.journal != nil)
        #expect(PosixFile.fileSize(path: partial.paths.part) == 100_000)
    }

    @Test func theDataFileIsLockedWhileOpen() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let partial = try makePartial(dir, withJournal: false)
        let second = try PosixFile.open(path: partial.paths.part, mode: .openExisting)
        defer { second.close() }
        #expect(throws: Errno.wouldBlock) { try second.tryLockExclusively() }
        partial.close()
        try second.tryLockExclusively()
    }
}

@Suite struct ProbeOnlyDownloadTests {
    @Test func theEngineIsSkippedOnlyWhenTheProbeBroughtEveryChunkOfANewFile() {
        func skip(
            ranged: Bool = true, isNew: Bool = true, chunks: Int = 1, trusted: Int = 1, mirrors: Int = 0,
            interrupted: Bool = false, deadlinePassed: Bool = false
        ) -> Bool {
            Download.probeFetchedEverything(
                ranged: ranged, isNew: isNew, chunkCount: chunks, trusted: trusted, mirrors: mirrors,
                interrupted: interrupted, deadlinePassed: deadlinePassed)
        }
        #expect(skip())
        #expect(skip(chunks: 4, trusted: 4))
        // Something left to fetch, or to vouch for, or to report.
        #expect(!skip(chunks: 4, trusted: 3))
        #expect(!skip(chunks: 0, trusted: 0))
        #expect(!skip(ranged: false))
        #expect(!skip(isNew: false))
        #expect(!skip(mirrors: 1))
        #expect(!skip(interrupted: true))
        #expect(!skip(deadlinePassed: true))
    }
}

@Suite struct ProbePrefixTests {
    private func temporaryDirectory() -> String {
        var template = Array("/tmp/segget-prefix-test-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    private func newPartial(_ dir: String, total: Int64, chunkSize: Int64, withJournal: Bool) throws -> PartialDownload {
        let paths = PartialDownload.Paths(final: dir + "/file")
        let data = try PosixFile.open(path: paths.part, mode: .createExclusive(permissions: 0o644))
        var journal: Journal?
        if withJournal {
            let header = JournalHeader(
                url: "http://example.com/file", finalURL: "http://example.com/file", totalLength: total,
                chunkSize: chunkSize, etag: "\"e\"", lastModified: nil, bootID: Journal.currentBootID(), createdAt: 0)
            journal = try Journal.create(path: paths.journal, header: header)
        }
        return PartialDownload(paths: paths, data: data, journal: journal, trusted: nil, chunkSize: chunkSize, isNew: true)
    }

    @Test func aWholeFileWithoutJournalIsWrittenAndTrusted() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let bytes = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let partial = try newPartial(dir, total: Int64(bytes.count), chunkSize: 16384, withJournal: false)
        defer { partial.close() }
        let plan = ChunkPlan(totalLength: Int64(bytes.count), chunkSize: 16384)
        try partial.placeProbePrefix(ProbeBytes(bytes), plan: plan)
        #expect(partial.trusted?.setCount == plan.chunkCount)
        #expect(partial.partial.isEmpty)
        #expect(try partial.data.read(count: bytes.count, at: 0) == bytes)
    }

    @Test func aPrefixEndingInsideAChunkRecordsItsChecksums() throws {
        let dir = temporaryDirectory()
        defer { _ = system("rm -rf '\(dir)'") }
        let bytes = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let partial = try newPartial(dir, total: 65536, chunkSize: 16384, withJournal: true)
        defer { partial.close() }
        let plan = ChunkPlan(totalLength: 65536, chunkSize: 16384)
        try partial.placeProbePrefix(ProbeBytes(bytes), plan: plan)
        #expect(partial.trusted?.setCount == 1)
        #expect(partial.journal?.chunkCRCs[0] == CRC32C.checksum(bytes[0..<16384]))
        #expect(partial.partial[1] == PartialChunk(upTo: 20_000, crc: CRC32C.checksum(bytes[16384..<20_000])))
    }
}

import Testing
import Glibc
@testable import SeggetJournal

@Suite("Journal on real files")
struct JournalFileTests {
    @Test func createMarkCheckpointReopen() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/f.segget-part.journal"
        let header = makeHeader(totalLength: 20 << 10, chunkSize: 1 << 10, bootID: "boot-A")
        let data = try PosixFile.open(path: dir + "/f.segget-part", mode: .createExclusive(permissions: 0o600))
        defer { data.close() }
        try data.preallocate(length: header.totalLength)

        let journal = try Journal.create(path: path, header: header)
        #expect(FileSystem.status(path, followingLinks: false)?.permissions == 0o600)
        #expect(PosixFile.fileSize(path: path) == JournalCodec.encodedLength(header: header))
        for chunk in [0, 1, 2, 9] { try journal.markWritten(chunk: chunk, crc: 0xC0DE_0000 + UInt32(chunk)) }
        try journal.checkpoint(syncingData: data)
        for chunk in [3, 19] { try journal.markWritten(chunk: chunk, crc: 0xC0DE_0000 + UInt32(chunk)) }
        #expect(journal.durable.setIndices == [0, 1, 2, 9])
        #expect(journal.written.setIndices == [0, 1, 2, 3, 9, 19])
        journal.close()

        // Same boot: the written bitmap is trusted.
        let (same, trustedSame) = try Journal.open(path: path, currentBootID: "boot-A")
        #expect(trustedSame.setIndices == [0, 1, 2, 3, 9, 19])
        for chunk in 0..<20 {
            #expect(same.chunkCRCs[chunk] == ([0, 1, 2, 3, 9, 19].contains(chunk) ? 0xC0DE_0000 + UInt32(chunk) : 0))
        }
        #expect(same.durable.setIndices == [0, 1, 2, 9])
        same.close()

        // Another boot: only the durable bitmap, and the written one is cut back to match.
        let (other, trustedOther) = try Journal.open(path: path, currentBootID: "boot-B")
        #expect(trustedOther.setIndices == [0, 1, 2, 9])
        #expect(other.written == other.durable)
        #expect(other.header.bootID == "boot-B")
        other.close()
        let (again, trustedAgain) = try Journal.open(path: path, currentBootID: "boot-B")
        #expect(trustedAgain.setIndices == [0, 1, 2, 9])
        again.close()

        // An unreadable boot ID never matches, even itself.
        let (_, first) = try Journal.open(path: path, currentBootID: Journal.unknownBootID)
        #expect(first.setIndices == [0, 1, 2, 9])
        let (_, second) = try Journal.open(path: path, currentBootID: Journal.unknownBootID)
        #expect(second.setIndices == [0, 1, 2, 9])

        // Starting over replaces the journal atomically and leaves no temporary behind.
        let fresh = try Journal.create(path: path, header: header)
        #expect(fresh.written.setCount == 0)
        fresh.close()
        #expect(PosixFile.fileSize(path: path + ".segget-new") == nil)
        let (_, none) = try Journal.open(path: path, currentBootID: "boot-A")
        #expect(none.setCount == 0)
    }

    @Test func missingDamagedAndForeignJournals() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/j"
        #expect(throws: JournalOpenError.missing) { _ = try Journal.open(path: path, currentBootID: "b") }

        let file = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o600))
        try file.write(Array("#!/bin/sh\necho this is not a journal\n".utf8), at: 0)
        file.close()
        #expect(throws: JournalOpenError.damaged(.badMagic)) { _ = try Journal.open(path: path, currentBootID: "b") }

        let header = makeHeader(totalLength: 100, chunkSize: 10)
        try Journal.create(path: path, header: header).close()
        let grown = try PosixFile.open(path: path, mode: .openExisting)
        try grown.truncate(to: JournalCodec.encodedLength(header: header) - 1)
        #expect(throws: JournalOpenError.damaged(.truncated)) { _ = try Journal.open(path: path, currentBootID: "b") }
        try grown.truncate(to: JournalCodec.encodedLength(header: header) + 1)
        #expect(throws: JournalOpenError.damaged(.trailingBytes)) {
            _ = try Journal.open(path: path, currentBootID: "b")
        }
        grown.close()
    }

    @Test func createRefusesToWriteThroughASymlinkedTemporary() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        // A stale temporary is removed (unlink removes the link, not its target) and recreated exclusively.
        let victim = try PosixFile.open(path: dir + "/victim", mode: .createExclusive(permissions: 0o600))
        try victim.write([42], at: 0)
        victim.close()
        #expect(symlink(dir + "/victim", dir + "/j.segget-new") == 0)
        // An old journal is there, so the new one goes through the temporary.
        try Journal.create(path: dir + "/j", header: makeHeader(totalLength: 5, chunkSize: 1)).close()
        try Journal.create(path: dir + "/j", header: makeHeader(totalLength: 5, chunkSize: 1)).close()
        #expect(PosixFile.fileSize(path: dir + "/victim") == 1)
        #expect(PosixFile.fileSize(path: dir + "/j.segget-new") == nil)
    }

    @Test func createReplacesASymlinkAtTheJournalsNameNotItsTarget() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let victim = try PosixFile.open(path: dir + "/victim", mode: .createExclusive(permissions: 0o600))
        try victim.write([42], at: 0)
        victim.close()
        #expect(symlink(dir + "/victim", dir + "/j") == 0)
        try Journal.create(path: dir + "/j", header: makeHeader(totalLength: 5, chunkSize: 1)).close()
        #expect(PosixFile.fileSize(path: dir + "/victim") == 1)
        #expect(FileSystem.status(dir + "/j", followingLinks: false)?.kind == .regular)
        #expect(try Journal.open(path: dir + "/j", currentBootID: "b").trusted.setCount == 0)
    }
}

import Glibc
import Testing
@testable import SeggetSystem

/// A fresh private directory under `parent` (default /tmp), removed by the caller with `removeTree`.
func makeTemporaryDirectory(in parent: String = "/tmp") -> String {
    var template = Array("\(parent)/segget-system-test-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { buffer -> String in
        guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return "" }
        return String(cString: result)
    }
    precondition(!path.isEmpty, "mkdtemp failed")
    return path
}

func removeTree(_ path: String) {
    _ = system("rm -rf '\(path)'")
}

@Suite("PosixFile")
struct PosixFileTests {
    @Test func exclusiveCreateRefusesAnExistingFile() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/a"
        let file = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o600))
        file.close()
        #expect(throws: Errno.fileExists) {
            _ = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o600))
        }
    }

    @Test func symlinksAreNeverFollowed() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let target = dir + "/target"
        let victim = try PosixFile.open(path: target, mode: .createExclusive(permissions: 0o600))
        victim.close()
        let link = dir + "/link"
        #expect(symlink(target, link) == 0)
        // O_EXCL refuses any existing name, a symlink included.
        #expect(throws: Errno.fileExists) {
            _ = try PosixFile.open(path: link, mode: .createExclusive(permissions: 0o600))
        }
        // O_NOFOLLOW refuses to open through it.
        #expect(throws: Errno.tooManySymbolicLinkLevels) {
            _ = try PosixFile.open(path: link, mode: .openExisting)
        }
        // A dangling link is refused too, so nothing gets created at its target.
        let dangling = dir + "/dangling"
        #expect(symlink(dir + "/nowhere", dangling) == 0)
        #expect(throws: Errno.fileExists) {
            _ = try PosixFile.open(path: dangling, mode: .createExclusive(permissions: 0o600))
        }
        #expect(PosixFile.fileSize(path: dir + "/nowhere") == nil)
    }

    @Test func anUnnamedFileAppearsWholeUnderItsNameOrNotAtAll() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let file = try PosixFile.createUnnamed(inDirectory: dir, permissions: 0o600)
        try file.write([1, 2, 3], at: 0)
        // Written, but under no name yet.
        #expect(try directoryEntries(dir).isEmpty)
        try file.link(as: dir + "/named")
        #expect(try directoryEntries(dir) == ["named"])
        #expect(FileSystem.status(dir + "/named", followingLinks: false)?.permissions == 0o600)
        let back = try PosixFile.open(path: dir + "/named", mode: .readOnly)
        #expect(try back.read(count: 10, at: 0) == [1, 2, 3])
        back.close()
        // A name already taken, even by a dangling symbolic link, is refused and left alone.
        let other = try PosixFile.createUnnamed(inDirectory: dir, permissions: 0o600)
        #expect(throws: Errno.fileExists) { try other.link(as: dir + "/named") }
        #expect(symlink(dir + "/nowhere", dir + "/dangling") == 0)
        #expect(throws: Errno.fileExists) { try other.link(as: dir + "/dangling") }
        #expect(PosixFile.fileSize(path: dir + "/nowhere") == nil)
        file.close()
        // Closed without a name: nothing is left of it.
        other.close()
        #expect(try directoryEntries(dir).sorted() == ["dangling", "named"])
    }

    @Test func anUnnamedFileNeedsADirectory() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        #expect(throws: Errno.noSuchFileOrDirectory) {
            _ = try PosixFile.createUnnamed(inDirectory: dir + "/missing", permissions: 0o600)
        }
    }

    private func directoryEntries(_ dir: String) throws -> [String] {
        guard let d = opendir(dir) else { throw Errno.current }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    @Test func createdFilesAreOwnerOnly() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/private"
        let file = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o600))
        file.close()
        #expect(FileSystem.status(path, followingLinks: false)?.permissions == 0o600)
    }

    @Test func readWriteRoundTripAndPreallocate() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let path = dir + "/data"
        let file = try PosixFile.open(path: path, mode: .createExclusive(permissions: 0o600))
        defer { file.close() }
        try file.preallocate(length: 3 << 20)
        #expect(try file.size() == 3 << 20)
        #expect(PosixFile.fileSize(path: path) == 3 << 20)
        let payload = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try file.write(payload, at: 1_000_000)
        try file.sync()
        #expect(try file.read(count: payload.count, at: 1_000_000) == payload)
        // A read past the end is short, not an error.
        #expect(try file.read(count: 10, at: (3 << 20) - 4).count == 4)
        try file.truncate(to: 10)
        #expect(try file.size() == 10)
    }

    @Test func closedFileRefusesUse() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let file = try PosixFile.open(path: dir + "/x", mode: .createExclusive(permissions: 0o600))
        file.close()
        file.close()
        #expect(throws: Errno.badFileDescriptor) { try file.write([1], at: 0) }
    }

    @Test func renameRemoveAndDirectorySync() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let file = try PosixFile.open(path: dir + "/old", mode: .createExclusive(permissions: 0o600))
        try file.write([1, 2, 3], at: 0)
        file.close()
        try PosixFile.rename(from: dir + "/old", to: dir + "/new")
        try PosixFile.syncDirectory(containing: dir + "/new")
        #expect(PosixFile.fileSize(path: dir + "/old") == nil)
        #expect(PosixFile.fileSize(path: dir + "/new") == 3)
        try PosixFile.remove(path: dir + "/new")
        try PosixFile.remove(path: dir + "/new")  // already gone: not an error
        #expect(PosixFile.fileSize(path: dir + "/new") == nil)
        #expect(throws: Errno.noSuchFileOrDirectory) { try PosixFile.rename(from: dir + "/new", to: dir + "/x") }
    }

    @Test func freeSpaceIsPositive() throws {
        #expect(try PosixFile.freeSpace(directoryOf: "/tmp/anything") > 0)
        #expect(PosixFile.directoryName(of: "file") == ".")
        #expect(PosixFile.directoryName(of: "/file") == "/")
        #expect(PosixFile.directoryName(of: "/a/b/file") == "/a/b")
    }

    @Test func errnoDescribesItself() {
        #expect(Errno.noSpace.description == "No space left on device")
    }
}

/// Extended attributes and the modification time: what a finished download's mark is made of.
@Suite("PosixFile attributes")
struct PosixFileAttributeTests {
    @Test func anAttributeSetOnTheDescriptorIsReadBackByPathAndFollowsALink() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let file = try PosixFile.createUnnamed(inDirectory: dir, permissions: 0o644)
        defer { file.close() }
        try file.write([1, 2, 3], at: 0)
        do {
            try file.setAttribute("user.segget.test", Array("value 1".utf8))
        } catch .notSupported {
            return  // a file system without extended attributes: nothing to check here
        }
        try file.link(as: dir + "/named")
        #expect(FileSystem.attribute(dir + "/named", "user.segget.test") == Array("value 1".utf8))
        // Replaced, not appended.
        try file.setAttribute("user.segget.test", Array("2".utf8))
        #expect(FileSystem.attribute(dir + "/named", "user.segget.test") == Array("2".utf8))
        #expect(FileSystem.attribute(dir + "/named", "user.segget.other") == nil)
        #expect(FileSystem.attribute(dir + "/missing", "user.segget.test") == nil)
        // Longer than the caller takes: not read at all.
        #expect(FileSystem.attribute(dir + "/named", "user.segget.test", limit: 0) == nil)
    }

    @Test func aSymbolicLinkIsNotFollowed() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let file = try PosixFile.open(path: dir + "/target", mode: .createExclusive(permissions: 0o644))
        defer { file.close() }
        do { try file.setAttribute("user.segget.test", [65]) } catch .notSupported { return }
        #expect(symlink(dir + "/target", dir + "/link") == 0)
        #expect(FileSystem.attribute(dir + "/target", "user.segget.test") == [65])
        #expect(FileSystem.attribute(dir + "/link", "user.segget.test") == nil)
    }

    @Test func theModificationTimeMovesWithAWriteAndNotWithAnAttribute() throws {
        let dir = makeTemporaryDirectory()
        defer { removeTree(dir) }
        let file = try PosixFile.open(path: dir + "/f", mode: .createExclusive(permissions: 0o644))
        defer { file.close() }
        try file.write([1], at: 0)
        let first = try file.status()
        #expect(first.modified > 1_700_000_000 * 1_000_000_000)
        #expect(FileSystem.status(dir + "/f")?.modified == first.modified)
        try? file.setAttribute("user.segget.test", [1])
        #expect(try file.status().modified == first.modified)
        usleep(20_000)
        try file.write([2], at: 0)
        #expect(try file.status().modified > first.modified)
    }
}

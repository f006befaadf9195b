import Glibc
import Testing
@testable import Segget

/// A batch's one reading of its directories answers "surely absent" only where that is true, and
/// only once per path.
@Suite struct StartingNamesTests {
    private func directory(with names: [String]) -> String {
        var template = Array("/tmp/segget-names-test-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        for name in names { close(open(dir + "/" + name, O_CREAT | O_WRONLY, 0o644)) }
        return dir
    }

    private func remove(_ dir: String, _ names: [String]) {
        for name in names { unlink(dir + "/" + name) }
        rmdir(dir)
    }

    @Test func sideFilesThatAreThereAreNeverSurelyAbsent() {
        let present = ["a.segget-journal", "a.segget-part", "b.segget-part", "c"]
        let dir = directory(with: present)
        defer { remove(dir, present) }
        let names = StartingNames(files: 10)
        #expect(!names.surelyAbsent(dir + "/a.segget-journal"))
        #expect(!names.surelyAbsent(dir + "/a.segget-part"))
        #expect(!names.surelyAbsent(dir + "/b.segget-part"))
        #expect(names.surelyAbsent(dir + "/b.segget-journal"))
        #expect(names.surelyAbsent(dir + "/c.segget-part"))
        #expect(names.surelyAbsent(dir + "/d.segget-journal"))
    }

    @Test func aPathIsSurelyAbsentOnlyTheFirstTimeItIsAskedAbout() {
        let dir = directory(with: [])
        defer { remove(dir, []) }
        let names = StartingNames(files: 10)
        #expect(names.surelyAbsent(dir + "/x.segget-journal"))
        // A later attempt of the same file may have made it since: look.
        #expect(!names.surelyAbsent(dir + "/x.segget-journal"))
        #expect(names.surelyAbsent(dir + "/x.segget-part"))
    }

    @Test func theDirectoryIsReadOnceSoLaterFilesAreNotSeen() {
        let dir = directory(with: [])
        defer { remove(dir, ["late.segget-part"]) }
        let names = StartingNames(files: 10)
        #expect(names.surelyAbsent(dir + "/early.segget-part"))
        close(open(dir + "/late.segget-part", O_CREAT | O_WRONLY, 0o644))
        // Made after the reading: not this reading's to see (a batch never makes another file's).
        #expect(names.surelyAbsent(dir + "/late.segget-part"))
    }

    @Test func aDirectoryThatIsNotThereHoldsNothing() {
        let names = StartingNames(files: 10)
        #expect(names.surelyAbsent("/tmp/segget-names-test-no-such-dir/f.segget-journal"))
    }

    @Test func aDirectoryOverTheLimitOrUnreadableIsLookedUpFileByFile() {
        let many = (0..<20).map { "f\($0)" }
        let dir = directory(with: many)
        defer { remove(dir, many) }
        let names = StartingNames(entryLimit: 10)
        #expect(!names.surelyAbsent(dir + "/g.segget-part"))
        let exact = StartingNames(entryLimit: 20)
        #expect(exact.surelyAbsent(dir + "/g.segget-part"))
        // A file where a directory should be: not readable as one.
        #expect(!StartingNames(files: 1).surelyAbsent(dir + "/f1/g.segget-part"))
    }

    @Test func relativePathsAreReadInTheCurrentDirectory() {
        let names = StartingNames(files: 1)
        // The test's working directory has no side files of this name.
        #expect(names.surelyAbsent("segget-names-test-relative.segget-part"))
    }
}

/// The same reading answers for finished files: a name there at the reading may be one an earlier
/// run left (look at its mark), any other is not, however often asked.
@Suite struct StartingNamesFinishedFilesTests {
    @Test func aNameThatWasThereMayHaveExistedAnyOtherNot() {
        var template = Array("/tmp/segget-names-test-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        close(open(dir + "/done.bin", O_CREAT | O_WRONLY, 0o644))
        defer {
            unlink(dir + "/done.bin")
            unlink(dir + "/late.bin")
            rmdir(dir)
        }
        let names = StartingNames(files: 10)
        #expect(!names.heldNothing(dir))
        for _ in 0..<2 {
            #expect(names.mayHaveExisted(dir + "/done.bin"))
            #expect(!names.mayHaveExisted(dir + "/other.bin"))
        }
        close(open(dir + "/late.bin", O_CREAT | O_WRONLY, 0o644))
        #expect(!names.mayHaveExisted(dir + "/late.bin"), "made after the reading: this batch's own")
        // Asking about a finished file does not use up a side file's one "surely absent".
        #expect(names.surelyAbsent(dir + "/other.bin.segget-journal"))
    }

    @Test func anEmptyOrMissingDirectoryHeldNothingAndAnUnreadableOneIsLookedAt() {
        var template = Array("/tmp/segget-names-test-XXXXXX".utf8CString)
        let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { rmdir(dir) }
        let names = StartingNames(files: 10)
        #expect(names.heldNothing(dir))
        #expect(names.heldNothing(dir + "/"))
        #expect(!names.mayHaveExisted(dir + "/x"))
        #expect(names.heldNothing(dir + "/missing"))
        let over = StartingNames(entryLimit: 0)
        close(open(dir + "/a", O_CREAT | O_WRONLY, 0o644))
        defer { unlink(dir + "/a") }
        #expect(!over.heldNothing(dir))
        #expect(over.mayHaveExisted(dir + "/b"))
    }
}

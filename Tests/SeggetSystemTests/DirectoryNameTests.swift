import Glibc
import Testing

@testable import SeggetSystem

@Suite struct DirectoryNameTests {
    /// The byte scan of an ASCII path finds the slash the `Character` search finds; a slash with a
    /// combining mark after it is not one (the path is not ASCII, so the `Character` search decides).
    @Test func matchesTheCharacterSearch() {
        let pieces = ["/", "//", ".", "a", "b.bin", "", " ", "é", "\u{301}", "/\u{301}", "\r\n", "\\"]
        var state: UInt64 = 0x5EED_000A
        for _ in 0..<10_000 {
            var path = ""
            for _ in 0..<6 {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                path += pieces[Int(state >> 33) % pieces.count]
            }
            let reference = path.lastIndex(of: "/").map { path[..<$0].isEmpty ? "/" : String(path[..<$0]) } ?? "."
            #expect(FileSystem.directoryName(of: path) == reference, "\(path.debugDescription)")
        }
        #expect(FileSystem.directoryName(of: "dl/x.bin") == "dl" && FileSystem.directoryName(of: "/x") == "/")
        #expect(FileSystem.directoryName(of: "x") == "." && FileSystem.directoryName(of: "d/\u{301}x") == ".")
    }
}

@Suite struct MakeDirectoriesTests {
    /// Every missing level is made, an existing one is left alone, and a file in the way is named.
    @Test func makesEveryLevelAndNamesTheOneInTheWay() throws {
        let root = "/tmp/segget-mkdirs-\(getpid())"
        defer { _ = system("rm -rf '\(root)'") }
        try FileSystem.makeDirectories(root + "/a/b/c")
        #expect(FileSystem.isDirectory(root + "/a/b/c"))
        // Again, and with a trailing slash: nothing to do.
        try FileSystem.makeDirectories(root + "/a/b/c")
        try FileSystem.makeDirectories(root + "/a/b/")
        for trivial in ["", ".", "/"] { try FileSystem.makeDirectories(trivial) }
        // A file where a level should be: that level, ENOTDIR.
        let file = try PosixFile.open(path: root + "/a/f", mode: .createExclusive(permissions: 0o600))
        file.close()
        #expect(throws: FileSystem.DirectoryFailure(path: root + "/a/f", error: .notDirectory)) {
            try FileSystem.makeDirectories(root + "/a/f/g/h")
        }
        #expect(throws: FileSystem.DirectoryFailure(path: root + "/a/f", error: .notDirectory)) {
            try FileSystem.makeDirectories(root + "/a/f")
        }
        // A symbolic link to nothing is named as such (it was "exists and is not a directory").
        #expect(symlink("nowhere", root + "/a/dangling") == 0)
        do {
            try FileSystem.makeDirectories(root + "/a/dangling/x")
            Issue.record("a directory was made through a link to nothing")
        } catch {
            #expect(error.danglingLink && error.path == root + "/a/dangling")
            #expect(error.description.contains("is a symbolic link whose target cannot be reached"), "\(error)")
        }
    }
}

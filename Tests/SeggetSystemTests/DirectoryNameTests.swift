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

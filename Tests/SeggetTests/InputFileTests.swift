import Testing
import SeggetVerify
@testable import Segget

@Suite struct InputFileTests {
    /// Two lines whose `out=` name the same file in the same `dir=`: the first two such, by line; a
    /// name from another directory, or a line without `out=`, is no clash.
    @Test func twoLinesNamingTheSameFileAreFound() throws {
        let file = try InputFile(parsing: """
            https://example.com/a
              out=x.bin
            https://example.com/b
              out=x.bin
              dir=other
            https://example.com/x.bin
            https://example.com/c
              out=y.bin
            https://example.com/d
              out=x.bin
            """)
        let clash = InputFile.sameOutputName(in: file.entries)
        #expect(clash.map { [$0.0.line, $0.1.line] } == [1, 9])
        let apart = try InputFile(parsing: "https://example.com/a\n  out=x.bin\nhttps://example.com/b\n  out=x.bin\n  dir=d\n")
        #expect(InputFile.sameOutputName(in: apart.entries) == nil)
        // One directory however it is written, -d included for a line without dir=.
        let spelled = try InputFile(parsing: "https://example.com/a\n  out=x.bin\n  dir=./dl/\nhttps://example.com/b\n  out=x.bin\n")
        #expect(InputFile.sameOutputName(in: spelled.entries) == nil)
        #expect(InputFile.sameOutputName(in: spelled.entries, directory: "dl").map { [$0.0.line, $0.1.line] } == [1, 4])
        #expect(InputFile.sameOutputName(in: spelled.entries, directory: "dl//").map { [$0.0.line, $0.1.line] } == [1, 4])
    }

    @Test func urlsCommentsAndOptions() throws {
        let text = """
            # a comment
            https://example.com/a.iso

            http://example.com/b.bin\thttp://mirror.example.org/b.bin
              out=bee.bin
            \tdir=downloads/b
              checksum=sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
              header=X-Token: 42
              referer=https://example.com/
               # an indented comment
            https://example.com/c
            """
        let file = try InputFile(parsing: text)
        #expect(file.entries.count == 3)
        #expect(file.entries[0].url == "https://example.com/a.iso")
        #expect(file.entries[0].line == 2)
        #expect(file.entries[0].options.outputName == nil)
        let b = file.entries[1]
        #expect(b.url == "http://example.com/b.bin")
        #expect(b.mirrors == ["http://mirror.example.org/b.bin"])
        #expect(b.line == 4)
        #expect(b.options.outputName == "bee.bin")
        #expect(b.options.directory == "downloads/b")
        #expect(b.options.checksums.count == 1)
        #expect(b.options.checksums.first?.algorithm == .sha256)
        #expect(b.options.headers == ["X-Token: 42"])
        #expect(b.options.referer == "https://example.com/")
        #expect(file.entries[2].url == "https://example.com/c")
        #expect(file.entries[2].line == 11)
    }

    /// A list saved by a Windows editor starts with a byte order mark; its first URL was refused as
    /// "not an absolute URL" with the invisible mark inside the quotes. Only a mark at the very start
    /// is dropped, and the lines keep their numbers.
    @Test func aByteOrderMarkAtTheStartIsNotPartOfTheFirstURL() throws {
        for text in ["\u{FEFF}http://a.example/x\r\n  out=y\r\nhttp://a.example/z\r\n", "\u{FEFF}# list\nhttp://a.example/x\n  out=y\nhttp://a.example/z\n"] {
            let file = try InputFile(parsing: text)
            #expect(file.entries.map(\.url) == ["http://a.example/x", "http://a.example/z"])
            #expect(file.entries[0].options.outputName == "y")
            #expect(file.entries[1].line == (text.contains("#") ? 4 : 3))
        }
        #expect(throws: InputFileError.self) { try InputFile(parsing: "http://a.example/x\n\u{FEFF}http://a.example/z\n") }
    }

    @Test func crlfAndEmptyInput() throws {
        let file = try InputFile(parsing: "http://a.example/x\r\n  out=y\r\n\r\n")
        #expect(file.entries.count == 1)
        #expect(file.entries[0].options.outputName == "y")
        #expect(try InputFile(parsing: "").entries.isEmpty)
        #expect(try InputFile(parsing: "# only a comment\n\n").entries.isEmpty)
    }

    @Test func ariaStyleChecksumAlgorithmName() throws {
        let md5 = "d41d8cd98f00b204e9800998ecf8427e"
        let file = try InputFile(parsing: "http://a.example/x\n  checksum=md5=\(md5)\n")
        #expect(file.entries[0].options.checksums.first?.hex == md5)
        let dashed = try InputFile(parsing: "http://a.example/x\n  checksum=sha-256=\(String(repeating: "ab", count: 32))\n")
        #expect(dashed.entries[0].options.checksums.first?.algorithm == .sha256)
    }

    @Test(arguments: [
        ("  out=x\nhttp://a.example/f", 1, "before any URL"),
        ("http://a.example/f\n  colour=blue", 2, "unknown option 'colour'"),
        ("http://a.example/f\n  out", 2, "NAME=VALUE"),
        ("http://a.example/f\n  out=", 2, "empty value"),
        ("http://a.example/f\n  out=../etc/passwd", 2, "without '/'"),
        ("http://a.example/f\n  out=big.segget-part", 2, "ends in .segget-part"),
        ("http://a.example/f\n  out=big.segget-journal", 2, "ends in .segget-journal"),
        ("http://a.example/f\n  checksum=sha256=123", 2, "SHA-256"),
        ("http://a.example/f\n  header=NoColon", 2, "Name: value"),
        ("\n\nftp://a.example/f", 3, "scheme 'ftp'"),
        ("not a url", 1, "not an absolute URL"),
        ("http://a.example/f\thttp:///x", 1, "not an absolute URL"),
    ])
    func errorsNameTheLine(_ text: String, _ line: Int, _ fragment: String) {
        do {
            _ = try InputFile(parsing: text)
            Issue.record("no error for \(text)")
        } catch {
            #expect(error.line == line)
            #expect(error.description.hasPrefix("line \(line): "))
            #expect(error.message.contains(fragment), "\(error.message)")
        }
    }
}

@Suite struct OutputNamesTests {
    @Test func numbering() {
        #expect(OutputNames.numbered("file.bin", 1) == "file.1.bin")
        #expect(OutputNames.numbered("file.bin", 12) == "file.12.bin")
        #expect(OutputNames.numbered("README", 1) == "README.1")
        #expect(OutputNames.numbered("src.tar.gz", 2) == "src.2.tar.gz")
        #expect(OutputNames.numbered("SRC.TAR.XZ", 1) == "SRC.1.TAR.XZ")
        #expect(OutputNames.numbered(".profile", 1) == ".profile.1")
        #expect(OutputNames.numbered("a.b.c", 1) == "a.b.1.c")
    }

    @Test func claimsInOrder() {
        var names = OutputNames()
        #expect(names.claim(name: "file.bin", directory: nil) == "file.bin")
        #expect(names.claim(name: "file.bin", directory: ".") == "file.1.bin")
        #expect(names.claim(name: "file.bin", directory: "dl") == "dl/file.bin")
        #expect(names.claim(name: "file.bin", directory: "./dl/") == "./dl/file.1.bin")
        #expect(names.claim(name: "file.1.bin", directory: nil) == "file.1.1.bin")
        #expect(names.claim(name: "file.bin", directory: nil) == "file.2.bin")
        #expect(names.claim(name: "other", directory: "/tmp") == "/tmp/other")
    }

    /// An `out=` name is kept for its own line wherever that line stands; names from URLs and
    /// servers are numbered around it (the URL's `x.bin` took the name, and `out=x.bin` became `x.1.bin`).
    @Test func outNamesAreKeptForTheirLines() {
        var names = OutputNames(reserving: ["x.bin", "dl/y.bin", "./z"])
        #expect(names.claim(name: "x.bin", directory: nil) == "x.1.bin")
        #expect(names.claim(name: "y.bin", directory: "dl/") == "dl/y.1.bin")
        #expect(names.claim(outName: "x.bin", directory: ".") == "x.bin")
        #expect(names.claim(outName: "y.bin", directory: "./dl") == "./dl/y.bin")
        #expect(names.claim(name: "x.bin", directory: nil) == "x.2.bin")
        #expect(names.claim(name: "z", directory: nil) == "z.1")
        #expect(names.claim(outName: "z", directory: nil) == "z")
        // A name no line reserved (it cannot come from a checked list) is claimed as any other.
        #expect(names.claim(outName: "w", directory: nil) == "w")
        #expect(names.claim(outName: "x.bin", directory: nil) == "x.3.bin")
    }
}

@Suite struct OrderedNamesTests {
    @Test func wishesInListOrderAreDecidedOneByOne() {
        var names = OrderedNames(count: 3)
        #expect(names.wish(.name("a.bin", directory: nil), for: 0) == 0..<1)
        #expect(names.path(of: 0) == "a.bin")
        #expect(names.wish(.name("a.bin", directory: nil), for: 1) == 1..<2)
        #expect(names.path(of: 1) == "a.1.bin")
        #expect(names.wish(.path("x/y"), for: 2) == 2..<3)
        #expect(names.path(of: 2) == "x/y")
        #expect(names.decided == 3)
    }

    @Test func aLaterWishWaitsForEveryEarlierOne() {
        var names = OrderedNames(count: 4)
        #expect(names.wish(.name("f", directory: "d"), for: 2).isEmpty)
        #expect(names.path(of: 2) == nil)
        #expect(names.wish(.name("f", directory: "d"), for: 3).isEmpty)
        #expect(names.wish(.name("f", directory: "d"), for: 1).isEmpty)
        #expect(names.decided == 0)
        // The first file's report decides all four.
        #expect(names.wish(.name("f", directory: "d"), for: 0) == 0..<4)
        #expect((0..<4).map { names.path(of: $0) } == ["d/f", "d/f.1", "d/f.2", "d/f.3"])
    }

    @Test func namesFollowTheListWhateverOrderTheWishesCameIn() {
        let wishes: [OrderedNames.Wish] = [
            .name("a.tar.gz", directory: nil), .path(nil), .name("a.tar.gz", directory: "."),
            .name("b", directory: nil), .name("a.tar.gz", directory: nil), .path("a.tar.gz"),
        ]
        var inOrder = OrderedNames(count: wishes.count)
        for (k, w) in wishes.enumerated() { _ = inOrder.wish(w, for: k) }
        let expected: [String?] = ["a.tar.gz", nil, "a.1.tar.gz", "b", "a.2.tar.gz", "a.tar.gz"]
        #expect((0..<wishes.count).map { inOrder.path(of: $0) } == expected)
        // Every order of the reports gives the same paths, and each file is decided exactly once.
        for order in [[5, 4, 3, 2, 1, 0], [1, 3, 5, 0, 2, 4], [0, 2, 1, 4, 3, 5], [2, 0, 1, 5, 4, 3]] {
            var names = OrderedNames(count: wishes.count)
            var decidedBy: [Int] = []
            for k in order { decidedBy += Array(names.wish(wishes[k], for: k)) }
            #expect(decidedBy == Array(0..<wishes.count))
            #expect((0..<wishes.count).map { names.path(of: $0) } == expected)
        }
    }
}

extension OrderedNamesTests {
    /// A list whose out= line names what an earlier URL's name would be: each order of reports
    /// gives the out= line its name and the URL's file a number.
    @Test func anOutNameBeatsAnEarlierURLsName() {
        let wishes: [OrderedNames.Wish] = [
            .name("x.bin", directory: nil), .outName("x.bin", directory: nil), .name("x.bin", directory: "."),
        ]
        for order in [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
            var names = OrderedNames(count: wishes.count, reserving: ["x.bin"])
            for k in order { _ = names.wish(wishes[k], for: k) }
            #expect((0..<wishes.count).map { names.path(of: $0) } == ["x.1.bin", "x.bin", "x.2.bin"])
        }
    }
}

@Suite struct MetalinkFormTests {
    /// A Metalink is named by its path's `.meta4` (any case) or a `meta4` query item; the query is
    /// what follows the first "?" and stops at "#".
    @Test func aMetalinkIsKnownByItsPathOrItsQuery() {
        let metalinks = [
            "http://h/f.meta4", "https://h/d/F.META4", "http://h/get?meta4", "http://h/get?a=1&meta4=x",
            "http://h/x?meta4#frag", "http://h/x?a=?&meta4", "docs/list.meta4", "http://h/é?meta4",
        ]
        let others = [
            "http://h/f.bin", "http://h/get?a#meta4", "http://h/f.bin?x=meta4", "http://h/f?meta4x",
            "http://h/f.meta4.bin", "x?meta4", "http://h/?", "http://h/a?\u{301}meta4",
        ]
        for s in metalinks { #expect(MetalinkSource.looksLikeMetalink(s), "\(s)") }
        for s in others { #expect(!MetalinkSource.looksLikeMetalink(s), "\(s)") }
    }
}

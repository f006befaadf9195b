import Testing
import SeggetVerify
@testable import Segget

@Suite struct InputFileTests {
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
        #expect(file.entries[0].outputName == nil)
        let b = file.entries[1]
        #expect(b.url == "http://example.com/b.bin")
        #expect(b.mirrors == ["http://mirror.example.org/b.bin"])
        #expect(b.line == 4)
        #expect(b.outputName == "bee.bin")
        #expect(b.directory == "downloads/b")
        #expect(b.checksums.count == 1)
        #expect(b.checksums.first?.algorithm == .sha256)
        #expect(b.headers == ["X-Token: 42"])
        #expect(b.referer == "https://example.com/")
        #expect(file.entries[2].url == "https://example.com/c")
        #expect(file.entries[2].line == 11)
    }

    @Test func crlfAndEmptyInput() throws {
        let file = try InputFile(parsing: "http://a.example/x\r\n  out=y\r\n\r\n")
        #expect(file.entries.count == 1)
        #expect(file.entries[0].outputName == "y")
        #expect(try InputFile(parsing: "").entries.isEmpty)
        #expect(try InputFile(parsing: "# only a comment\n\n").entries.isEmpty)
    }

    @Test func ariaStyleChecksumAlgorithmName() throws {
        let md5 = "d41d8cd98f00b204e9800998ecf8427e"
        let file = try InputFile(parsing: "http://a.example/x\n  checksum=md5=\(md5)\n")
        #expect(file.entries[0].checksums.first?.hex == md5)
        let dashed = try InputFile(parsing: "http://a.example/x\n  checksum=sha-256=\(String(repeating: "ab", count: 32))\n")
        #expect(dashed.entries[0].checksums.first?.algorithm == .sha256)
    }

    @Test(arguments: [
        ("  out=x\nhttp://a.example/f", 1, "before any URL"),
        ("http://a.example/f\n  colour=blue", 2, "unknown option 'colour'"),
        ("http://a.example/f\n  out", 2, "NAME=VALUE"),
        ("http://a.example/f\n  out=", 2, "empty value"),
        ("http://a.example/f\n  out=../etc/passwd", 2, "without '/'"),
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
}

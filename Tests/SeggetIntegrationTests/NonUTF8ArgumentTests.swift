import Glibc
import Testing

/// `-o` with a name that is not UTF-8 (a Latin-1 é, as a shell's `$'caf\xe9.bin'` gives it): refused
/// with exit 2, naming the argument with its byte as `\xe9`, and nothing made. Before, Swift read the
/// byte as U+FFFD and segget saved the file as `caf�.bin`.
@Suite(.serialized) struct NonUTF8ArgumentTests {
    @Test func aNameThatIsNotUTF8IsRefused() throws {
        let dir = try TempDir()
        let p = try SpawnedProcess(
            executable: "/bin/sh",
            arguments: ["-c", "exec \"$0\" -q -o \"$1/$(printf 'caf\\351.bin')\" http://127.0.0.1:9/f.bin", try SpawnedProcess.seggetPath(), dir.path])
        let r = p.wait(timeout: 60)
        #expect(r.exitCode == 2, "\(r.exitCode): \(r.stderr)")
        #expect(r.stderr.contains("argument 3 is not UTF-8 (") && r.stderr.contains("caf\\xe9.bin')"), "\(r.stderr)")
        guard let d = opendir(dir.path) else { throw TestSupportError("opendir: \(errno)") }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        #expect(names.isEmpty, "\(names)")
    }

    /// The same for an input file (`-i`): a line that is not UTF-8 is refused with its number.
    @Test func anInputFileLineThatIsNotUTF8IsRefused() throws {
        let dir = try TempDir()
        let list = dir.path("list.txt")
        let bytes = Array("http://127.0.0.1:9/f.bin\n  out=caf".utf8) + [0xE9] + Array(".bin\n".utf8)
        let fd = open(list, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        let r = try runSegget(args: ["-q", "-i", list, "-d", dir.path("out")], timeout: 60)
        #expect(r.exitCode == 2, "\(r.exitCode): \(r.stderr)")
        #expect(r.stderr.contains("is not UTF-8 at line 2 ('  out=caf\\xe9.bin')"), "\(r.stderr)")
        #expect(!TestFiles.exists(dir.path("out")))
    }

    /// A value with a line break that the option refuses (`-H $'X-A: a\nb'`): one line on stderr and
    /// in `--json`'s error, the break shown escaped, and the reason kept (cut at the break, the message
    /// was "The value 'X-A: a." and lost why).
    @Test func aValueWithALineBreakIsRefusedInOneLine() throws {
        for value in ["X-A: a\nInjected: 1", "X-A: a\r\nInjected: 1"] {
            let r = try runSegget(args: ["--json", "-H", value, "-o", "/nonexistent/x", "http://127.0.0.1:9/f.bin"], timeout: 60)
            #expect(r.exitCode == 2, "\(r.exitCode): \(r.stderr)")
            #expect(r.stderr.utf8.filter { $0 == 10 || $0 == 13 }.count == 1, "\(r.stderr)")
            #expect(r.stderr.contains("X-A: a\\") && r.stderr.contains("line break"), "\(r.stderr)")
            #expect(r.stdout.contains("line break") && r.stdout.utf8.filter { $0 == 10 || $0 == 13 }.count == 1, "\(r.stdout)")
        }
    }
}

import Glibc
import SeggetTestServer
import Testing

/// A process file size limit (`ulimit -f`, as some shells, containers and batch systems set) below the
/// file: past it a write raises SIGXFSZ, whose default ended segget at once (exit 153, no word, the
/// part file left). segget ignores the signal, says what limits it and ends with exit 5.
@Suite(.serialized) struct FileSizeLimitTests {
    /// Runs segget under a file size limit of `kib` KiB (`/bin/sh`'s `ulimit -f` counts 512-byte
    /// blocks, as POSIX has it; bash's counts 1024).
    static func seggetUnderLimit(kib: Int, _ arguments: [String]) throws -> SpawnedProcess.Outcome {
        let p = try SpawnedProcess(
            executable: "/bin/sh",
            arguments: ["-c", "ulimit -f \(kib * 2) && exec \"$0\" \"$@\"", try SpawnedProcess.seggetPath()] + arguments)
        return p.wait(timeout: 60)
    }

    static let limitSentence = "this process may write no file larger than 1.0 MiB (its file size limit, ulimit -f)"

    /// A file of known length: its reservation fails, before any byte is fetched, and nothing is left.
    @Test func aRangedFileLargerThanTheLimitIsRefusedInWords() throws {
        let server = try TestServer.serving(TestFiles.pattern(4 << 20, seed: 71))
        defer { server.stop() }
        let dir = try TempDir()
        let o = try Self.seggetUnderLimit(kib: 1024, ["-n", "4", "-d", dir.path, server.url("f")])
        #expect(o.signal == nil && o.exitCode == 5, "\(o.exitCode) \(o.stderr)")
        #expect(o.stderr.contains(Self.limitSentence) && o.stderr.contains("4.0 MiB"), "\(o.stderr)")
        #expect(TestFiles.read(dir.path("f")) == nil)
        #expect(TestFiles.read(dir.path("f.segget-part")) == nil)
    }

    /// A body of unknown length (chunked, no byte ranges): the write past the limit fails, the
    /// message says why, and no file is left under the final name.
    @Test func aStreamedBodyPastTheLimitEndsInWords() throws {
        let server = try TestServer.serving(TestFiles.pattern(4 << 20, seed: 72))
        defer { server.stop() }
        let dir = try TempDir()
        let o = try Self.seggetUnderLimit(kib: 1024, ["-d", dir.path, server.url("f", mode: .chunked)])
        #expect(o.signal == nil && o.exitCode == 5, "\(o.exitCode) \(o.stderr)")
        #expect(o.stderr.contains(Self.limitSentence), "\(o.stderr)")
        #expect(TestFiles.read(dir.path("f")) == nil)
    }

    /// `-o -` into a file under the limit: standard output's write fails with EFBIG, which is said as
    /// the limit (not as a reader gone away, nor as the file system's size), exit 5.
    @Test func aStreamToAFilePastTheLimitEndsInWords() throws {
        let server = try TestServer.serving(TestFiles.pattern(4 << 20, seed: 74))
        defer { server.stop() }
        let dir = try TempDir()
        let p = try SpawnedProcess(
            executable: "/bin/sh",
            arguments: ["-c", "ulimit -f \(1024 * 2) && exec \"$0\" \"$@\" > \"$SEGGET_OUT\"", try SpawnedProcess.seggetPath(), "-o", "-", server.url("f")],
            environment: ["SEGGET_OUT": dir.path("out")])
        let o = p.wait(timeout: 60)
        #expect(o.signal == nil && o.exitCode == 5, "\(o.exitCode) \(o.stderr)")
        #expect(o.stderr.contains("could not write the stream: " + Self.limitSentence), "\(o.stderr)")
        #expect(TestFiles.read(dir.path("out"))?.count == 1 << 20)
    }

    /// Under the limit nothing changes: the same file, a limit above it, downloads whole.
    @Test func aFileUnderTheLimitDownloads() throws {
        let body = TestFiles.pattern(4 << 20, seed: 73)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let o = try Self.seggetUnderLimit(kib: 8192, ["-n", "4", "-d", dir.path, server.url("f")])
        #expect(o.exitCode == 0, "\(o.stderr)")
        #expect(TestFiles.read(dir.path("f")) == body)
    }
}

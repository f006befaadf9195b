import Foundation
import Segget
import SeggetTestServer
import SeggetVerify
import Testing

#if canImport(Glibc)
import Glibc
#endif

// Verification at the speed of the download: the hasher takes the bytes as the connections hand them
// to the writer, and reads back from the file only what fell out of its window (issue 39).

@Suite("Hashing from memory", .serialized)
struct HashFromMemoryTests {
    static func options(_ out: String, connections: Int, checksum: String) throws -> DownloadOptions {
        var o = DownloadOptions()
        o.outputPath = out
        o.connections = connections
        o.syncBeforeRename = false
        o.checksums = [try ExpectedDigest(parsing: checksum)]
        return o
    }

    /// Four connections paced alike over 32 MiB: their in-order runs stay inside the window, so the
    /// hash takes (nearly) every byte from memory and reads (nearly) nothing back. With the bytes read
    /// back from the file, as before, `fromMemory` would be 0.
    @Test func anInOrderDownloadIsHashedFromMemory() throws {
        let body = TestFiles.pattern(32 << 20, seed: 39)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let out = dir.path("out.bin")
        let o = try Self.options(out, connections: 4, checksum: "sha256=\(sha256Text(body))")
        let result = try Download(url: server.baseURL + "/f?rate=8m", options: o).run()
        #expect(TestFiles.fileDifference(out, body) == nil)
        #expect(result.verified == ["SHA-256=\(sha256Text(body))"])
        let hashing = try #require(result.hashing)
        #expect(hashing.fromMemory >= Int64(body.count) * 9 / 10, "\(hashing)")
        #expect(hashing.readBack <= Int64(body.count) / 10, "\(hashing)")
    }

    /// The command line says where the hash took its bytes from in `--json`'s finish event, and
    /// without a digest to check it says null.
    @Test func theFinishEventReportsTheBytesHashedFromMemoryAndReadBack() throws {
        let body = TestFiles.pattern(12 << 20, seed: 40)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let url = server.baseURL + "/f?rate=8m"
        let r = try runSegget(args: ["--json", "-n", "4", "-o", dir.path("a.bin"), "--checksum", "sha256=\(sha256Text(body))", url])
        #expect(r.exitCode == 0, "\(r.stderr)")
        let finish = try #require(r.stdout.split(separator: "\n").first { $0.contains("\"type\":\"finish\"") })
        let event = try #require(try JSONSerialization.jsonObject(with: Data(finish.utf8)) as? [String: Any])
        let hashing = try #require(event["hashing"] as? [String: Any], "\(finish)")
        let fromMemory = try #require(hashing["fromMemory"] as? Int)
        let readBack = try #require(hashing["readBack"] as? Int)
        #expect(fromMemory + readBack >= body.count, "\(finish)")
        #expect(fromMemory >= body.count * 9 / 10, "\(finish)")

        let plain = try runSegget(args: ["--json", "-n", "4", "-o", dir.path("b.bin"), url])
        #expect(plain.exitCode == 0, "\(plain.stderr)")
        #expect(plain.stdout.contains("\"hashing\":null"), "\(plain.stdout)")
    }

    /// A wrong digest still fails when the bytes were hashed from memory: exit 6, and nothing is
    /// left under the final name (nor a part file or journal).
    @Test func aWrongChecksumHashedFromMemoryStillFails() throws {
        let body = TestFiles.pattern(12 << 20, seed: 41)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let out = dir.path("out.bin")
        var wrong = sha256Text(body)
        wrong = String(wrong.dropLast()) + (wrong.hasSuffix("0") ? "1" : "0")
        let r = try runSegget(args: ["-q", "-n", "4", "-o", out, "--checksum", "sha256=\(wrong)", server.baseURL + "/f?rate=8m"])
        #expect(r.exitCode == 6, "\(r.stderr)")
        #expect(r.stderr.contains("mismatch") && r.stderr.contains(sha256Text(body)), "\(r.stderr)")
        #expect(!TestFiles.exists(out))
        #expect(!TestFiles.exists(out + ".segget-part"))
        #expect(!TestFiles.exists(out + ".segget-journal"))
    }

    /// A resumed download reads the part kept on disk back and hashes the rest as it arrives: both
    /// counts show, and the file is verified.
    @Test func aResumedDownloadReadsTheKeptPartAndHashesTheRestFromMemory() throws {
        let body = TestFiles.pattern(16 << 20, seed: 42)
        let server = try TestServer.serving(body)
        defer { server.stop() }
        let dir = try TempDir()
        let out = dir.path("out.bin")
        let url = server.baseURL + "/f?rate=4m"
        let digest = "sha256=\(sha256Text(body))"
        var o = try Self.options(out, connections: 4, checksum: digest)
        let flag = InterruptFlag()
        let total = Int64(body.count)
        #expect(throws: SeggetError.self) {
            _ = try Download(url: url, options: o).run(
                progress: { p in if p.completedBytes >= total / 2 { flag.set() } }, interrupt: flag)
        }
        #expect(TestFiles.exists(out + ".segget-journal"))

        o = try Self.options(out, connections: 4, checksum: digest)
        let result = try Download(url: url, options: o).run()
        #expect(result.resumedBytes > 0 && result.resumedBytes < total)
        #expect(result.verified == ["SHA-256=\(sha256Text(body))"])
        #expect(TestFiles.fileDifference(out, body) == nil)
        let hashing = try #require(result.hashing)
        #expect(hashing.readBack >= result.resumedBytes, "the kept part is read back: \(hashing)")
        #expect(hashing.fromMemory > 0, "the fetched part comes from memory: \(hashing)")
        #expect(hashing.fromMemory + hashing.readBack >= total, "\(hashing)")
    }
}

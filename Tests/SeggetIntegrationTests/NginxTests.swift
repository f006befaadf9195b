import Glibc
import Segget
import Testing

/// Downloads from a real nginx started by scripts/test (SEGGET_NGINX_URL / SEGGET_NGINX_ROOT), and
/// compares every result byte for byte with the file nginx serves.
@Suite(.serialized, .enabled(if: getenv("SEGGET_NGINX_URL") != nil, "needs the nginx started by scripts/test"))
struct NginxTests {
    let base = String(cString: getenv("SEGGET_NGINX_URL"))
    let root = String(cString: getenv("SEGGET_NGINX_ROOT"))

    static let files = ["size-0", "size-1", "size-chunk-minus-1", "size-chunk", "size-chunk-plus-1", "size-256m"]

    @Test(arguments: [1, 3, 8, 32])
    func everySizeIsByteIdentical(_ n: Int) throws {
        for name in Self.files {
            let dir = try TempDir()
            var o = DownloadOptions()
            o.connections = n
            o.outputPath = dir.path(name)
            let r = try Download(url: "\(base)/\(name)", options: o).run()
            // nginx answers a range on an empty file with 200, so that one is a plain stream.
            #expect(r.usedRanges == (name != "size-0"), "\(name)")
            #expect(r.bytes == TestFiles.size("\(root)/\(name)"))
            #expect(TestFiles.fileDifference(dir.path(name), "\(root)/\(name)") == nil, "\(name) with -n \(n)")
        }
    }

    /// Through the page cache instead of `O_DIRECT` (`--buffered-io`, and the fallback where a file
    /// system refuses `O_DIRECT`).
    @Test func bufferedWritesAreByteIdentical() throws {
        for name in Self.files {
            let dir = try TempDir()
            var o = DownloadOptions()
            o.connections = 8
            o.directIO = false
            o.outputPath = dir.path(name)
            _ = try Download(url: "\(base)/\(name)", options: o).run()
            #expect(TestFiles.fileDifference(dir.path(name), "\(root)/\(name)") == nil, "\(name)")
        }
    }

    /// Chunk boundaries that are not multiples of 4 KiB, so that blocks at range edges go through the
    /// page cache while the rest goes with `O_DIRECT`; with a checksum, so that the hasher's memory
    /// window and its direct reads are exercised on the same file.
    @Test(arguments: [65536 + 1000, (1 << 20) + 4095])
    func unalignedChunksWithChecksum(_ chunkSize: Int) throws {
        let name = "size-256m"
        let digest = try digestFile(path: "\(root)/\(name)", algorithms: [.sha256])[.sha256]!
        let dir = try TempDir()
        var o = DownloadOptions()
        o.connections = 8
        o.chunkSize = Int64(chunkSize)
        o.outputPath = dir.path(name)
        o.checksums = [ExpectedDigest(algorithm: .sha256, bytes: digest)!]
        let r = try Download(url: "\(base)/\(name)", options: o).run()
        #expect(r.verified.count == 1)
        #expect(TestFiles.fileDifference(dir.path(name), "\(root)/\(name)") == nil)
    }
}

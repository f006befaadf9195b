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
}

#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under `$TMPDIR` (or /tmp), removed with everything in it when the last reference
/// goes away. `path(_:)` names a file inside it.
///
///     let dir = try TempDir()
///     let out = dir.path("out.bin")
final class TempDir: @unchecked Sendable {
    let path: String

    /// Creates `PREFIX.XXXXXX` under the temporary directory.
    init(prefix: String = "segget-test") throws {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw TestSupportError("mkdtemp in \(base) failed: \(String(cString: strerror(errno)))") }
        path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    deinit { removeTree(path) }

    /// `PATH/name`.
    func path(_ name: String) -> String { path + "/" + name }

    /// The names in the directory, sorted.
    func names() -> [String] { directoryNames(path).sorted() }
}

/// A failure inside a test helper, with a readable message.
struct TestSupportError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Removes `path` and, if it is a directory, everything below it (symbolic links are not followed).
func removeTree(_ path: String) {
    var st = stat()
    guard lstat(path, &st) == 0 else { return }
    if (st.st_mode & S_IFMT) == S_IFDIR {
        for n in directoryNames(path) { removeTree(path + "/" + n) }
        rmdir(path)
    } else {
        unlink(path)
    }
}

/// Every name in directory `path` but `.` and `..`; none where it cannot be read.
func directoryNames(_ path: String) -> [String] {
    guard let dir = opendir(path) else { return [] }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

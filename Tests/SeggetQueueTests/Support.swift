import Glibc
import Testing

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents when released.
final class QueueTempDir: @unchecked Sendable {
    let path: String

    init() throws {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/segget-queue-test.XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw QueueTestError("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    deinit { _ = system("rm -rf '\(path)'") }

    func path(_ name: String) -> String { path + "/" + name }
}

struct QueueTestError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

enum QueueTestFiles {
    static func read(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buf.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return n == 0 ? out : nil }
            out.append(contentsOf: buf[0..<n])
        }
    }

    static func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var x = seed | 1
        return (0..<count).map { _ in
            x ^= x << 13
            x ^= x >> 7
            x ^= x << 17
            return UInt8(truncatingIfNeeded: x)
        }
    }
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

/// Polls `condition` every 20 ms until it holds or `timeout` seconds pass; returns whether it held.
func eventually(timeout: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = monotonicSeconds() + timeout
    while monotonicSeconds() < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

/// A built executable beside this test bundle, else under .build/debug.
func builtExecutable(_ name: String) throws -> String {
    var candidates: [String] = []
    var buf = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buf, buf.count - 1)
    if n > 0 {
        let exe = String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if let slash = exe.lastIndex(of: "/") { candidates.append(String(exe[..<slash]) + "/" + name) }
    }
    if let cwd = getcwd(nil, 0) {
        candidates.append(String(cString: cwd) + "/.build/debug/" + name)
        free(cwd)
    }
    guard let found = candidates.first(where: { access($0, X_OK) == 0 }) else {
        throw QueueTestError("cannot find \(name) (tried \(candidates)); run swift build first")
    }
    return found
}

/// A child process with stdout to a file, killed by the test.
final class QueueChild: @unchecked Sendable {
    let pid: pid_t
    let stdoutPath: String

    init(_ executable: String, _ arguments: [String], stdoutPath: String) throws {
        self.stdoutPath = stdoutPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stdoutPath + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard rc == 0 else { throw QueueTestError("posix_spawn \(executable): \(String(cString: strerror(rc)))") }
        self.pid = pid
    }

    var output: String { String(decoding: QueueTestFiles.read(stdoutPath) ?? [], as: UTF8.self) }
    var errors: String { String(decoding: QueueTestFiles.read(stdoutPath + ".err") ?? [], as: UTF8.self) }

    /// SIGKILL and reap; returns the wait status.
    @discardableResult
    func kill9() -> Int32 {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return status
    }
}

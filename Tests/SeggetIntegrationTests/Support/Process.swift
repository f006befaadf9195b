#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, its stdout and stderr captured in files (no pipes, so
/// a chatty child can never block on a full pipe while the test waits for it).
///
///     let p = try SpawnedProcess(executable: SpawnedProcess.seggetPath(), arguments: ["-q", url, "-o", out])
///     p.signal(SIGTERM)
///     let r = p.wait(timeout: 30)
final class SpawnedProcess: @unchecked Sendable {
    let pid: pid_t
    let executable: String
    let arguments: [String]
    private let outputDir: TempDir
    private var status: Int32?

    /// How a finished child ended.
    struct Outcome: Sendable {
        /// The exit status, or 128 + signal number when a signal killed it (as a shell reports it).
        var exitCode: Int32
        /// The signal that killed it, nil when it exited.
        var signal: Int32?
        var stdout: String
        var stderr: String
        /// True when `wait(timeout:)` had to kill it.
        var timedOut: Bool
    }

    /// Starts `executable` with `arguments`. The environment is inherited minus proxy variables (tests
    /// talk to loopback servers only), plus `environment`.
    /// With `standardOutput`, the child's stdout is that descriptor (a pipe the test holds), not a file.
    init(
        executable: String, arguments: [String], environment: [String: String] = [:], standardOutput: Int32? = nil
    ) throws {
        self.executable = executable
        self.arguments = arguments
        outputDir = try TempDir(prefix: "segget-proc")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let standardOutput {
            posix_spawn_file_actions_adddup2(&actions, standardOutput, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, outputDir.path("stdout"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
        posix_spawn_file_actions_addopen(&actions, 2, outputDir.path("stderr"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        // Nothing else crosses over: descriptors without FD_CLOEXEC (libcurl's sockets among them) would
        // otherwise keep another test's connections open in the child for as long as it runs.
        // (glibc ≥ 2.34 has posix_spawn_file_actions_addclosefrom_np; Swift's Glibc module does not
        // export it, so it is looked up at run time.)
        if let closeFrom = Self.addCloseFrom {
            _ = closeFrom(&actions, 3)
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts with default signal dispositions and an empty mask, whatever the test
        // runner blocked or ignored.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGINT)
        sigaddset(&defaults, SIGTERM)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var env: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let text = String(cString: entry)
            if let eq = text.firstIndex(of: "=") {
                env[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            p += 1
        }
        for key in env.keys where key.lowercased().hasSuffix("_proxy") { env[key] = nil }
        env["NO_PROXY"] = "*"
        for (k, v) in environment { env[k] = v }

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for a in argv { free(a) }
            for e in envp { free(e) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else {
            throw TestSupportError("cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        pid = child
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = {
        guard let sym = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else { return nil }
        return unsafeBitCast(sym, to: AddCloseFrom.self)
    }()

    deinit {
        if status == nil {
            kill(pid, SIGKILL)
            var s: Int32 = 0
            _ = waitpid(pid, &s, 0)
        }
    }

    /// Sends `sig` to the child (ignored when it already ended).
    func signal(_ sig: Int32) {
        if status == nil { kill(pid, sig) }
    }

    /// True while the child has not ended (reaps it when it has).
    var isRunning: Bool {
        if status != nil { return false }
        var s: Int32 = 0
        let r = waitpid(pid, &s, WNOHANG)
        if r == pid { status = s; return false }
        return r == 0
    }

    /// Waits for the child to end; after `timeout` seconds it is killed with SIGKILL and the outcome
    /// says `timedOut`.
    func wait(timeout: Double = 60) -> Outcome {
        var timedOut = false
        let deadline = nowSeconds() + timeout
        while isRunning {
            if nowSeconds() > deadline {
                timedOut = true
                kill(pid, SIGKILL)
                var s: Int32 = 0
                _ = waitpid(pid, &s, 0)
                status = s
                break
            }
            usleep(5_000)
        }
        let s = status ?? 0
        let termSignal = s & 0x7f
        let exited = termSignal == 0
        let out = TestFiles.read(outputDir.path("stdout")) ?? []
        let err = TestFiles.read(outputDir.path("stderr")) ?? []
        return Outcome(
            exitCode: exited ? (s >> 8) & 0xff : 128 + termSignal, signal: exited ? nil : termSignal,
            stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self),
            timedOut: timedOut)
    }

    /// The stderr written so far.
    var stderrSoFar: String {
        String(decoding: TestFiles.read(outputDir.path("stderr")) ?? [], as: UTF8.self)
    }

    // MARK: Locating the binaries

    /// The `segget` binary under test: `$SEGGET_BIN`, else the one built beside this test bundle, else
    /// `.build/debug/segget` under the current directory.
    static func seggetPath() throws -> String { try binaryPath(env: "SEGGET_BIN", name: "segget") }

    /// The `segget-testserver` binary: `$SEGGET_TESTSERVER_BIN`, else beside this test bundle, else
    /// `.build/debug/segget-testserver`.
    static func testServerPath() throws -> String {
        try binaryPath(env: "SEGGET_TESTSERVER_BIN", name: "segget-testserver")
    }

    private static func binaryPath(env: String, name: String) throws -> String {
        var candidates: [String] = []
        if let v = getenv(env), v.pointee != 0 { candidates.append(String(cString: v)) }
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
        if let found = candidates.first(where: { access($0, X_OK) == 0 }) { return found }
        throw TestSupportError("cannot find the \(name) binary (tried \(candidates.joined(separator: ", "))); build it or set \(env)")
    }
}

/// Runs the `segget` binary under test with `args` to completion and returns how it ended.
/// Fails the call (throws) only when the binary cannot be found or started.
func runSegget(args: [String], timeout: Double = 120) throws -> (exitCode: Int32, stdout: String, stderr: String) {
    let p = try SpawnedProcess(executable: try SpawnedProcess.seggetPath(), arguments: args)
    let o = p.wait(timeout: timeout)
    if o.timedOut {
        throw TestSupportError("segget \(args.joined(separator: " ")) did not finish within \(timeout) s; stderr: \(o.stderr)")
    }
    return (o.exitCode, o.stdout, o.stderr)
}

/// Seconds on the monotonic clock.
func nowSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

/// Polls `condition` every 5 ms until it holds or `timeout` seconds pass; returns whether it held.
@discardableResult
func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = nowSeconds() + timeout
    while !condition() {
        if nowSeconds() > deadline { return false }
        usleep(5_000)
    }
    return true
}

/// `runSegget` on a thread of its own (see `blocking`), for async tests.
func runSeggetAsync(args: [String], timeout: Double = 120) async throws -> (exitCode: Int32, stdout: String, stderr: String) {
    let r = try await blocking { () -> SeggetRun in
        let (code, out, err) = try runSegget(args: args, timeout: timeout)
        return SeggetRun(exitCode: code, stdout: out, stderr: err)
    }
    return (r.exitCode, r.stdout, r.stderr)
}

private struct SeggetRun: Sendable {
    var exitCode: Int32
    var stdout: String
    var stderr: String
}

/// How a child process ended, and what it printed.
public struct ChildProcessResult: Sendable, Equatable {
    /// The exit status; nil when a signal ended it (or it was stopped for taking too long).
    public var exitStatus: Int32?
    /// The signal that ended it, if one did.
    public var signal: Int32?
    /// Its standard output and error, each cut at the run's output limit.
    public var standardOutput: [UInt8] = []
    public var standardError: [UInt8] = []
    /// It was still running at the time limit and was killed (with its process group).
    public var timedOut = false
    /// It was killed because the caller cancelled it.
    public var cancelled = false
}

/// Runs shell commands (a `--refresh-command`): `/bin/sh -c COMMAND`, blocking the calling thread.
public enum ChildProcess {
    private static let start = ContinuousClock.now

    private static func now() -> Double {
        (ContinuousClock.now - start).inSeconds
    }

    /// Runs `command` through `/bin/sh -c` with this process's environment plus `environment`
    /// (whose names win), standard input from `/dev/null`, and waits until it has ended and closed
    /// its output, at most `timeout` seconds: then its whole process group is killed (`SIGKILL`).
    /// Keeps at most `outputLimit` bytes of each output stream (the rest is read and dropped).
    /// `cancelled` is asked every 0.1 s: true kills the process group as the timeout does.
    public static func runShell(
        _ command: String, environment: [String: String] = [:], timeout: Double, outputLimit: Int = 64 << 10,
        cancelled: () -> Bool = { false }
    ) throws(Errno) -> ChildProcessResult {
        let (outRead, outWrite) = try system_pipe().get()
        let errPipe: (Int32, Int32)
        do {
            errPipe = try system_pipe().get()
        } catch {
            _ = system_close(outRead)
            _ = system_close(outWrite)
            throw error
        }
        let (errRead, errWrite) = errPipe
        let names = Set(environment.keys)
        let inherited = system_environment().filter { entry in
            !names.contains(String(entry.prefix { $0 != "=" }))
        }
        let spawned = system_spawn_shell(
            command, environment: inherited + environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" },
            stdoutFD: outWrite, stderrFD: errWrite)
        // The child has its own copies of the write ends; ours must go, or end of file never comes.
        _ = system_close(outWrite)
        _ = system_close(errWrite)
        let pid: Int32
        switch spawned {
        case .success(let p): pid = p
        case .failure(let e):
            _ = system_close(outRead)
            _ = system_close(errRead)
            throw e
        }
        var result = ChildProcessResult()
        var open = [outRead, errRead]
        let deadline = now() + timeout
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !open.isEmpty {
            let left = deadline - now()
            if left <= 0 || cancelled() {
                result.timedOut = left <= 0
                result.cancelled = left > 0
                system_kill_group(pid)
                break
            }
            guard case .success(let ready) = system_poll_readable(open, milliseconds: Int32(min(left, 0.1) * 1000) + 1)
            else { continue }
            var still: [Int32] = []
            for (fd, isReady) in zip(open, ready) {
                guard isReady else {
                    still.append(fd)
                    continue
                }
                let n = chunk.withUnsafeMutableBytes { system_read(fd, $0.baseAddress, $0.count) }
                if n <= 0 {
                    _ = system_close(fd)
                    continue
                }
                still.append(fd)
                if fd == outRead {
                    result.standardOutput += chunk[0..<min(n, max(0, outputLimit - result.standardOutput.count))]
                } else {
                    result.standardError += chunk[0..<min(n, max(0, outputLimit - result.standardError.count))]
                }
            }
            open = still
        }
        for fd in open { _ = system_close(fd) }
        if case .success(let ended) = system_wait_child(pid) {
            result.exitStatus = result.timedOut || result.cancelled ? nil : ended.status
            result.signal = ended.signal
        }
        return result
    }
}

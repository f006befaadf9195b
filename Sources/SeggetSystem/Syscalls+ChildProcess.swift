// The system calls for child processes (a `--refresh-command`), beside Syscalls.swift's.

import Glibc

// MARK: Child processes (a `--refresh-command`)

/// A pipe whose both ends close on `exec` (`FD_CLOEXEC`): (read end, write end).
internal func system_pipe() -> Result<(Int32, Int32), Errno> {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { return .failure(.current) }
    _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
    _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
    return .success((fds[0], fds[1]))
}

/// Which of `fds` can be read (or reached end of file, or failed) within `milliseconds` (`poll`).
internal func system_poll_readable(_ fds: [Int32], milliseconds: Int32) -> Result<[Bool], Errno> {
    var set = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    return valueOrErrno { poll(&set, nfds_t(set.count), milliseconds) }.map { _ in set.map { $0.revents != 0 } }
}

/// Starts `/bin/sh -c command` in a process group of its own, with `environment` ("NAME=value"),
/// standard input from `/dev/null`, and standard output and error on `stdoutFD` and `stderrFD`.
internal func system_spawn_shell(
    _ command: String, environment: [String], stdoutFD: Int32, stderrFD: Int32
) -> Result<Int32, Errno> {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, stdoutFD, 1)
    posix_spawn_file_actions_adddup2(&actions, stderrFD, 2)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    // segget ignores SIGPIPE and SIGXFSZ (main.swift), and an ignored signal stays ignored across
    // exec: the command gets their defaults back, as from a shell.
    var defaults = sigset_t()
    sigemptyset(&defaults)
    sigaddset(&defaults, SIGPIPE)
    sigaddset(&defaults, SIGXFSZ)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF))
    posix_spawnattr_setpgroup(&attributes, 0)
    let arguments: [String] = ["sh", "-c", command]
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
    defer {
        for p in argv { free(p) }
        for p in envp { free(p) }
    }
    var pid: pid_t = 0
    let code = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, envp)
    return code == 0 ? .success(pid) : .failure(Errno(rawValue: code))
}

/// `SIGKILL` to the process group `pid` leads (the shell of a `--refresh-command` and its children).
internal func system_kill_group(_ pid: Int32) {
    _ = kill(-pid, SIGKILL)
}

/// Waits for child `pid` to end: its exit status, or nil with the signal that ended it.
internal func system_wait_child(_ pid: Int32) -> Result<(status: Int32?, signal: Int32?), Errno> {
    var status: Int32 = 0
    switch valueOrErrno({ waitpid(pid, &status, 0) }) {
    case .failure(let e): return .failure(e)
    case .success:
        let signal = status & 0x7f
        if signal == 0 { return .success((status: (status >> 8) & 0xff, signal: nil)) }
        return .success((status: nil, signal: signal))
    }
}

/// The environment of this process, as "NAME=value" strings.
internal func system_environment() -> [String] {
    var out: [String] = []
    var p: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ
    while let entry = p?.pointee {
        out.append(String(cString: entry))
        p = p?.advanced(by: 1)
    }
    return out
}

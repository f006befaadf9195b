// With Syscalls+ChildProcess.swift, the only file of the project that names libc I/O calls. Everything else calls the typed wrappers of
// this module, so the set of system calls segget can make is visible in one place. The retry helpers
// (`valueOrErrno`, `retryingWrites`, `retryingReads`) are the only loops over EINTR and short counts.

import CXattr
import Glibc
import Synchronization

// MARK: - Retry helpers

/// Runs `body` until it stops failing with `EINTR`; turns `-1` + `errno` into `.failure`.
///
/// The one place where interrupted system calls are retried.
@inline(__always)
internal func valueOrErrno<I: FixedWidthInteger>(
    retryOnInterrupt: Bool = true,
    _ body: () -> I
) -> Result<I, Errno> {
    while true {
        let result = body()
        if result != -1 { return .success(result) }
        let error = Errno.current
        if retryOnInterrupt && error == .interrupted { continue }
        return .failure(error)
    }
}

/// Like `valueOrErrno`, for calls that return the error number instead of setting `errno`
/// (`posix_fallocate`, `posix_fadvise`, `pthread_create`): zero is success.
@inline(__always)
internal func returnedErrno(retryOnInterrupt: Bool = true, _ body: () -> Int32) -> Result<Void, Errno> {
    while true {
        let code = body()
        if code == 0 { return .success(()) }
        let error = Errno(rawValue: code)
        if retryOnInterrupt && error == .interrupted { continue }
        return .failure(error)
    }
}

/// How far a write loop got, and what stopped it before the end.
public struct WriteProgress: Equatable, Sendable {
    /// Bytes written.
    public var written: Int
    /// The error that stopped the loop, nil when it wrote everything or `continueAfterShortWrite` said stop.
    public var error: Errno?
}

/// Writes `count` bytes by calling `body(done)` (which writes the rest, starting `done` bytes in, and
/// returns what a `write`-like call returns), retrying `EINTR` and short writes.
///
/// The one place where short writes are retried. A call that writes nothing for a non-empty rest would
/// loop forever and is reported as `EIO`. After a short write, `continueAfterShortWrite(done)` may stop
/// the loop without an error (an `O_DIRECT` write that ended off a block boundary cannot continue).
@inline(__always)
internal func retryingWrites(
    count: Int, continueAfterShortWrite: (Int) -> Bool = { _ in true }, _ body: (_ done: Int) -> Int
) -> WriteProgress {
    var done = 0
    while done < count {
        switch valueOrErrno({ body(done) }) {
        case .success(0):
            return WriteProgress(written: done, error: .ioError)
        case .success(let n):
            done += n
            if done < count && !continueAfterShortWrite(done) { return WriteProgress(written: done, error: nil) }
        case .failure(let error):
            return WriteProgress(written: done, error: error)
        }
    }
    return WriteProgress(written: done, error: nil)
}

/// Reads until `count` bytes are in or end of file by calling `body(done)`, retrying `EINTR` and short
/// reads; returns the number of bytes read.
@inline(__always)
internal func retryingReads(count: Int, _ body: (_ done: Int) -> Int) -> Result<Int, Errno> {
    var done = 0
    while done < count {
        switch valueOrErrno({ body(done) }) {
        case .success(0): return .success(done)  // end of file
        case .success(let n): done += n
        case .failure(let error): return .failure(error)
        }
    }
    return .success(done)
}

// MARK: - Raw calls

internal func system_open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    open(path, flags, mode)
}

internal func system_close(_ fd: Int32) -> Int32 {
    close(fd)
}

/// Opens `/dev/null` on each of descriptors 0, 1 and 2 that is not open (0 for reading, the others
/// for writing), in that order; returns those that were not.
internal func system_occupyClosedStandardDescriptors() -> [Int32] {
    var closed: [Int32] = []
    for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
        closed.append(fd)
        // The lowest free descriptor: `fd` itself, those below it being open by now.
        let opened = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY)
        if opened >= 0 && opened != fd {
            _ = dup2(opened, fd)
            _ = close(opened)
        }
    }
    return closed
}

internal func system_read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}

internal func system_write(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(fd, buffer, count)
}

internal func system_pread(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int, _ offset: Int64) -> Int {
    pread(fd, buffer, count, off_t(offset))
}

internal func system_pwrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int, _ offset: Int64) -> Int {
    pwrite(fd, buffer, count, off_t(offset))
}

internal func system_fdatasync(_ fd: Int32) -> Int32 {
    fdatasync(fd)
}

// glibc declares sync_file_range only under _GNU_SOURCE, which the Glibc module does not set, so
// bind the symbol directly (int sync_file_range(int, off64_t, off64_t, unsigned int)).
@_silgen_name("sync_file_range")
private func c_sync_file_range(_ fd: Int32, _ offset: Int64, _ count: Int64, _ flags: UInt32) -> Int32

/// SYNC_FILE_RANGE_WRITE from <fcntl.h>: start writeback of dirty pages, do not wait.
private let syncFileRangeWrite: UInt32 = 2

internal func system_sync_file_range_write(_ fd: Int32, _ offset: Int64, _ count: Int64) -> Int32 {
    c_sync_file_range(fd, offset, count, syncFileRangeWrite)
}

internal func system_fsync(_ fd: Int32) -> Int32 {
    fsync(fd)
}

internal func system_ftruncate(_ fd: Int32, _ length: Int64) -> Int32 {
    ftruncate(fd, off_t(length))
}

/// Returns the error number (it does not set `errno`).
internal func system_posix_fallocate(_ fd: Int32, _ offset: Int64, _ length: Int64) -> Int32 {
    posix_fallocate(fd, off_t(offset), off_t(length))
}

/// Returns the error number (it does not set `errno`).
internal func system_posix_fadvise(_ fd: Int32, _ offset: Int64, _ length: Int64, _ advice: Int32) -> Int32 {
    posix_fadvise(fd, off_t(offset), off_t(length), advice)
}

/// Returns nil (and sets `errno`) on failure.
internal func system_mapAnonymous(_ length: Int) -> UnsafeMutableRawPointer? {
    let p = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    return p == MAP_FAILED ? nil : p
}

internal func system_munmap(_ start: UnsafeMutableRawPointer, _ length: Int) {
    _ = munmap(start, length)
}

/// Returns -1 and sets `errno` on failure.
internal func system_madvise(_ start: UnsafeMutableRawPointer, _ length: Int, _ advice: Int32) -> Int32 {
    madvise(start, length, advice)
}

/// glibc's `mallopt(int, int)`: <malloc.h> is not part of the Glibc module. Two `Int32`s in and
/// one out are passed the same way by Swift's calling convention and C's.
@_silgen_name("mallopt")
private func c_mallopt(_ parameter: Int32, _ value: Int32) -> Int32

/// `M_TRIM_THRESHOLD` and `M_MMAP_THRESHOLD` of <malloc.h>.
internal let system_M_TRIM_THRESHOLD: Int32 = -1
internal let system_M_MMAP_THRESHOLD: Int32 = -3

internal func system_mallopt(_ parameter: Int32, _ value: Int32) {
    _ = c_mallopt(parameter, value)
}

internal func system_flock(_ fd: Int32, _ operation: Int32) -> Int32 {
    flock(fd, operation)
}

internal func system_fstat(_ fd: Int32) -> Result<FileStatus, Errno> {
    var info = stat()
    return valueOrErrno { fstat(fd, &info) }.map { _ in FileStatus(info) }
}

internal func system_stat(_ path: String, followingLinks: Bool) -> Result<FileStatus, Errno> {
    var info = stat()
    return valueOrErrno { followingLinks ? stat(path, &info) : lstat(path, &info) }.map { _ in FileStatus(info) }
}

/// Sets extended attribute `name` of the file open as `fd` to `value` (creating or replacing it).
internal func system_fsetxattr(_ fd: Int32, _ name: String, _ value: UnsafeRawBufferPointer) -> Int32 {
    fsetxattr(fd, name, value.baseAddress, value.count, 0)
}

/// Reads extended attribute `name` of the file at `path`, not following a symbolic link: its length,
/// or -1 (`ENODATA` when it is not set, `ERANGE` when `buffer` is too small, `ENOTSUP` where the file
/// system has none).
internal func system_lgetxattr(_ path: String, _ name: String, _ buffer: UnsafeMutableRawBufferPointer) -> Int {
    lgetxattr(path, name, buffer.baseAddress, buffer.count)
}

internal func system_rename(_ from: String, _ to: String) -> Int32 {
    rename(from, to)
}

internal func system_rename_noreplace(_ from: String, _ to: String) -> Int32 {
    segget_rename_noreplace(from, to)
}

/// Whether `linkat(AT_EMPTY_PATH)` has been refused in this process, which then names files
/// through `/proc/self/fd` only.
private let emptyPathLinkRefused = Atomic<Bool>(false)
/// `AT_EMPTY_PATH` (linux/fcntl.h), which Glibc's module leaves out without `_GNU_SOURCE`.
private let atEmptyPath: Int32 = 0x1000

/// Gives the file open as `fd` the name `path`; fails with `EEXIST` if anything is there.
///
/// First by the descriptor itself (`linkat(AT_EMPTY_PATH)`: Linux 6.10 and later allow it for a
/// file the caller opened, earlier ones only with `CAP_DAC_READ_SEARCH`), else through
/// `/proc/self/fd`, whose path walk is part of the two thirds of linkat's time outside ext4_link in a
/// 500-file batch (perf). A refusal (`ENOENT` or `EPERM`) is remembered; the descriptor's path is
/// then the only way tried.
internal func system_link_descriptor(_ fd: Int32, _ path: String) -> Int32 {
    let tryEmptyPath = !emptyPathLinkRefused.load(ordering: .relaxed)
    if tryEmptyPath {
        if linkat(fd, "", AT_FDCWD, path, atEmptyPath) == 0 { return 0 }
        guard errno == ENOENT || errno == EPERM else { return -1 }
    }
    let result = linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, path, AT_SYMLINK_FOLLOW)
    // ENOENT is also a missing directory, which the descriptor's path reports the same way; only a
    // link that works this way shows that the first way was refused.
    if tryEmptyPath && result == 0 { emptyPathLinkRefused.store(true, ordering: .relaxed) }
    return result
}

/// The names in directory `path` for which `keep` is true (never "." or ".."): nil where it holds
/// more than `limit` entries, a failure where it cannot be opened. `keep` sees each name and its
/// length in bytes (`strnlen`, at most the 256 bytes of `d_name`).
internal func system_directory_names(
    _ path: String, limit: Int, keep: (UnsafePointer<CChar>, Int) -> Bool
) -> Result<[String]?, Errno> {
    guard let directory = opendir(path) else { return .failure(.current) }
    defer { closedir(directory) }
    var names: [String] = []
    var seen = 0
    while let entry = readdir(directory) {
        seen += 1
        if seen > limit + 2 { return .success(nil) }
        let kept: String? = withUnsafePointer(to: &entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { name in keep(name, strnlen(name, 256)) ? String(cString: name) : nil }
        }
        if let kept { names.append(kept) }
    }
    return .success(names)
}

internal func system_unlink(_ path: String) -> Int32 {
    unlink(path)
}

internal func system_mkdir(_ path: String, _ mode: UInt32) -> Int32 {
    mkdir(path, mode_t(mode))
}

/// Bytes available to an unprivileged user on the file system holding `path`. A file system that
/// reports no blocks at all (some FUSE ones) says nothing of its space: `EOPNOTSUPP`, not 0 free.
internal func system_statvfs_available(_ path: String) -> Result<Int64, Errno> {
    var info = statvfs()
    return valueOrErrno { statvfs(path, &info) }.flatMap { _ in
        guard info.f_blocks > 0 else { return .failure(.notSupported) }
        return .success(Int64(clamping: UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize)).partialValue))
    }
}

/// RLIMIT_FSIZE's soft limit in bytes, or nil where there is none.
internal func system_file_size_limit() -> Int64? {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
    return Int64(clamping: limit.rlim_cur)
}

/// Files (inodes) an unprivileged user may still create on the file system holding `path`; nil
/// where it does not count them (0 files in all: btrfs, many FUSE ones) or cannot be asked.
internal func system_statvfs_freeFiles(_ path: String) -> UInt64? {
    var info = statvfs()
    guard statvfs(path, &info) == 0, info.f_files > 0 else { return nil }
    return UInt64(info.f_favail)
}

internal func system_realpath(_ path: String) -> Result<String, Errno> {
    guard let resolved = realpath(path, nil) else { return .failure(.current) }
    defer { free(resolved) }
    return .success(String(cString: resolved))
}

// MARK: Sockets (the daemon's command-line client) and the terminal

internal func system_socket(_ family: Int32, _ type: Int32, _ proto: Int32) -> Int32 {
    socket(family, type, proto)
}

internal func system_connect(_ fd: Int32, _ address: UnsafePointer<sockaddr>?, _ length: socklen_t) -> Int32 {
    connect(fd, address, length)
}

/// Sets `SO_RCVTIMEO` and `SO_SNDTIMEO`: a blocking send or receive fails with `EAGAIN` after `seconds`.
internal func system_set_socket_timeouts(_ fd: Int32, seconds: Int) -> Int32 {
    var tv = timeval(tv_sec: seconds, tv_usec: 0)
    let size = socklen_t(MemoryLayout<timeval>.size)
    guard setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, size) == 0 else { return -1 }
    return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, size)
}

/// `send` without `SIGPIPE` (`MSG_NOSIGNAL`): a peer gone shows as `EPIPE`.
internal func system_send(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    send(fd, buffer, count, Int32(MSG_NOSIGNAL))
}

internal func system_recv(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    recv(fd, buffer, count, 0)
}

/// The stream addresses of `host:port` (`getaddrinfo`), each as `(family, type, protocol, address)`;
/// nil when the name does not resolve.
internal func system_stream_addresses(_ host: String, _ port: Int) -> [(Int32, Int32, Int32, [UInt8])]? {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var list: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return nil }
    defer { freeaddrinfo(list) }
    var found: [(Int32, Int32, Int32, [UInt8])] = []
    var entry: UnsafeMutablePointer<addrinfo>? = first
    while let ai = entry {
        entry = ai.pointee.ai_next
        guard let address = ai.pointee.ai_addr else { continue }
        let bytes = Array(UnsafeRawBufferPointer(start: address, count: Int(ai.pointee.ai_addrlen)))
        found.append((ai.pointee.ai_family, ai.pointee.ai_socktype, ai.pointee.ai_protocol, bytes))
    }
    return found
}

/// The width of the terminal on `fd` (`ioctl(TIOCGWINSZ)`), nil when it is not a terminal.
internal func system_terminal_columns(_ fd: Int32) -> Int? {
    guard isatty(fd) == 1 else { return nil }
    var ws = winsize()
    guard ioctl(fd, UInt(TIOCGWINSZ), &ws) == 0 else { return nil }
    return Int(ws.ws_col)
}

internal func system_strerror(_ code: Int32) -> String {
    guard let message = strerror(code) else { return "error \(code)" }
    return String(cString: message)
}

// Flag values, re-exported so that other files need not import Glibc.
internal let system_O_RDONLY = O_RDONLY
internal let system_O_WRONLY = O_WRONLY
internal let system_O_RDWR = O_RDWR
internal let system_O_CREAT = O_CREAT
internal let system_O_EXCL = O_EXCL
internal let system_O_NOFOLLOW = O_NOFOLLOW
internal let system_O_CLOEXEC = O_CLOEXEC
internal let system_O_DIRECTORY = O_DIRECTORY

/// `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`): a new file with no name in the directory opened.
internal let system_O_TMPFILE: Int32? = {
    #if os(Linux) && (arch(x86_64) || arch(i386) || arch(arm64))
        return 0o20000000 | O_DIRECTORY
    #else
        return nil
    #endif
}()

/// `O_DIRECT`, which Glibc's Swift overlay does not export; nil where its value is unknown.
internal let system_O_DIRECT: Int32? = {
    #if os(Linux) && (arch(x86_64) || arch(i386))
        return 0o40000
    #elseif os(Linux) && arch(arm64)
        return 0o200000
    #else
        return nil
    #endif
}()

// MARK: - Output that never blocks in the kernel (see PatientOutput)

/// Whether `fd` is a pipe or FIFO (`pipe`), a socket (`socket`), or anything else.
internal func system_stream_kind(_ fd: Int32) -> PatientOutput.Kind {
    var info = stat()
    guard fstat(fd, &info) == 0 else { return .other }
    switch info.st_mode & S_IFMT {
    case S_IFIFO: return .pipe
    case S_IFSOCK: return .socket
    default: return .other
    }
}

/// A second open file description of the pipe `fd` with `O_NONBLOCK` set on it alone (opening
/// `/proc/self/fd/N` of a pipe opens the pipe anew; `fcntl` on `fd` would change the flags of every
/// process that shares it). -1 when that fails.
internal func system_reopen_pipe_nonblocking(_ fd: Int32) -> Int32 {
    open("/proc/self/fd/\(fd)", O_WRONLY | O_NONBLOCK | O_CLOEXEC)
}

/// `send` with `MSG_DONTWAIT | MSG_NOSIGNAL`: a socket's write that never blocks and never raises SIGPIPE.
internal func system_send_dontwait(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    send(fd, buffer, count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
}

/// Waits up to `milliseconds` for `fd` to take a write; true when it will (or has failed: the write
/// then says how).
internal func system_poll_writable(_ fd: Int32, milliseconds: Int32) -> Bool {
    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    // EINTR counts as "not yet": the caller asks again after checking why it should stop.
    return poll(&p, 1, milliseconds) > 0
}

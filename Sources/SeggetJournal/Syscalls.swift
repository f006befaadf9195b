// The only file in SeggetJournal that names libc calls. Everything else calls these
// typed wrappers, so the set of system calls the journal can make is visible in one place.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
        let error = Errno(rawValue: errno)
        if retryOnInterrupt && error == .interrupted { continue }
        return .failure(error)
    }
}

/// Like `valueOrErrno`, for calls that return the error number instead of setting `errno`
/// (`posix_fallocate`): zero is success.
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

/// Writes every byte of `bytes` at `offset`, retrying short writes and `EINTR`.
///
/// The one place where short writes are retried. The corresponding C function is `pwrite`.
internal func writeAll(fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Result<Void, Errno> {
    var done = 0
    while done < bytes.count {
        let rest = UnsafeRawBufferPointer(rebasing: bytes[done...])
        switch valueOrErrno({ system_pwrite(fd, rest.baseAddress, rest.count, offset + Int64(done)) }) {
        case .success(let n):
            // pwrite returning 0 for a non-empty buffer would loop forever; report it as EIO.
            if n == 0 { return .failure(.ioError) }
            done += n
        case .failure(let error):
            return .failure(error)
        }
    }
    return .success(())
}

/// Reads until `buffer` is full or end of file; returns the number of bytes read.
///
/// The corresponding C function is `pread`.
internal func readAll(fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Result<Int, Errno> {
    var done = 0
    while done < buffer.count {
        let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[done...])
        switch valueOrErrno({ system_pread(fd, rest.baseAddress, rest.count, offset + Int64(done)) }) {
        case .success(let n):
            if n == 0 { return .success(done) }  // end of file
            done += n
        case .failure(let error):
            return .failure(error)
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

internal func system_fstat_size(_ fd: Int32) -> Result<Int64, Errno> {
    var info = stat()
    return valueOrErrno { fstat(fd, &info) }.map { _ in Int64(info.st_size) }
}

internal func system_lstat_size(_ path: String) -> Result<Int64, Errno> {
    var info = stat()
    return valueOrErrno { lstat(path, &info) }.map { _ in Int64(info.st_size) }
}

internal func system_lstat_mode(_ path: String) -> Result<UInt32, Errno> {
    var info = stat()
    return valueOrErrno { lstat(path, &info) }.map { _ in UInt32(info.st_mode) }
}

internal func system_rename(_ from: String, _ to: String) -> Int32 {
    rename(from, to)
}

internal func system_unlink(_ path: String) -> Int32 {
    unlink(path)
}

/// Bytes available to an unprivileged user on the file system holding `path`.
internal func system_statvfs_available(_ path: String) -> Result<Int64, Errno> {
    var info = statvfs()
    return valueOrErrno { statvfs(path, &info) }.map { _ in
        Int64(clamping: UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize)).partialValue)
    }
}

internal func system_strerror(_ code: Int32) -> String {
    guard let message = strerror(code) else { return "error \(code)" }
    return String(cString: message)
}

// Flag values, re-exported so that other files need not import Glibc.
internal let system_O_RDONLY = O_RDONLY
internal let system_O_RDWR = O_RDWR
internal let system_O_CREAT = O_CREAT
internal let system_O_EXCL = O_EXCL
internal let system_O_NOFOLLOW = O_NOFOLLOW
internal let system_O_CLOEXEC = O_CLOEXEC
internal let system_O_DIRECTORY = O_DIRECTORY

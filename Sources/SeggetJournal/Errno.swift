#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An error number reported by the operating system.
///
/// `description` is the C library's message for the number (`strerror`), e.g.
/// "No space left on device".
public struct Errno: Error, Equatable, Hashable, Sendable, CustomStringConvertible, RawRepresentable {
    /// The C `errno` value.
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public var description: String { system_strerror(rawValue) }

    /// `EINTR`: a signal interrupted the call; retried by the wrappers, never thrown by them.
    public static let interrupted = Errno(rawValue: EINTR)
    /// `ENOENT`: no such file or directory.
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    /// `EEXIST`: the file exists (exclusive create).
    public static let fileExists = Errno(rawValue: EEXIST)
    /// `ELOOP`: the path names a symbolic link and `O_NOFOLLOW` was given.
    public static let tooManySymbolicLinkLevels = Errno(rawValue: ELOOP)
    /// `EIO`: an input/output error.
    public static let ioError = Errno(rawValue: EIO)
    /// `ENOSPC`: no space left on device.
    public static let noSpace = Errno(rawValue: ENOSPC)
    /// `EBADF`: the descriptor is not open (for example, used after `close()`).
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    /// `EINVAL`: an invalid argument.
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// `EOPNOTSUPP`: the operation is not supported (for example, `fallocate` on some file systems).
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    /// `EACCES`: permission denied.
    public static let permissionDenied = Errno(rawValue: EACCES)
}

/// Standard output (or any descriptor) written so that a reader who stops reading can never hold the
/// writer in the kernel: a pipe is written through a non-blocking twin of its own, a socket with
/// `MSG_DONTWAIT`, and while neither takes bytes the writer waits in `poll` in short steps, asking
/// `giveUp` between them. A Ctrl-C can then end a program whose reader stalled (a blocked `write`
/// restarts after the signal handler and waits on).
///
/// Regular files and terminals are written as before: a file does not stall, and a terminal stalls only
/// when its user asks (Ctrl-S).
public final class PatientOutput: Sendable {
    public enum Kind: Sendable { case pipe, socket, other }

    public let kind: Kind
    private let target: FileDescriptor
    /// The non-blocking twin of a pipe, closed in `deinit`; nil when `target` is written directly.
    private let twin: FileDescriptor?

    /// The wait between two looks at `giveUp` while the reader takes nothing.
    public static let step: Int32 = 100

    public init(_ fd: FileDescriptor) {
        target = fd
        var kind = system_stream_kind(fd.rawValue)
        var twin: FileDescriptor?
        if kind == .pipe {
            let t = system_reopen_pipe_nonblocking(fd.rawValue)
            if t >= 0 { twin = FileDescriptor(rawValue: t) } else { kind = .other }
        }
        self.kind = kind
        self.twin = twin
    }

    deinit { twin?.close() }

    /// True when a write would take bytes now (always, for files and terminals).
    public var isWritableNow: Bool {
        kind == .other || system_poll_writable((twin ?? target).rawValue, milliseconds: 0)
    }

    /// Writes all of `bytes`, waiting for a slow reader as long as it takes unless `giveUp()` (asked
    /// every `step` ms while nothing goes out) says to stop: then `error` is `Errno.interrupted` and
    /// `written` says how far it got. `EPIPE` and other errors end it as they come.
    public func write(_ bytes: UnsafeRawBufferPointer, giveUp: () -> Bool) -> WriteProgress {
        if kind == .other { return target.writeAllReporting(bytes) }
        let fd = (twin ?? target).rawValue
        let socket = kind == .socket
        var done = 0
        while done < bytes.count {
            let n = valueOrErrno {
                let rest = bytes.baseAddress.map { $0 + done }
                return socket ? system_send_dontwait(fd, rest, bytes.count - done) : system_write(fd, rest, bytes.count - done)
            }
            switch n {
            case .success(let n) where n > 0:
                done += n
            case .success:
                return WriteProgress(written: done, error: .ioError)
            case .failure(let e) where e == .wouldBlock:
                while !system_poll_writable(fd, milliseconds: Self.step) {
                    if giveUp() { return WriteProgress(written: done, error: .interrupted) }
                }
            case .failure(let e):
                return WriteProgress(written: done, error: e)
            }
        }
        return WriteProgress(written: done, error: nil)
    }

    /// `write(_:giveUp:)` of `text` as UTF-8.
    public func write(_ text: String, giveUp: () -> Bool) -> WriteProgress {
        var text = text
        return text.withUTF8 { write(UnsafeRawBufferPointer($0), giveUp: giveUp) }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An `errno` value with a readable description, thrown by the socket wrappers.
public struct SocketError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let code: Int32

    init(_ operation: String, code: Int32 = errno) {
        self.operation = operation
        self.code = code
    }

    public var description: String {
        "\(operation) failed: \(String(cString: strerror(code))) (errno \(code))"
    }
}

/// A listening TCP socket on 127.0.0.1 at a port the kernel picks, for a test that answers (or
/// never answers) its connections itself: the descriptor, which the caller closes, and the port.
public func loopbackListener(backlog: Int32 = 128) throws -> (fd: Int32, port: Int) {
    try Sock.listen(host: "127.0.0.1", port: 0, backlog: backlog)
}

/// The only place that names the socket calls; everything else goes through these helpers.
enum Sock {
    /// Creates a listening TCP socket bound to `host` (an IPv4 or IPv6 literal) and `port` (0 picks one).
    /// Returns the descriptor and the port actually bound.
    /// `backlog`: the accept queue's length (`listen(2)`).
    static func listen(host: String, port: Int, backlog: Int32 = 128) throws -> (fd: Int32, port: Int) {
        let host = host == "localhost" ? "127.0.0.1" : host
        var v4 = sockaddr_in()
        var v6 = sockaddr_in6()
        let family: Int32
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            family = AF_INET
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(port).bigEndian)
        } else if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            family = AF_INET6
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(port).bigEndian)
        } else {
            throw SocketError("parsing host address \(host)", code: EINVAL)
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketError("socket") }
        var one: Int32 = 1
        // A restarted test server must be able to take a port still in TIME_WAIT.
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound: Int32
        if family == AF_INET {
            bound = withUnsafePointer(to: &v4) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        } else {
            bound = withUnsafePointer(to: &v6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        guard bound == 0 else {
            let err = SocketError("bind \(host):\(port)")
            close(fd)
            throw err
        }
        guard Glibc.listen(fd, backlog) == 0 else {
            let err = SocketError("listen")
            close(fd)
            throw err
        }
        let actual = localPort(fd)
        return (fd, actual)
    }

    static func localPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return port(of: storage)
    }

    static func port(of storage: sockaddr_storage) -> Int {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
        default:
            return 0
        }
    }

    /// Accepts one connection; returns the descriptor and the client's address and port, or nil on a
    /// transient error.
    static func accept(_ listener: Int32) -> (fd: Int32, remoteAddress: String, remotePort: Int)? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let fd = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.accept(listener, $0, &len)
            }
        }
        guard fd >= 0 else { return nil }
        setCloseOnExec(fd)
        var one: Int32 = 1
        // Headers and bodies go out in separate sends; Nagle would delay small responses by 40 ms.
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return (fd, address(of: storage), port(of: storage))
    }

    /// The numeric address of `storage` (`127.0.0.1`, `::1`), empty for other families.
    static func address(of storage: sockaddr_storage) -> String {
        var storage = storage
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = Int32(storage.ss_family)
        let ok: Bool = withUnsafePointer(to: &storage) { raw in
            switch family {
            case AF_INET:
                return raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    withUnsafePointer(to: sin.pointee.sin_addr) { inet_ntop(AF_INET, $0, &text, socklen_t(text.count)) != nil }
                }
            case AF_INET6:
                return raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    withUnsafePointer(to: sin6.pointee.sin6_addr) { inet_ntop(AF_INET6, $0, &text, socklen_t(text.count)) != nil }
                }
            default:
                return false
            }
        }
        return ok ? String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    }

    /// True when the peer has closed its side (or the connection failed): a peek reads end of stream
    /// or an error. Pending request bytes (a pipelined request) do not count as a hang-up.
    static func peerHasHungUp(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return errno != EAGAIN && errno != EWOULDBLOCK }
            return n == 0
        }
    }

    /// Holds partial segments back until `set(cork: false)` (`TCP_CORK`), as nginx's `tcp_nopush` does.
    static func set(cork: Bool, _ fd: Int32) {
        var value: Int32 = cork ? 1 : 0
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_CORK, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Bytes written to `fd` that the peer has not acknowledged yet (`SIOCOUTQ`); 0 when unknown.
    static func unacknowledgedBytes(_ fd: Int32) -> Int {
        var value: Int32 = 0
        // SIOCOUTQ is TIOCOUTQ, which Glibc's module does not export by that name.
        guard ioctl(fd, UInt(0x5411), &value) == 0 else { return 0 }
        return Int(value)
    }

    /// Writes all of `buffer`; retries EINTR and short writes. Returns the bytes written before an error.
    /// MSG_NOSIGNAL: a client that hangs up must not kill the test process with SIGPIPE.
    static func sendAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> (written: Int, ok: Bool) {
        guard let base = buffer.baseAddress else { return (0, true) }
        var done = 0
        while done < buffer.count {
            let n = send(fd, base + done, buffer.count - done, Int32(MSG_NOSIGNAL))
            if n > 0 {
                done += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return (done, false)
            }
        }
        return (done, true)
    }

    /// sendfile(2) until `count` bytes are out; the page cache goes to the socket with no user copy.
    static func sendFile(_ fd: Int32, from file: Int32, at offset: Int64, count: Int) -> (written: Int, ok: Bool) {
        var position = off_t(offset)
        var done = 0
        while done < count {
            let n = sendfile(fd, file, &position, count - done)
            if n > 0 {
                done += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                // 0 means the file shrank under us; negative is a socket error.
                return (done, false)
            }
        }
        return (done, true)
    }

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { sendAll(fd, $0).ok }
    }

    /// Reads what is available (blocking); returns 0 on end of stream, -1 on error.
    static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = buffer.baseAddress else { return -1 }
        while true {
            let n = recv(fd, base, buffer.count, 0)
            if n < 0 && errno == EINTR { continue }
            return n
        }
    }

    /// Waits until `fd` is readable or `wake` fires. Returns true if `fd` is readable.
    static func waitReadable(_ fd: Int32, wake: Int32, timeoutMs: Int32) -> Bool {
        var fds = [
            pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let r = poll(&fds, 2, timeoutMs)
            if r < 0 && errno == EINTR { continue }
            if r <= 0 { return false }
            if fds[1].revents != 0 { return false }
            return fds[0].revents != 0
        }
    }

    /// Child processes (tests run curl) must not inherit the server's sockets.
    static func setCloseOnExec(_ fd: Int32) {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }

    static func shutdownWrite(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_WR))
    }

    static func shutdownBoth(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_RDWR))
    }

    static func closeFD(_ fd: Int32) {
        _ = close(fd)
    }
}

/// A pipe that becomes readable, for good, when the server stops; every blocking wait polls it, so
/// `stop()` wakes sleeping throttles, idle keep-alive connections and stalled responses at once.
final class StopSignal: @unchecked Sendable {
    let readFD: Int32
    private let writeFD: Int32

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw SocketError("pipe") }
        Sock.setCloseOnExec(fds[0])
        Sock.setCloseOnExec(fds[1])
        readFD = fds[0]
        writeFD = fds[1]
    }

    func fire() {
        var byte: UInt8 = 1
        _ = write(writeFD, &byte, 1)
    }

    var isFired: Bool { sleep(milliseconds: 0) }

    /// Sleeps up to `milliseconds`; returns true (early) if the server is stopping.
    @discardableResult
    func sleep(milliseconds: Int32) -> Bool {
        var fds = pollfd(fd: readFD, events: Int16(POLLIN), revents: 0)
        while true {
            let r = poll(&fds, 1, milliseconds)
            if r < 0 && errno == EINTR { continue }
            return r > 0
        }
    }

    deinit {
        close(readFD)
        close(writeFD)
    }
}

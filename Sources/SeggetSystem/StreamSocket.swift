import Glibc

/// A blocking TCP connection: the daemon's command-line client sends one request on it and reads the
/// answer to the end. Close it once, when done.
public struct StreamSocket: Sendable {
    /// Why ``connect(host:port:timeout:)`` failed.
    public enum ConnectError: Error, Sendable {
        /// The host name does not resolve.
        case unresolved
        /// No address of the host accepted the connection; the last address's error.
        case refused(Errno)
    }

    /// The socket's file descriptor, for a caller (a test) that speaks on it byte by byte.
    public let descriptor: Int32

    /// Connects to the first address of `host:port` that accepts; sends and receives then fail with
    /// `EAGAIN` after `timeout` seconds without progress.
    ///
    /// The corresponding C functions are `getaddrinfo`, `socket`, `setsockopt` and `connect`.
    public static func connect(host: String, port: Int, timeout: Int) throws(ConnectError) -> StreamSocket {
        guard let addresses = system_stream_addresses(host, port), !addresses.isEmpty else { throw .unresolved }
        var last = Errno(rawValue: ECONNREFUSED)
        for (family, type, proto, address) in addresses {
            let fd = system_socket(family, type, proto)
            guard fd >= 0 else {
                last = .current
                continue
            }
            _ = system_set_socket_timeouts(fd, seconds: timeout)
            let connected = address.withUnsafeBytes { raw in
                valueOrErrno {
                    system_connect(fd, raw.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
                }
            }
            switch connected {
            case .success: return StreamSocket(descriptor: fd)
            case .failure(let e):
                last = e
                _ = system_close(fd)
            }
        }
        throw .refused(last)
    }

    /// Sends every byte of `bytes`, retrying `EINTR` and short sends. The corresponding C function is `send`.
    public func sendAll(_ bytes: [UInt8]) throws(Errno) {
        let progress = bytes.withUnsafeBytes { raw in
            retryingWrites(count: raw.count) { done in
                system_send(descriptor, raw.baseAddress.map { $0 + done }, raw.count - done)
            }
        }
        if let error = progress.error { throw error }
    }

    /// Reads until the peer closes the connection. The corresponding C function is `recv`.
    public func receiveAll() throws(Errno) -> [UInt8] {
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { raw in
                valueOrErrno { system_recv(descriptor, raw.baseAddress, raw.count) }
            }
            switch n {
            case .success(0): return response
            case .success(let n): response.append(contentsOf: buffer[0..<n])
            case .failure(let e): throw e
            }
        }
    }

    /// Closes the connection. The corresponding C function is `close`.
    public func close() { _ = system_close(descriptor) }
}

/// The terminal a progress display draws on.
public enum Terminal {
    /// The width in columns of the terminal on `fd`, nil when `fd` is not a terminal.
    /// The corresponding C function is `ioctl(TIOCGWINSZ)`.
    public static func columns(fd: Int32) -> Int? { system_terminal_columns(fd) }
}

import Glibc

/// Which `Host` header values the RPC server answers: its defence against DNS rebinding.
///
/// A page from `http://evil.example` that makes its own name resolve to 127.0.0.1 reaches the daemon
/// as a same-origin page, but its requests still say `Host: evil.example:PORT`. On loopback nothing
/// legitimate says that: browsers and clients that connect to `127.0.0.1`, `[::1]` or `localhost`
/// say so in `Host`. The port is not compared: a name the attacker controls is what rebinding needs,
/// and a loopback name with another port is what an SSH tunnel (`ssh -L 6801:127.0.0.1:6800`) or a
/// local port forward sends, which aria2 answers too. Pure: a header value in, a verdict out.
public enum HostPolicy: Sendable, Equatable {
    /// Listening on loopback: only a loopback name or address, with any port or none.
    case loopback
    /// Listening on every interface (`--rpc-listen-all`): any `Host`; the token is the protection.
    case anyHost

    /// Whether a request with this `Host` value (nil when it has none) is answered.
    public func admits(_ host: String?) -> Bool {
        switch self {
        case .anyHost: return true
        case .loopback:
            guard let host, let parts = Self.split(host) else { return false }
            return Self.isLoopback(parts.name)
        }
    }

    /// Splits `name[:port]` or `[v6]:port`; nil when the value is not of that shape or the port is not
    /// a number from 1 to 65535. The name of an IPv6 literal keeps its brackets.
    static func split(_ host: String) -> (name: Substring, port: Int?)? {
        let value = host[...]
        guard !value.isEmpty else { return nil }
        let name: Substring
        let rest: Substring
        if value.first == "[" {
            guard let close = value.firstIndex(of: "]") else { return nil }
            name = value[...close]
            rest = value[value.index(after: close)...]
        } else if let colon = value.firstIndex(of: ":") {
            name = value[..<colon]
            rest = value[colon...]
        } else {
            name = value
            rest = ""
        }
        guard !name.isEmpty else { return nil }
        if rest.isEmpty { return (name, nil) }
        let digits = rest.dropFirst()
        guard rest.first == ":", (1...5).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let port = Int(digits), (1...65535).contains(port)
        else { return nil }
        return (name, port)
    }

    /// `localhost` (any case, with or without the final dot), an IPv4 address in 127.0.0.0/8 written as
    /// four decimal numbers, or `[::1]` (or the IPv4-mapped form of a 127 address) in any spelling.
    static func isLoopback(_ name: Substring) -> Bool {
        let lower = name.lowercased()
        if lower == "localhost" || lower == "localhost." { return true }
        if lower.hasPrefix("[") {
            guard lower.hasSuffix("]") else { return false }
            return isLoopbackIPv6(String(lower.dropFirst().dropLast()))
        }
        let parts = lower.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return false }
        var numbers: [Int] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(part),
                n <= 255
            else { return false }
            numbers.append(n)
        }
        return numbers[0] == 127
    }

    static func isLoopbackIPv6(_ text: String) -> Bool {
        // A zone ("%eth0") is not loopback's.
        guard !text.isEmpty, !text.contains("%") else { return false }
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return false }
        let bytes = withUnsafeBytes(of: address) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
        // ::ffff:127.x.y.z
        return bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff && bytes[12] == 127
    }

    /// A header value as it may be written into a log: bytes outside printable ASCII (and the backslash)
    /// as `\xHH`, cut to `limit` bytes, so that a hostile value cannot forge lines or drive a terminal.
    public static func printable(_ value: String, limit: Int = 120) -> String {
        var out = ""
        for byte in value.utf8.prefix(limit) {
            if byte >= 0x20 && byte < 0x7f && byte != UInt8(ascii: "\\") {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16)
                out += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        if value.utf8.count > limit { out += "..." }
        return out
    }
}

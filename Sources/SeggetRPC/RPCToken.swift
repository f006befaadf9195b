/// The daemon's RPC token as it lives in its file: how a new one is made, where the file is by
/// default, which file contents and permissions are accepted, and what a front-end is given to paste.
/// Pure: the file itself is read and written by the command line (`TokenFile`).
public enum RPCToken {
    /// Random bytes in a new token: 128 bits, written as 32 hexadecimal digits (safe in a URL, a shell
    /// word and an aria2 `token:` parameter without quoting).
    public static let randomBytes = 16
    /// The longest token a file may hold.
    public static let maxLength = 1024

    /// A new token from `generator` (the system's generator reads the kernel's `getrandom`).
    public static func generate<G: RandomNumberGenerator>(using generator: inout G) -> String {
        let digits = Array("0123456789abcdef")
        var text = ""
        for _ in 0..<randomBytes {
            let byte = UInt8.random(in: .min ... .max, using: &generator)
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return text
    }

    /// A new token from the system's secure generator.
    public static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        return generate(using: &generator)
    }

    /// `STATE/segget/rpc-secret`, where STATE is `$XDG_STATE_HOME` when it is an absolute path, else
    /// `$HOME/.local/state`: beside the daemon's default queue database.
    public static func defaultPath(xdgStateHome: String?, home: String?) -> String {
        if let state = xdgStateHome, state.hasPrefix("/") { return state + "/segget/rpc-secret" }
        return (home ?? ".") + "/.local/state/segget/rpc-secret"
    }

    /// Why a token file is not used.
    public enum Problem: Error, Equatable, Sendable {
        case empty
        case tooLong
        case notPrintable
        case readableByOthers(permissions: UInt32)
        case notARegularFile

        /// A sentence naming the file and what to do.
        public func describe(path: String) -> String {
            switch self {
            case .empty:
                return "The token file \(path) is empty; delete it and the daemon makes a new one."
            case .tooLong:
                return "The token file \(path) holds more than \(RPCToken.maxLength) bytes; it should hold one token."
            case .notPrintable:
                return
                    "The token file \(path) holds spaces or control characters; write one token of printable characters, or delete it for a new one."
            case .readableByOthers(let permissions):
                return
                    "The token file \(path) can be read by other users (mode \(String(permissions, radix: 8))); run 'chmod 600 \(path)', or delete it for a new token."
            case .notARegularFile:
                return "\(path) is not a regular file; the RPC token must be one."
            }
        }
    }

    /// The token in a file's bytes: the first line without surrounding whitespace; one or more printable
    /// ASCII characters, no spaces.
    public static func parse(_ bytes: [UInt8]) -> Result<String, Problem> {
        guard bytes.count <= maxLength + 2 else { return .failure(.tooLong) }
        var text = bytes[...]
        while let last = text.last, last == 0x0a || last == 0x0d || last == 0x20 || last == 0x09 {
            text = text.dropLast()
        }
        while let first = text.first, first == 0x20 || first == 0x09 { text = text.dropFirst() }
        guard !text.isEmpty else { return .failure(.empty) }
        guard text.count <= maxLength else { return .failure(.tooLong) }
        guard text.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return .failure(.notPrintable) }
        return .success(String(decoding: text, as: UTF8.self))
    }

    /// Whether a file with these permission bits may hold the token: no access for group or others.
    public static func check(permissions: UInt32) -> Problem? {
        permissions & 0o077 == 0 ? nil : .readableByOthers(permissions: permissions & 0o7777)
    }

    /// What to paste where: the RPC addresses, an aria2p command line and webui-aria2/AriaNg settings.
    public static func connectionText(token: String?, host: String, port: Int, source: String) -> String {
        let authority = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var lines: [String] = []
        if let token {
            lines.append("token:       \(token)")
            lines.append("             (\(source))")
        } else {
            lines.append("token:       none (\(source))")
        }
        lines.append("WebSocket:   ws://\(authority)/jsonrpc")
        lines.append("HTTP:        http://\(authority)/jsonrpc")
        let secret = token.map { " --secret \($0)" } ?? ""
        lines.append(
            "aria2p:      aria2p --host http://\(host.contains(":") ? "[\(host)]" : host) --port \(port)\(secret) show")
        let tokenQuery = token.map { "&token=\($0)" } ?? ""
        lines.append("webui-aria2: open index.html?host=\(host)&port=\(port)\(tokenQuery)")
        lines.append(
            "AriaNg:      AriaNg Settings > RPC: address \(authority), path /jsonrpc, protocol WebSocket"
                + (token.map { ", secret token \($0)" } ?? ""))
        return lines.joined(separator: "\n")
    }
}

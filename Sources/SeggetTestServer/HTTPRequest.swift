/// One parsed HTTP/1.x request head.
struct HTTPRequest: Sendable {
    var method: String
    /// The request target as sent, e.g. `/short/file.bin?missing=10`.
    var target: String
    /// The percent-decoded path, without the query.
    var path: String
    /// The raw query (without `?`), empty when absent.
    var query: String
    var version: String
    /// Lowercased names; repeated fields joined with ", ".
    var headers: [String: String]

    var wantsClose: Bool {
        let connection = headers["connection"]?.lowercased() ?? ""
        if version == "HTTP/1.0" { return !connection.contains("keep-alive") }
        return connection.split(separator: ",").contains { $0.trimmingSpaces == "close" }
    }

    /// Parses the head (request line and fields, without the final blank line). Nil if malformed.
    static func parse(head: [UInt8]) -> HTTPRequest? {
        let text = String(decoding: head, as: UTF8.self)
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)[...]
        // RFC 9112 §2.2: ignore at least one empty line before the request line.
        while lines.first?.isEmpty == true { lines.removeFirst() }
        guard let requestLine = lines.popFirst() else { return nil }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1."), parts[1].hasPrefix("/") else { return nil }
        let target = String(parts[1])
        let pathPart: Substring
        let query: String
        if let q = target.firstIndex(of: "?") {
            pathPart = target[..<q]
            query = String(target[target.index(after: q)...])
        } else {
            pathPart = Substring(target)
            query = ""
        }
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon].lowercased()
            let value = String(line[line.index(after: colon)...].trimmingSpaces)
            if let existing = headers[name] {
                headers[name] = existing + ", " + value
            } else {
                headers[name] = value
            }
        }
        return HTTPRequest(
            method: String(parts[0]), target: target, path: URLText.percentDecode(pathPart),
            query: query, version: String(parts[2]), headers: headers)
    }
}

extension StringProtocol {
    var trimmingSpaces: Substring {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return s
    }
}

/// Reads request heads off a connection, keeping bytes that arrive early (pipelining) for the next one.
struct RequestReader {
    enum Outcome {
        case request(HTTPRequest)
        case malformed
        case closed
    }

    private var buffer: [UInt8] = []
    private let fd: Int32
    private let stop: StopSignal
    static let maxHeadBytes = 64 * 1024
    static let idleTimeoutMs: Int32 = 120_000

    init(fd: Int32, stop: StopSignal) {
        self.fd = fd
        self.stop = stop
    }

    mutating func next() -> Outcome {
        var scanFrom = 0
        while true {
            if let end = Self.findHeadEnd(buffer, from: scanFrom) {
                let head = Array(buffer[..<end])
                buffer.removeFirst(end + 4)
                guard let request = HTTPRequest.parse(head: head) else { return .malformed }
                // Request bodies are not used by any mode; read and drop them to stay in sync.
                if let length = request.headers["content-length"].flatMap({ Int($0) }), length > 0 {
                    guard discard(length) else { return .closed }
                }
                return .request(request)
            }
            if buffer.count > Self.maxHeadBytes { return .malformed }
            scanFrom = max(0, buffer.count - 3)
            guard fill() else { return .closed }
        }
    }

    private mutating func fill() -> Bool {
        guard Sock.waitReadable(fd, wake: stop.readFD, timeoutMs: Self.idleTimeoutMs) else { return false }
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let n = chunk.withUnsafeMutableBytes { Sock.receive(fd, into: $0) }
        guard n > 0 else { return false }
        buffer.append(contentsOf: chunk[..<n])
        return true
    }

    private mutating func discard(_ count: Int) -> Bool {
        var left = count
        while left > 0 {
            if buffer.isEmpty, !fill() { return false }
            let take = min(left, buffer.count)
            buffer.removeFirst(take)
            left -= take
        }
        return true
    }

    static func findHeadEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var i = start
        while i + 3 < bytes.count {
            if bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 { return i }
            i += 1
        }
        return nil
    }
}

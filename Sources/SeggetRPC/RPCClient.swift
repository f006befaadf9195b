import SeggetSystem

/// Why a call to the daemon failed: it could not be reached, or it answered with an error.
public enum RPCClientError: Error, CustomStringConvertible, Sendable {
    case unreachable(String)
    case badResponse(String)
    case remote(RPCError)

    public var description: String {
        switch self {
        case .unreachable(let why), .badResponse(let why): return why
        case .remote(let e): return e.message
        }
    }
}

/// A blocking JSON-RPC client for the CLI verbs: one HTTP/1.1 POST per call over a plain TCP
/// socket to the daemon (loopback by default), through `SeggetSystem.StreamSocket`.
public struct RPCClient: Sendable {
    public var host: String
    public var port: Int
    public var secret: String?
    /// Seconds to wait for the daemon's answer.
    public var timeout: Int = 30

    public init(host: String = "127.0.0.1", port: Int = 6800, secret: String? = nil) {
        self.host = host
        self.port = port
        self.secret = secret
    }

    /// Calls `method` with the token prepended, returns its result.
    public func call(_ method: String, _ params: [JSON] = []) throws(RPCClientError) -> JSON {
        var all = params
        if let secret, !secret.isEmpty { all.insert(.string("token:" + secret), at: 0) }
        let request = JSON.object([
            ("jsonrpc", .string("2.0")), ("id", .string("segget")), ("method", .string(method)),
            ("params", .array(all)),
        ])
        let reply = try post(request.serialized)
        if let error = reply["error"] {
            let code = error["code"]?.intValue ?? 1
            throw .remote(RPCError(code: Int(code), message: error["message"]?.stringValue ?? "unknown error"))
        }
        guard let result = reply["result"] else { throw .badResponse("The daemon's answer has no result.") }
        return result
    }

    /// Sends one POST /jsonrpc and parses the JSON body of the answer.
    public func post(_ body: String) throws(RPCClientError) -> JSON {
        let socket = try connectSocket()
        defer { socket.close() }
        // An IPv6 literal goes in brackets: the daemon checks Host against its loopback names.
        let authority = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let request =
            "POST /jsonrpc HTTP/1.1\r\nHost: \(authority)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        do {
            try socket.sendAll(Array(request.utf8))
        } catch {
            throw .unreachable("Sending to the daemon failed: \(error).")
        }
        let response: [UInt8]
        do {
            response = try socket.receiveAll()
        } catch {
            throw .unreachable("The daemon did not answer within \(timeout) s (\(error)).")
        }
        return try Self.parseResponse(response)
    }

    /// Splits an HTTP response into status and body and parses the body as JSON.
    static func parseResponse(_ response: [UInt8]) throws(RPCClientError) -> JSON {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let split = (0..<max(0, response.count - 3)).first(where: { Array(response[$0..<$0 + 4]) == separator })
        else {
            throw .badResponse("The daemon's answer is not HTTP.")
        }
        let head = String(decoding: response[0..<split], as: UTF8.self)
        let statusLine = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
        let status = statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        let body = Array(response[(split + 4)...])
        // A failed call comes with 400 (500 for a request that was not JSON), as aria2 sends it: its
        // JSON-RPC error is the answer.
        if status == 400 || status == 500, let json = try? JSON.parse(body), json["error"] != nil { return json }
        guard status == 200 else {
            let text = String(decoding: body, as: UTF8.self).trimmingTrailingNewlines
            throw .badResponse("The daemon answered HTTP \(status): \(text)")
        }
        do {
            return try JSON.parse(body)
        } catch {
            throw .badResponse("The daemon's answer is not JSON (\(error.reason) at byte \(error.offset)).")
        }
    }

    func connectSocket() throws(RPCClientError) -> StreamSocket {
        do {
            return try StreamSocket.connect(host: host, port: port, timeout: timeout)
        } catch {
            switch error {
            case .unresolved:
                throw .unreachable("Cannot resolve the daemon's host \(host).")
            case .refused(let why):
                throw .unreachable(
                    "Cannot reach the segget daemon at \(host):\(port) (\(why)); start it with 'segget daemon', or give --rpc-port."
                )
            }
        }
    }
}

extension String {
    var trimmingTrailingNewlines: String {
        var s = self
        while s.last == "\n" || s.last == "\r" { s.removeLast() }
        return s
    }
}

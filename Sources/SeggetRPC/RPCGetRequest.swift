import SeggetVerify

/// aria2's JSON-RPC over HTTP GET, for front-ends that cannot POST (a `<script>` tag's JSONP):
///
///     /jsonrpc?method=aria2.tellActive&id=ID&params=BASE64   one call; `params` is a base64 JSON array
///     /jsonrpc?params=BASE64                                  a batch: `params` is the request itself
///     ...&jsoncallback=NAME                                   the reply comes as `NAME(reply)`
///
/// As aria2 1.36 answers: the id is a string, `params` may be left out of a call, and a call without
/// an id, a query with neither `method` nor `params`, or `params` that are not base64 get "Invalid
/// Request." with a null id. Stricter than aria2 in one place: the callback must be a JavaScript
/// name (aria2 echoes any text in front of the reply, which lets the URL's author write script).
/// Pure: the server turns the request into the body it would have got by POST.
public struct RPCGetRequest: Equatable, Sendable {
    /// The JSON-RPC request it stands for, as a POST would carry it.
    public let body: [UInt8]
    /// JSONP: the reply is sent as `callback(reply)`, as `text/javascript`.
    public let callback: String?

    public enum Failure: Error, Equatable, Sendable {
        /// The reply is JSON-RPC's Invalid Request (or Parse error), with a null id: `reply`.
        case reply(RPCError, callback: String?)
        /// `jsoncallback` is not a JavaScript name: HTTP 400.
        case badCallback
    }

    /// The longest `jsoncallback` taken.
    static let longestCallback = 128

    /// The request a GET's query (what follows `?`, or nothing) stands for.
    public static func parse(query: Substring) -> Result<RPCGetRequest, Failure> {
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let eq = pair.firstIndex(of: "=") ?? pair.endIndex
            let key = percentDecoded(pair[..<eq])
            let value = eq == pair.endIndex ? "" : percentDecoded(pair[pair.index(after: eq)...])
            if fields[key] == nil { fields[key] = value }
        }
        let callback = fields["jsoncallback"]
        if let callback, !isJavaScriptName(callback) { return .failure(.badCallback) }
        func invalid(_ error: RPCError = .invalidRequest) -> Result<RPCGetRequest, Failure> {
            .failure(.reply(error, callback: callback))
        }
        var params: JSON?
        if let text = fields["params"] {
            // A `+` that was not escaped reaches here as the space form-decoding makes of it.
            let base64 = text.replacingSpaces(with: "+")
            guard let bytes = Base64.decode(Substring(base64)) else { return invalid() }
            guard let json = try? JSON.parse(bytes) else { return invalid(.parse) }
            params = json
        }
        let request: JSON
        if let method = fields["method"] {
            guard let id = fields["id"] else { return invalid() }
            request = .object([
                ("jsonrpc", .string("2.0")), ("method", .string(method)), ("id", .string(id)),
                ("params", params ?? .array([])),
            ])
        } else {
            guard let batch = params else { return invalid() }
            request = batch
        }
        return .success(RPCGetRequest(body: request.serializedBytes, callback: callback))
    }

    /// `reply` as the GET's answer: the JSON, or `callback(JSON)`.
    public static func wrap(_ reply: [UInt8], callback: String?) -> [UInt8] {
        guard let callback else { return reply }
        return Array(callback.utf8) + [UInt8(ascii: "(")] + reply + [UInt8(ascii: ")")]
    }

    /// ASCII letters, digits, `_`, `$` and `.` (a member of an object), not starting with a digit or
    /// a dot, at most `longestCallback` long: nothing that can end the call and start a statement.
    static func isJavaScriptName(_ s: String) -> Bool {
        let u = Array(s.utf8)
        guard let first = u.first, u.count <= longestCallback, !(first >= 48 && first <= 57), first != 46 else {
            return false
        }
        return u.allSatisfy { c in
            (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c == 95 || c == 36 || c == 46
        }
    }

    /// `%XX` decoded (a malformed escape is kept as it is), `+` as a space, as HTML forms encode.
    static func percentDecoded(_ s: Substring) -> String {
        var out: [UInt8] = []
        let u = Array(s.utf8)
        var i = 0
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 65...70: return c - 55
            case 97...102: return c - 87
            default: return nil
            }
        }
        while i < u.count {
            if u[i] == UInt8(ascii: "%"), i + 2 < u.count, let h = hex(u[i + 1]), let l = hex(u[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(u[i] == UInt8(ascii: "+") ? UInt8(ascii: " ") : u[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension String {
    fileprivate func replacingSpaces(with replacement: Character) -> String {
        String(map { $0 == " " ? replacement : $0 })
    }
}

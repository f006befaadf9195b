/// An error a JSON-RPC call answers with: `{"code": …, "message": …}`.
///
/// As aria2c 1.36 does, every failure of a method (parameters it cannot take, a method it does not
/// know, a call it could not do) answers code 1 and a sentence; JSON-RPC 2.0's codes are left to the
/// request itself: -32700 (not JSON), -32600 (not a call object) and -32602 (`params` not an array).
public struct RPCError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Int
    public let message: String

    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    public static let parse = RPCError(code: -32700, message: "Parse error.")
    public static let invalidRequest = RPCError(code: -32600, message: "Invalid Request.")
    /// webui-aria2 matches this exact text, so it is kept as aria2 writes it.
    public static let unauthorized = RPCError(code: 1, message: "Unauthorized")

    public static func methodNotFound(_ name: String) -> RPCError {
        RPCError(code: 1, message: "No such method: \(name)")
    }
    /// Parameters the method cannot take: code 1, as aria2c answers them (front-ends tell a failed
    /// call by code 1).
    public static func invalidParams(_ why: String) -> RPCError { RPCError(code: 1, message: why) }
    /// A call whose `params` member is not an array (JSON-RPC's -32602, as aria2c answers it).
    public static let paramsNotArray = RPCError(code: -32602, message: "params must be an array.")
    /// A method that understood its call but could not do it (aria2's code 1).
    public static func failed(_ why: String) -> RPCError { RPCError(code: 1, message: why) }

    public var description: String { "\(message) (code \(code))" }

    var json: JSON { .object([("code", .int(Int64(code))), ("message", .string(message))]) }
}

/// A reply and how many of the calls it answers were refused for their token.
public struct RPCReply: Sendable {
    public var json: JSON
    public var unauthorized: Int

    /// The HTTP status aria2 1.36 sends this reply with (POST and GET alike): 200 for a result or a
    /// batch (whatever its calls answered), 400 for one call's error (code 1) or a request that is
    /// not a call (-32600), 500 for the rest (not JSON, `params` not an array). Front-ends written
    /// for aria2 tell a failed call by it (jQuery's error callback, say).
    public var httpStatus: Int {
        guard case .object = json, let error = json["error"] else { return 200 }
        switch error["code"] {
        case .int(1)?, .int(Int64(RPCError.invalidRequest.code))?: return 400
        default: return 500
        }
    }
}

/// One call: what it asks for and the parameters after the token.
public struct RPCCall: Sendable, Equatable {
    public var method: String
    public var params: [JSON]

    public init(method: String, params: [JSON]) {
        self.method = method
        self.params = params
    }
}

/// What a method implementation looks like to the envelope: a call in, a result or an error out.
public protocol RPCMethodHandler: Sendable {
    func handle(_ call: RPCCall) throws(RPCError) -> JSON
}

/// Parses JSON-RPC 2.0 envelopes (single calls, batches, `system.multicall`), checks the token,
/// hands each call to a handler and renders the replies. No I/O: bytes in, bytes out.
public struct RPCProcessor: Sendable {
    public let secret: String?
    public let handler: any RPCMethodHandler

    /// Methods that aria2 answers without a token.
    static let tokenFree: Set<String> = ["system.listMethods", "system.listNotifications"]

    public init(secret: String?, handler: any RPCMethodHandler) {
        self.secret = secret.flatMap { $0.isEmpty ? nil : $0 }
        self.handler = handler
    }

    /// The reply to a request body (a single object or a batch array).
    public func respond(to body: [UInt8]) -> JSON {
        reply(to: body).json
    }

    /// The reply to a request body and how many of its calls carried a wrong or missing token (a
    /// batch or `system.multicall` may carry several), for the server's throttle.
    public func reply(to body: [UInt8]) -> RPCReply {
        let request: JSON
        do {
            request = try JSON.parse(body)
        } catch {
            return RPCReply(json: Self.errorReply(id: .null, .parse), unauthorized: 0)
        }
        var failures = 0
        if case .array(let items) = request {
            // An empty batch gets an empty batch back, as from aria2 (200, `[]`).
            let json = JSON.array(items.map { respond(toSingle: $0, failures: &failures) })
            return RPCReply(json: json, unauthorized: failures)
        }
        let json = respond(toSingle: request, failures: &failures)
        return RPCReply(json: json, unauthorized: failures)
    }

    /// The reply to one call object of a request or a batch.
    func respond(toSingle request: JSON, failures: inout Int) -> JSON {
        guard case .object = request else { return Self.errorReply(id: .null, .invalidRequest) }
        // A call without an `id` is refused and not run, as by aria2 (-32600 with a null id): it
        // used to run, so a front-end's stray notification could add or remove a download unseen.
        guard let id = request["id"] else { return Self.errorReply(id: .null, .invalidRequest) }
        guard case .string(let method) = request["method"] ?? .null else {
            return Self.errorReply(id: id, .invalidRequest)
        }
        let params: [JSON]
        switch request["params"] {
        case nil, .null?: params = []
        case .array(let p)?: params = p
        default: return Self.errorReply(id: id, .paramsNotArray)
        }
        do {
            let result = try call(method: method, params: params, failures: &failures)
            return .object([("id", id), ("jsonrpc", .string("2.0")), ("result", result)])
        } catch {
            return Self.errorReply(id: id, error)
        }
    }

    /// Checks the token, then runs the method; `system.multicall` runs each of its calls the same way.
    public func call(method: String, params: [JSON]) throws(RPCError) -> JSON {
        var failures = 0
        return try call(method: method, params: params, failures: &failures)
    }

    /// `call(method:params:)`, adding to `failures` each call refused for its token.
    func call(method: String, params: [JSON], failures: inout Int) throws(RPCError) -> JSON {
        var params = params
        let hasToken: Bool
        if case .string(let first)? = params.first, first.hasPrefix("token:") {
            hasToken = Self.constantTimeEqual(first.utf8.dropFirst(6), secret?.utf8[...])
            params.removeFirst()
        } else {
            hasToken = secret == nil
        }
        if method == "system.multicall" {
            // The multicall itself carries no token; each of its calls carries its own.
            return try multicall(params, failures: &failures)
        }
        if !hasToken && !Self.tokenFree.contains(method) {
            failures += 1
            throw .unauthorized
        }
        return try handler.handle(RPCCall(method: method, params: params))
    }

    /// `system.multicall([{methodName, params}, …])`: each result wrapped in a one-element array,
    /// each failure as a fault object, as aria2 does.
    func multicall(_ params: [JSON], failures: inout Int) throws(RPCError) -> JSON {
        guard params.count == 1, case .array(let calls) = params[0] else {
            throw .invalidParams("system.multicall takes one array of {methodName, params} objects.")
        }
        var results: [JSON] = []
        for entry in calls {
            guard case .object = entry else {
                results.append(RPCError.failed("system.multicall expected struct.").json)
                continue
            }
            guard case .string(let name)? = entry["methodName"] else {
                results.append(RPCError.failed("Missing methodName.").json)
                continue
            }
            if name == "system.multicall" {
                results.append(RPCError.failed("Recursive system.multicall forbidden.").json)
                continue
            }
            let sub: [JSON]
            switch entry["params"] {
            case nil, .null?: sub = []
            case .array(let p)?: sub = p
            default:
                results.append(RPCError.invalidParams("params must be an array.").json)
                continue
            }
            do {
                results.append(.array([try call(method: name, params: sub, failures: &failures)]))
            } catch {
                results.append(error.json)
            }
        }
        return .array(results)
    }

    static func errorReply(id: JSON, _ error: RPCError) -> JSON {
        .object([("id", id), ("jsonrpc", .string("2.0")), ("error", error.json)])
    }

    /// Compares a presented token with the secret in time that depends only on their lengths,
    /// so that response timing does not reveal how much of a guess was right.
    static func constantTimeEqual<A: Collection, B: Collection>(_ given: A, _ secret: B?) -> Bool
    where A.Element == UInt8, B.Element == UInt8 {
        guard let secret else { return true }
        let a = Array(given)
        let b = Array(secret)
        var diff = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            diff |= x ^ y
        }
        return diff == 0
    }
}

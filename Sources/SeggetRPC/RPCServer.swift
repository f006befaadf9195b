import Dispatch
import Glibc
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// Sends aria2 notifications (`aria2.onDownloadComplete` …) to every open WebSocket.
///
/// Each WebSocket has a mailbox of at most `mailboxLimit` notifications waiting to be written. A
/// client that reads none of them while that many arrive is closed (`overflow`), never left to miss
/// some in silence: a front-end that reconnects asks for the state again. Answers to calls do not
/// pass through here; each is written before the next call is read.
public final class NotificationHub: Sendable {
    private struct Client: Sendable {
        let mailbox: AsyncStream<[UInt8]>.Continuation
        let overflow: @Sendable () -> Void
    }
    private let clients = NIOLockedValueBox<[UInt64: Client]>([:])
    private let nextID = NIOLockedValueBox<UInt64>(0)
    public let mailboxLimit: Int

    public init(mailboxLimit: Int = 65536) { self.mailboxLimit = mailboxLimit }

    /// A stream of notifications for one WebSocket; `overflow` closes it if its client falls
    /// `mailboxLimit` behind; `leave` when it closes.
    func join(overflow: @escaping @Sendable () -> Void) -> (id: UInt64, messages: AsyncStream<[UInt8]>) {
        let id = nextID.withLockedValue { v in
            v += 1
            return v
        }
        let (stream, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingOldest(mailboxLimit))
        clients.withLockedValue { $0[id] = Client(mailbox: continuation, overflow: overflow) }
        return (id, stream)
    }

    /// How many WebSockets are open.
    var clientCount: Int { clients.withLockedValue { $0.count } }

    func leave(_ id: UInt64) {
        let c = clients.withLockedValue { $0.removeValue(forKey: id) }
        c?.mailbox.finish()
    }

    /// Sends `method` with aria2's one parameter, `{"gid": …}`, and `fields` after the GID.
    public func notify(method: String, gid: String, fields: [(String, JSON)] = []) {
        let message = JSON.object([
            ("jsonrpc", .string("2.0")), ("method", .string(method)),
            ("params", .array([.object([("gid", .string(gid))] + fields)])),
        ]).serializedBytes
        for c in clients.withLockedValue({ Array($0.values) }) {
            if case .dropped = c.mailbox.yield(message) { c.overflow() }
        }
    }

}

/// aria2's JSON-RPC endpoint: POST /jsonrpc over HTTP/1.1 and WebSocket at the same path, with CORS.
///
/// Every request, the WebSocket upgrade included, first passes `rpcGuard`'s `Host` check (`HostGate`
/// answers 421 otherwise); every call then passes the processor's token check, and answers to wrong
/// tokens wait as the guard's throttle says.
public final class RPCServer: Sendable {
    public let processor: RPCProcessor
    public let hub: NotificationHub
    public let rpcGuard: RPCGuard
    public let host: String
    /// A second address served on the same port, where it can be bound (the daemon's `::1` beside
    /// `127.0.0.1`, as aria2c listens on both); nil for none.
    public let alsoHost: String?
    public let port: Int
    public let maxRequestBytes: Int
    /// An HTTP connection that has not delivered a whole request this long after its accept or its
    /// previous answer is closed, be it silent or trickling a head a byte at a time (a WebSocket is
    /// not, after its upgrade: it may rightly stay quiet). aria2 drops such connections after 30 s.
    public let idleTimeout: TimeAmount
    /// The most client connections open at once; one more is closed as soon as it is accepted. By
    /// default half the open-file limit (at least 16, at most 4096), so that RPC connections alone
    /// never use up the descriptors: at EMFILE, libdispatch's worker-pool monitor, which opens
    /// /proc/<tid>/stat once a second while work is queued, traps ("workq: registered worker exited
    /// prematurely", SIGILL), and the daemon died.
    public let maxConnections: Int
    /// All calls run here, one at a time: queue commands see one order, and the event loops never block.
    private let work = DispatchQueue(label: "segget.rpc")
    private let serverChannels = NIOLockedValueBox<[Channel]>([])
    /// Open client connections and their calls in flight: `close()` closes the idle ones, so that a
    /// keep-alive client cannot hold shutdown up, and the busy ones close after writing their answer.
    private let connections = NIOLockedValueBox(ConnectionBook<ObjectIdentifier, Channel>())
    /// How long a stop waits for answers being written before it closes their connections regardless.
    public static let stopGrace: DispatchTimeInterval = .seconds(5)

    public init(
        processor: RPCProcessor, hub: NotificationHub, rpcGuard: RPCGuard, host: String, alsoHost: String? = nil, port: Int,
        maxRequestBytes: Int = 2 << 20, idleTimeout: TimeAmount = .seconds(30),
        maxConnections: Int = RPCServer.defaultMaxConnections()
    ) {
        self.processor = processor
        self.hub = hub
        self.rpcGuard = rpcGuard
        self.host = host
        self.alsoHost = alsoHost
        self.port = port
        self.maxRequestBytes = maxRequestBytes
        self.idleTimeout = idleTimeout
        self.maxConnections = maxConnections
    }

    /// Half the soft open-file limit, within 16...4096.
    public static func defaultMaxConnections() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 512 }
        return Int(clamping: min(max(limit.rlim_cur / 2, 16), 4096))
    }

    enum Connection {
        case websocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case http(NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>)
    }

    /// Binds `host` (and `alsoHost` on the port it got, where that can be bound: `unbound` hears why
    /// not), calls `ready` with the bound port, then serves until `close()`.
    public func run(ready: @Sendable (Int) -> Void, unbound: @Sendable (String, any Error) -> Void = { _, _ in }) async throws {
        let first = try await listen(host: host, port: port)
        let boundPort = first.channel.localAddress?.port ?? port
        var listeners = [first]
        if let alsoHost {
            do {
                listeners.append(try await listen(host: alsoHost, port: boundPort))
            } catch {
                unbound(alsoHost, error)
            }
        }
        serverChannels.withLockedValue { $0 = listeners.map(\.channel) }
        ready(boundPort)
        try await withThrowingDiscardingTaskGroup { group in
            for listener in listeners {
                group.addTask { try await self.serve(listener) }
            }
        }
    }

    /// Takes the connections of one listening address until it closes, each served on its own task.
    private func serve(_ listener: NIOAsyncChannel<EventLoopFuture<Connection>, Never>) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            try await listener.executeThenClose { inbound in
                for try await connection in inbound {
                    group.addTask {
                        do {
                            switch try await connection.get() {
                            case .websocket(let ws): try await self.serveWebSocket(ws)
                            case .http(let http): try await self.serveHTTP(http)
                            }
                        } catch {
                            // One connection's failure (a reset, a protocol error) ends only that connection.
                        }
                    }
                }
            }
        }
    }

    /// One listening socket on `host`:`port`, each connection set up for HTTP and WebSocket.
    private func listen(host: String, port: Int) async throws -> NIOAsyncChannel<EventLoopFuture<Connection>, Never> {
        let maxBytes = maxRequestBytes
        let idleTimeout = self.idleTimeout
        let maxConnections = self.maxConnections
        let rpcGuard = self.rpcGuard
        let channel: NIOAsyncChannel<EventLoopFuture<Connection>, Never> = try await ServerBootstrap(
            group: MultiThreadedEventLoopGroup.singleton
        )
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
        .bind(host: host, port: port) { [connections] channel in
            let key = ObjectIdentifier(channel)
            let admitted = connections.withLockedValue { book -> Bool in
                guard book.count < maxConnections else { return false }
                book.opened(key, channel)
                return true
            }
            guard admitted else {
                // Too many open: this one ends at once, its descriptor free again, rather than
                // waiting in the backlog (or at EMFILE) for a place.
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
            }
            channel.closeFuture.whenComplete { _ in connections.withLockedValue { $0.closed(key) } }
            return channel.eventLoop.makeCompletedFuture {
                let upgrader = NIOTypedWebSocketServerUpgrader<Connection>(
                    maxFrameSize: maxBytes,
                    shouldUpgrade: { channel, head in
                        // HostGate has answered a refused Host with 421 already; checked again here because
                        // browsers send no preflight for a WebSocket, so the upgrade is the only check.
                        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
                        let admitted = rpcGuard.hostPolicy.admits(head.headers.first(name: "host"))
                        return channel.eventLoop.makeSucceededFuture(
                            path == "/jsonrpc" && admitted ? HTTPHeaders() : nil)
                    },
                    upgradePipelineHandler: { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            channel.pipeline.syncOperations.removeHandler(name: "deadline", promise: nil)
                            try channel.pipeline.syncOperations.addHandler(
                                NIOWebSocketFrameAggregator(
                                    minNonFinalFragmentSize: 0, maxAccumulatedFrameCount: 1024,
                                    maxAccumulatedFrameSize: maxBytes))
                            return .websocket(try NIOAsyncChannel(wrappingChannelSynchronously: channel))
                        }
                    }
                )
                let upgrade = NIOTypedHTTPServerUpgradeConfiguration<Connection>(
                    upgraders: [upgrader],
                    notUpgradingCompletionHandler: { channel in
                        channel.eventLoop.makeCompletedFuture {
                            .http(try NIOAsyncChannel(wrappingChannelSynchronously: channel))
                        }
                    }
                )
                let connection = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(
                    configuration: .init(upgradeConfiguration: upgrade))
                let upgradeHandler = try channel.pipeline.syncOperations.handler(
                    type: NIOTypedHTTPServerUpgradeHandler<Connection>.self)
                let gate = HostGate(rpcGuard: rpcGuard)
                try channel.pipeline.syncOperations.addHandler(gate, position: .before(upgradeHandler))
                try channel.pipeline.syncOperations.addHandler(
                    RequestDeadline(timeout: idleTimeout), name: "deadline", position: .before(gate))
                return connection
            }
        }
        return channel
    }

    /// The system's words for a failure to listen (NIO's own description names its internals).
    public static func describe(_ error: any Error) -> String {
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)) }
        return String(describing: error)
    }

    /// Stops accepting connections and closes the open ones; `run` then returns. A connection in the
    /// middle of a call (the caller of `aria2.shutdown`, for one) writes its answer first, for at most
    /// `stopGrace`.
    public func close() {
        for channel in serverChannels.withLockedValue({ $0 }) { channel.close(promise: nil) }
        for c in connections.withLockedValue({ $0.stop() }) { c.close(promise: nil) }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.stopGrace) { [connections] in
            for c in connections.withLockedValue({ $0.all }) { c.close(promise: nil) }
        }
    }

    /// A call arrived on `channel`: false once stopping (the caller then closes the connection).
    func beginCall(on channel: Channel) -> Bool {
        connections.withLockedValue { $0.begin(ObjectIdentifier(channel)) }
    }

    /// A call's answer is written on `channel`: true when the connection is to close now.
    func endCall(on channel: Channel) -> Bool {
        connections.withLockedValue { $0.end(ObjectIdentifier(channel)) }
    }

    /// Runs the calls of one request body; an answer that refused wrong tokens waits as long as the
    /// guard says for `client` before it is returned.
    func process(_ body: [UInt8], client: String) async -> RPCReply {
        let processor = self.processor
        let reply = await withCheckedContinuation { continuation in
            work.async { continuation.resume(returning: processor.reply(to: body)) }
        }
        let delay = self.rpcGuard.delay(forFailures: reply.unauthorized, client: client)
        if delay > .zero { try? await Task.sleep(for: delay) }
        return reply
    }

    /// The peer's address for the throttle and the log.
    static func clientName(_ channel: Channel) -> String {
        channel.remoteAddress?.ipAddress ?? "an unknown address"
    }

    // MARK: HTTP

    func serveHTTP(_ channel: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async throws {
        let client = Self.clientName(channel.channel)
        try await channel.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body: [UInt8] = []
            for try await part in inbound {
                switch part {
                case .head(let h):
                    head = h
                    body.removeAll(keepingCapacity: true)
                    // Refuse an oversize body before reading it, then close: the rest is never read.
                    if let length = h.headers.first(name: "content-length").flatMap(Int.init), length > maxRequestBytes
                    {
                        _ = try await respond(to: h, body: [], tooLarge: true, client: client, outbound: outbound)
                        return
                    }
                case .body(var buffer):
                    guard let h = head else { return }
                    if body.count + buffer.readableBytes > maxRequestBytes {
                        _ = try await respond(to: h, body: [], tooLarge: true, client: client, outbound: outbound)
                        return
                    }
                    if let bytes = buffer.readBytes(length: buffer.readableBytes) { body.append(contentsOf: bytes) }
                case .end:
                    guard let h = head, beginCall(on: channel.channel) else { return }
                    let keepAlive = try await respond(
                        to: h, body: body, tooLarge: false, client: client, outbound: outbound)
                    if endCall(on: channel.channel) || !keepAlive { return }
                    head = nil
                }
            }
        }
    }

    /// Writes the response to one request; false when the connection should close.
    func respond(
        to head: HTTPRequestHead, body: [UInt8], tooLarge: Bool, client: String,
        outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    ) async throws -> Bool {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        var headers = HTTPHeaders()
        headers.add(name: "Access-Control-Allow-Origin", value: "*")
        var keepAlive = head.isKeepAlive
        let status: HTTPResponseStatus
        var text: [UInt8] = []
        if !rpcGuard.admits(host: head.headers.first(name: "host"), client: client) {
            // HostGate refused it already, unless it came after an upgrade request on the same connection.
            status = .misdirectedRequest
            text = Array(HostGate.refusal(rpcGuard.hostPolicy).utf8)
            keepAlive = false
        } else if path != "/jsonrpc" {
            status = .notFound
            text = Array("segget's JSON-RPC endpoint is /jsonrpc.\n".utf8)
        } else if head.method == .OPTIONS {
            // CORS preflight from browser front-ends.
            status = .ok
            headers.add(name: "Access-Control-Allow-Methods", value: "POST, GET, OPTIONS")
            headers.add(
                name: "Access-Control-Allow-Headers",
                value: head.headers.first(name: "access-control-request-headers") ?? "Content-Type")
            headers.add(name: "Access-Control-Max-Age", value: "1728000")
        } else if head.method == .GET {
            (status, text) = await respond(toGet: head.uri, client: client, headers: &headers)
        } else if head.method != .POST {
            status = .methodNotAllowed
            headers.add(name: "Allow", value: "POST, GET, OPTIONS")
            text = Array("Send JSON-RPC requests with POST or GET, or open a WebSocket.\n".utf8)
        } else if tooLarge {
            status = .payloadTooLarge
            text = Array("The request is larger than \(maxRequestBytes) bytes.\n".utf8)
            keepAlive = false
        } else {
            let reply = await process(body, client: client)
            status = HTTPResponseStatus(statusCode: reply.httpStatus)
            text = reply.json.serializedBytes
            headers.add(name: "Content-Type", value: "application/json-rpc")
        }
        if text.isEmpty == false && headers.first(name: "content-type") == nil {
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        }
        headers.add(name: "Content-Length", value: String(text.count))
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        try await outbound.write(contentsOf: [
            .head(HTTPResponseHead(version: head.version, status: status, headers: headers)),
            .body(.byteBuffer(ByteBuffer(bytes: text))),
            .end(nil),
        ])
        return keepAlive
    }

    /// A JSON-RPC call by GET (`RPCGetRequest`): its status and body, its headers added.
    func respond(toGet uri: String, client: String, headers: inout HTTPHeaders) async -> (HTTPResponseStatus, [UInt8]) {
        let query = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).dropFirst().first ?? ""
        // A reply to a GET is the state of the moment: no cache, the browser's or a proxy's, keeps it.
        headers.add(name: "Cache-Control", value: "no-cache")
        let reply: RPCReply
        let callback: String?
        switch RPCGetRequest.parse(query: query) {
        case .success(let request):
            reply = await process(request.body, client: client)
            callback = request.callback
        case .failure(.reply(let error, let name)):
            reply = RPCReply(json: RPCProcessor.errorReply(id: .null, error), unauthorized: 0)
            callback = name
        case .failure(.badCallback):
            return (.badRequest, Array("jsoncallback must be a JavaScript name (letters, digits, _, $ and ., at most \(RPCGetRequest.longestCallback)).\n".utf8))
        }
        headers.add(name: "Content-Type", value: callback == nil ? "application/json-rpc" : "text/javascript")
        return (HTTPResponseStatus(statusCode: reply.httpStatus), RPCGetRequest.wrap(reply.json.serializedBytes, callback: callback))
    }

    // MARK: WebSocket

    func serveWebSocket(_ channel: NIOAsyncChannel<WebSocketFrame, WebSocketFrame>) async throws {
        let client = Self.clientName(channel.channel)
        let (id, messages) = hub.join { [channel = channel.channel] in channel.close(promise: nil) }
        defer { hub.leave(id) }
        try await channel.executeThenClose { inbound, outbound in
            try await withThrowingTaskGroup(of: Void.self) { group in
                // Notifications, written as they come.
                group.addTask {
                    for await message in messages {
                        try await outbound.write(
                            WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: message)))
                    }
                }
                // Calls, one at a time: each answer is written (waiting while the client reads
                // nothing) before the next frame is read, so a client that sends faster than it reads
                // is held back by TCP and never loses an answer, and answers never pile up here.
                group.addTask {
                    for try await frame in inbound {
                        switch frame.opcode {
                        case .text, .binary:
                            guard self.beginCall(on: channel.channel) else { return }
                            var data = frame.unmaskedData
                            let bytes = data.readBytes(length: data.readableBytes) ?? []
                            let answer = await self.process(bytes, client: client).json.serializedBytes
                            try await outbound.write(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: answer)))
                            // Stopping: this answer is written; the connection ends.
                            if self.endCall(on: channel.channel) { return }
                        case .ping:
                            try await outbound.write(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData))
                        case .connectionClose:
                            var data = frame.unmaskedData
                            let code = data.readSlice(length: 2) ?? ByteBuffer()
                            try? await outbound.write(WebSocketFrame(fin: true, opcode: .connectionClose, data: code))
                            return
                        default:
                            continue
                        }
                    }
                }
                try await group.next()
                group.cancelAll()
                hub.leave(id)  // ends the notifications' writer; the defer's leave then finds nothing
            }
        }
    }
}

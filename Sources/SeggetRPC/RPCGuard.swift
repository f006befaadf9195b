import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import SeggetSystem

/// The server's guards around its calls: the `Host` check against DNS rebinding and the slow-down of
/// wrong tokens, with what each writes to the log. The decisions are `HostPolicy`'s and
/// `AuthThrottle`'s; this holds their state between connections and words the log lines.
public final class RPCGuard: Sendable {
    private let log: @Sendable (String) -> Void
    private let throttle: NIOLockedValueBox<AuthThrottle>
    /// Refused `Host` values already logged (a few, so that a page retrying cannot fill the log).
    private let loggedHosts = NIOLockedValueBox<Set<String>>([])
    static let loggedHostLimit = 32

    public init(
        hostPolicy: HostPolicy, throttle: AuthThrottle.Settings = .init(), log: @escaping @Sendable (String) -> Void
    ) {
        self.hostPolicy = hostPolicy
        self.throttle = NIOLockedValueBox(AuthThrottle(settings: throttle))
        self.log = log
    }

    /// Which `Host` values are answered.
    public let hostPolicy: HostPolicy

    /// Whether a request with this `Host` (from `client`, for the log) is answered; the first refusal of
    /// each value is logged, escaped.
    public func admits(host: String?, client: String) -> Bool {
        if hostPolicy.admits(host) { return true }
        let shown = host.map { "'\(HostPolicy.printable($0))'" } ?? "(none)"
        let (first, last) = loggedHosts.withLockedValue { seen in
            guard seen.count < Self.loggedHostLimit, !seen.contains(shown) else { return (false, false) }
            seen.insert(shown)
            return (true, seen.count == Self.loggedHostLimit)
        }
        if first, hostPolicy == .loopback {
            let more =
                last
                ? "This is the last refused Host value logged: \(Self.loggedHostLimit) are."
                : "Further requests with this Host are refused without a message."
            log(
                "segget daemon: refused a request from \(client) with Host \(shown): on loopback only 127.0.0.1, [::1] or localhost are answered (a web page using DNS rebinding, or a client naming the daemon otherwise). \(more)\n"
            )
        }
        return false
    }

    /// Records the wrong tokens of one answer to `client` and returns how long that answer waits; the
    /// first failure of a burst is logged.
    public func delay(forFailures count: Int, client: String) -> Duration {
        guard count > 0 else { return .zero }
        let now = ContinuousClock.now
        let (decision, settings) = throttle.withLockedValue { t in
            (t.recordFailures(count, from: client, at: now), t.settings)
        }
        if decision.startsBurst {
            var line =
                "segget daemon: a call from \(client) carried a wrong or missing RPC token (answered Unauthorized). After \(Int(settings.freeFailures)) such calls, more from this address are answered after a delay of up to \(settings.maxDelay.inSeconds) s; calls with the right token are never delayed."
            if let previous = decision.previousBurst {
                line +=
                    " The previous burst from this address had \(previous.failures) wrong tokens in \(Int(previous.lasted.inSeconds)) s."
            }
            log(line + "\n")
        }
        return decision.delay
    }
}

/// The first stop of every request on a connection: a request whose `Host` the guard refuses is
/// answered 421 and the connection closed, before the WebSocket upgrade or the JSON-RPC code sees it,
/// so that plain calls, CORS preflights and upgrades are refused alike.
///
/// It leaves the pipeline once it has let an upgrade request through: after the upgrade the bytes
/// are WebSocket frames, not HTTP parts, and the upgrade either succeeds or ends the connection.
final class HostGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let rpcGuard: RPCGuard
    /// True from a refused head until the connection closes: the rest of that request is dropped.
    private var refusing = false

    init(rpcGuard: RPCGuard) {
        self.rpcGuard = rpcGuard
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refusing else { return }
        guard case .head(let head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        let client = context.channel.remoteAddress?.ipAddress ?? "an unknown address"
        if rpcGuard.admits(host: head.headers.first(name: "host"), client: client) {
            context.fireChannelRead(data)
            if head.headers.contains(name: "upgrade") {
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            }
            return
        }
        refusing = true
        let text = Self.refusal(rpcGuard.hostPolicy)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: String(text.utf8.count))
        headers.add(name: "Connection", value: "close")
        context.write(
            wrapOutboundOut(
                .head(HTTPResponseHead(version: head.version, status: .misdirectedRequest, headers: headers))),
            promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    /// A head the HTTP decoder could not read (larger than NIO's limit, as a GET's query of 100 KB,
    /// or malformed): NIO's error handler before this one has answered 400 with `Connection:
    /// close`, and the connection ends here, as that answer says (it stayed open until the idle
    /// timeout, two minutes by default). Its sending side first, so that the client reads the 400
    /// and then the end: a full close with the rest of a large head unread would reset the
    /// connection, and the reset can destroy the 400 before the client reads it. Whatever the
    /// client does, the connection is gone `lingering` later.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError {
            let channel = context.channel
            channel.close(mode: .output, promise: nil)
            channel.eventLoop.scheduleTask(in: Self.lingering) { channel.close(promise: nil) }
        }
        context.fireErrorCaught(error)
    }

    /// How long a connection whose head could not be read stays after its 400.
    static let lingering = TimeAmount.seconds(2)

    /// The body of a 421: which names the daemon answers to.
    static func refusal(_ policy: HostPolicy) -> String {
        guard policy == .loopback else { return "This request is not for this server.\n" }
        return "segget daemon answers only requests addressed to 127.0.0.1, [::1] or localhost (the Host header); connect to one of those.\n"
    }
}

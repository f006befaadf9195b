#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One request as the server saw and answered it.
public struct RecordedRequest: Sendable, Equatable, CustomStringConvertible {
    public var method: String
    /// The percent-decoded path, e.g. `/short/file.bin`.
    public var path: String
    /// The raw query without `?` (empty when absent).
    public var query: String
    /// Request header fields; names lowercased, repeated fields joined with ", ".
    public var headers: [String: String]
    /// The client's TCP port.
    public var remotePort: Int
    /// When the request arrived and, with `workers`, when a worker took it (monotonic seconds, as
    /// `TestServer.clock`; nil: no worker queue).
    public var arrivedAt: Double = 0
    public var servedAt: Double? = nil
    /// The status code answered (400 for a request that could not be parsed; the connection is then closed).
    public var status: Int
    /// Body bytes written to the socket for this request (payload only, without chunk framing).
    public var bodyBytesSent: Int64
    /// With `acktail`: seconds the response's last bytes waited for the client to acknowledge the
    /// ones before them (nil without it, or when the body never got that far).
    public var tailWait: Double? = nil
    /// When the server accepted the connection the request came on (monotonic seconds, as
    /// `arrivedAt`), and the request's place on it (0: its first).
    public var connectionAcceptedAt: Double = 0
    public var indexOnConnection = 0

    public var description: String { "\(method) \(path)\(query.isEmpty ? "" : "?" + query) \(status) \(bodyBytesSent) \(remotePort)" }
}

/// An HTTP/1.1 server on loopback that misbehaves on purpose. See `FaultMode` for the modes; every
/// resource is served at `/NAME` (normal) and at `/MODE/NAME?params` (faults) at the same time.
///
/// One thread accepts; one thread serves each connection. `stop()` wakes and joins all of them.
public final class TestServer: @unchecked Sendable {
    public let host: String
    public let port: Int
    /// `http://127.0.0.1:PORT` (IPv6 hosts in brackets).
    public var baseURL: String { host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)" }

    /// The URL of resource `name` in `mode`, e.g. `url("f.bin", mode: .short, query: "missing=10")`.
    public func url(_ name: String, mode: FaultMode = .normal, query: String = "") -> String {
        let path = URLText.percentEncodePath(name)
        let prefix = mode == .normal ? "/" : "/\(mode.rawValue)/"
        return baseURL + prefix + path + (query.isEmpty ? "" : "?" + query)
    }

    /// A URL of the `expiring` mode for `name`, valid for `ttl` seconds from now, with `query`'s
    /// parameters passed on (as `GET /_sign/NAME?ttl=…` answers); the URL to renew from is
    /// `signURL(name, query:)`.
    public func signedURL(_ name: String, ttl: Int64, query: String = "") -> String {
        baseURL + SignedURL.mint(name: name, query: "ttl=\(ttl)" + (query.isEmpty ? "" : "&" + query), now: Int64(time(nil)))
    }

    /// The URL that mints a fresh signed URL for `name` (the `expiring` mode), for refresh commands.
    public func signURL(_ name: String, query: String = "") -> String {
        baseURL + "/_sign/" + URLText.percentEncodePath(name) + (query.isEmpty ? "" : "?" + query)
    }

    private let listener: Int32
    private let stopSignal: StopSignal
    private let lock = Lock()

    // All of the following are guarded by `lock`.
    private var resources: [String: Representation] = [:]
    /// Answers given as they are, whatever the request (see `addFixedAnswer`).
    private var fixedAnswers: [String: ResponsePlan] = [:]
    private var fixedRates: [String: Int64] = [:]
    private var changedVersions: [String: (base: Representation, changed: Representation)] = [:]
    private var requestCountByTarget: [String: Int] = [:]
    private var records: [RecordedRequest] = []
    private var recordGeneration = 0
    private var totalBodyBytes: Int64 = 0
    private var accepted = 0
    private var liveConnections: [Int: Int32] = [:]
    private var peakLive = 0
    private var nextConnectionID = 0
    private var runningThreads = 0
    private var started = false
    private var stopped = false
    private var listenerClosed = false
    private var requestObserver: (@Sendable (RecordedRequest) -> Void)?
    private var ledger = ConcurrencyLedger()
    private var workers = WorkerQueues()

    /// Binds and listens on `host` (`127.0.0.1` or `::1`); `port` 0 lets the kernel pick one.
    public init(host: String = "127.0.0.1", port: Int = 0) throws {
        let (fd, bound) = try Sock.listen(host: host, port: port)
        self.host = host
        self.port = bound
        self.listener = fd
        do {
            self.stopSignal = try StopSignal()
        } catch {
            Sock.closeFD(fd)
            throw error
        }
    }

    deinit {
        if !listenerClosed { Sock.closeFD(listener) }
    }

    /// Starts accepting connections on a background thread.
    public func start() throws {
        // sendfile(2) has no MSG_NOSIGNAL: a client killed mid-body would raise SIGPIPE and take the
        // whole process (the test runner, or segget-testserver) down with it.
        signal(SIGPIPE, SIG_IGN)
        try lock.withLock {
            guard !started, !stopped else { return }
            started = true
            runningThreads += 1
            do {
                try DetachedThread.start { [self] in acceptLoop() }
            } catch {
                runningThreads -= 1
                throw error
            }
        }
    }

    /// Closes the listener and every live connection (including stalled ones) and waits for all threads.
    public func stop() {
        let first: Bool = lock.withLock {
            if stopped { return false }
            stopped = true
            return true
        }
        if first {
            stopSignal.fire()
            // Requests waiting for a worker see the stop.
            lock.broadcast()
            // shutdown (not close) wakes threads blocked in send/recv without freeing the descriptor
            // under them; each connection thread closes its own.
            lock.withLock { for fd in liveConnections.values { Sock.shutdownBoth(fd) } }
        }
        lock.wait { runningThreads == 0 }
        lock.withLock {
            if !listenerClosed {
                listenerClosed = true
                Sock.closeFD(listener)
            }
        }
    }

    // MARK: Resources

    public func addResource(name: String, bytes: [UInt8], etag: String? = nil, lastModified: String? = nil) {
        let rep = Representation(bytes: bytes, etag: etag, lastModified: lastModified)
        lock.withLock { resources[name] = rep }
    }

    /// Serves a file with pread (nothing is loaded into memory). A file that cannot be opened is
    /// answered with 500 and the reason.
    public func addResource(name: String, filePath: String, etag: String? = nil, lastModified: String? = nil) {
        let rep = Representation(filePath: filePath, etag: etag, lastModified: lastModified)
        lock.withLock { resources[name] = rep }
    }

    /// "The file changed on the server": later requests see the new bytes and validators.
    /// nil validators are derived as for `addResource`.
    public func replaceResource(name: String, bytes: [UInt8], etag: String? = nil, lastModified: String? = nil) {
        addResource(name: name, bytes: bytes, etag: etag, lastModified: lastModified)
    }

    /// Answers every request for `path` with `status`, `headers` and `body` as given, whatever its
    /// range: a redirector's 302 with `Link` fields, a Metalink document.
    /// `rate`: the body's bytes a second (nil: at once), for a document that trickles.
    public func addFixedAnswer(path: String, status: Int, headers: [(String, String)], body: [UInt8] = [], rate: Int64? = nil) {
        lock.withLock {
            fixedAnswers[path] = ResponsePlan(status: status, headers: headers, body: .text(body))
            fixedRates[path] = rate
        }
    }

    public func removeResource(name: String) {
        lock.withLock { _ = resources.removeValue(forKey: name) }
    }

    // MARK: Observation

    /// Response-body bytes written to sockets, all requests (chunk framing not counted). A slice is
    /// counted just before it is sent (and uncounted if the send fails), so once a client has read
    /// a byte it is already included.
    public var bodyBytesSent: Int64 { lock.withLock { totalBodyBytes } }

    /// Requests in arrival order; a request still being answered shows the bytes sent so far.
    public var requests: [RecordedRequest] { lock.withLock { records } }

    public var connectionsAccepted: Int { lock.withLock { accepted } }
    /// The most connections open at once (as the server saw them: a client's close counts once the
    /// connection's thread has read it).
    public var peakConnections: Int { lock.withLock { peakLive } }

    /// What the `maxconc` limits admitted and rejected (all targets together). Also served as text
    /// at `GET /_stats` (`GET /_stats?reset=1` clears it after answering, as `resetCounters()` does).
    public var concurrency: ConcurrencyStats { lock.withLock { ledger.stats } }

    /// Clears `bodyBytesSent`, `requests`, `connectionsAccepted`, `peakConnections` (to those open
    /// now) and `concurrency` (requests still
    /// in flight stay counted as in flight). The per-target request counts that
    /// drive `times`/`after` parameters are kept (see `resetModeCounters()`), so a fault scenario
    /// can be measured in phases without restarting it.
    public func resetCounters() {
        lock.withLock {
            records = []
            recordGeneration += 1
            totalBodyBytes = 0
            accepted = 0
            peakLive = liveConnections.count
            ledger.resetStats()
        }
    }

    /// Restarts the per-target request counts used by `times` and `after` parameters.
    public func resetModeCounters() {
        lock.withLock {
            requestCountByTarget = [:]
        }
    }

    /// Called on a connection thread after each request is finished (or abandoned).
    public func onRequestFinished(_ observer: @escaping @Sendable (RecordedRequest) -> Void) {
        lock.withLock { requestObserver = observer }
    }

    // MARK: Threads

    private func acceptLoop() {
        defer { threadExited() }
        while true {
            guard Sock.waitReadable(listener, wake: stopSignal.readFD, timeoutMs: -1) else { return }
            guard let (fd, remoteAddress, remotePort) = Sock.accept(listener) else {
                // EMFILE and friends leave the listener readable: back off instead of spinning.
                if stopSignal.sleep(milliseconds: 10) { return }
                continue
            }
            let acceptedAt = MonotonicClock.seconds
            let id: Int? = lock.withLock {
                if stopped { return nil }
                accepted += 1
                nextConnectionID += 1
                liveConnections[nextConnectionID] = fd
                peakLive = max(peakLive, liveConnections.count)
                runningThreads += 1
                return nextConnectionID
            }
            guard let id else {
                Sock.closeFD(fd)
                return
            }
            do {
                try DetachedThread.start { [self] in
                    var connection = Connection(
                        fd: fd, remoteAddress: remoteAddress, remotePort: remotePort, acceptedAt: acceptedAt, server: self,
                        stop: stopSignal)
                    connection.run()
                    connectionClosed(id: id, fd: fd)
                }
            } catch {
                connectionClosed(id: id, fd: fd)
            }
        }
    }

    private func connectionClosed(id: Int, fd: Int32) {
        // Unregister before closing so that stop() never shuts down a reused descriptor number.
        lock.withLock { _ = liveConnections.removeValue(forKey: id) }
        Sock.closeFD(fd)
        threadExited()
    }

    private func threadExited() {
        lock.withLock { runningThreads -= 1 }
        lock.broadcast()
    }

    // MARK: Used by connections

    var planner: ResponsePlanner { ResponsePlanner(baseURL: baseURL, now: Int64(time(nil)), startedUnix: startedUnix) }

    struct Prepared {
        var plan: ResponsePlan
        var record: RecordedRequest
        var handle: RecordHandle
        /// Pacing for this response.
        var pacing: Pacing
        /// The `maxconc` slot this request holds until `release(_:)`.
        var concurrencyKey: String?
        /// With `workers`: its queue, its place in line and how many workers serve the queue.
        var worker: (key: String, ticket: Int, limit: Int)?
    }

    struct RecordHandle {
        var generation: Int
        var index: Int
    }

    /// Routes, plans and records a request; a request admitted under a `maxconc` limit holds its slot
    /// until `release(_:)`.
    func prepare(_ request: HTTPRequest, remoteAddress: String, remotePort: Int) -> Prepared {
        if request.path == "/_stats" { return statsResponse(request, remotePort: remotePort) }
        if request.path.hasPrefix("/_sign/") { return signResponse(request, remotePort: remotePort) }
        if let found = lock.withLock({ fixedAnswers[request.path].map { ($0, fixedRates[request.path]) } }) {
            let (fixed, rate) = found
            let record = RecordedRequest(
                method: request.method, path: request.path, query: request.query, headers: request.headers,
                remotePort: remotePort, status: fixed.status, bodyBytesSent: 0)
            return Prepared(plan: fixed, record: record, handle: append(record), pacing: Pacing(rate: rate))
        }
        var key = "\(remoteAddress) \(request.target)"
        let (route, current, number, admission): (Route?, Representation?, Int, Admission) = lock.withLock {
            guard let route = Route.resolve(path: request.path, query: request.query, isRegistered: { resources[$0] != nil })
            else { return (nil, nil, 0, .unlimited) }
            let count = (requestCountByTarget[request.target] ?? 0) + 1
            requestCountByTarget[request.target] = count
            var admission = Admission.unlimited
            if let limit = ConcurrencyLimit(route: route) {
                // `scope=client`: one limit for all of the client's requests, whatever the target.
                if route.params["scope"] == "client" { key = remoteAddress }
                if let remaining = ledger.admit(key, limit: limit.limit) {
                    admission = .admitted(limit, remaining: remaining)
                } else {
                    admission = .rejected(limit)
                }
            }
            return (route, resources[route.name], count, admission)
        }
        let arrivedAt = MonotonicClock.seconds
        var plan: ResponsePlan
        var pacing = Pacing()
        var concurrencyKey: String?
        if let route, let current {
            if case .rejected(let limit) = admission {
                plan = limit.rejection()
            } else {
                plan = planner.plan(
                    request: request, route: route, representation: current, requestNumber: number,
                    changed: { self.changedVersion(of: route.name, base: current, length: $0) })
                if case .admitted(let limit, let remaining) = admission {
                    concurrencyKey = key
                    plan.headers += limit.rateLimitHeaders(remaining: remaining)
                }
                var bodyStart: Int64?
                if case .slice(_, let offset, _) = plan.body { bodyStart = offset }
                pacing = route.pacing(forRemotePort: remotePort, requestNumber: number, bodyStart: bodyStart)
            }
        } else {
            plan = .text(404, "no such resource or mode: \(request.path)\n")
        }
        var record = RecordedRequest(
            method: request.method, path: request.path, query: request.query, headers: request.headers,
            remotePort: remotePort, status: plan.status, bodyBytesSent: 0)
        record.arrivedAt = arrivedAt
        var worker: (key: String, ticket: Int, limit: Int)?
        if let route, let limit = route.int("workers"), limit > 0, plan.status != 429, plan.status != 503 {
            let key = route.params["scope"] == "client" ? remoteAddress : "\(remoteAddress) \(request.target)"
            worker = (key, lock.withLock { workers.arrive(key) }, Int(limit))
        }
        return Prepared(
            plan: plan, record: record, handle: append(record), pacing: pacing, concurrencyKey: concurrencyKey, worker: worker)
    }

    /// Blocks until `prepared`'s request has a worker (`workers`); false when the server stopped first.
    func waitForWorker(_ prepared: inout Prepared) -> Bool {
        guard let w = prepared.worker else { return true }
        lock.wait { stopped || workers.isTurn(w.key, ticket: w.ticket, limit: w.limit) }
        let served: Bool = lock.withLock {
            if stopped {
                workers.leave(w.key, ticket: w.ticket)
                return false
            }
            workers.take(w.key, ticket: w.ticket)
            let now = MonotonicClock.seconds
            prepared.record.servedAt = now
            let handle = prepared.handle
            if handle.generation == recordGeneration, records.indices.contains(handle.index) {
                records[handle.index].servedAt = now
            }
            return true
        }
        lock.broadcast()
        return served
    }

    /// The clock of `RecordedRequest.arrivedAt` and `servedAt`: monotonic seconds.
    public static var clock: Double { MonotonicClock.seconds }
    /// When the server was made, on that clock.
    public let startedAt = MonotonicClock.seconds
    /// The same, in Unix seconds (the `fresh` mode's file time).
    public let startedUnix = Int64(time(nil))

    /// The most requests that waited for a worker at once (`workers`).
    public var longestWorkerQueue: Int { lock.withLock { workers.longestQueue } }

    private enum Admission {
        case unlimited
        case admitted(ConcurrencyLimit, remaining: Int)
        case rejected(ConcurrencyLimit)
    }

    /// `GET /_stats`: the connection-limit counts as one line of text, for the standalone server.
    private func statsResponse(_ request: HTTPRequest, remotePort: Int) -> Prepared {
        let (stats, busy, queued): (ConcurrencyStats, Int, Int) = lock.withLock {
            defer { if URLText.parseQuery(request.query)["reset"] != nil { ledger.resetStats() } }
            return (ledger.stats, workers.busyTotal, workers.queuedTotal)
        }
        let plan = ResponsePlan.text(200, stats.description + " workers-busy=\(busy) workers-queued=\(queued)\n")
        var record = RecordedRequest(
            method: request.method, path: request.path, query: request.query, headers: request.headers,
            remotePort: remotePort, status: plan.status, bodyBytesSent: 0)
        record.arrivedAt = MonotonicClock.seconds
        return Prepared(plan: plan, record: record, handle: append(record), pacing: Pacing())
    }

    /// `GET /_sign/NAME?ttl=S&…`: a fresh signed URL for the `expiring` mode, one line of text.
    private func signResponse(_ request: HTTPRequest, remotePort: Int) -> Prepared {
        let name = URLText.percentDecode(request.path.dropFirst("/_sign/".count))
        let plan: ResponsePlan
        if lock.withLock({ resources[name] != nil }) {
            plan = .text(200, baseURL + SignedURL.mint(name: name, query: request.query, now: Int64(time(nil))) + "\n")
        } else {
            plan = .text(404, "no such resource: \(name)\n")
        }
        let record = RecordedRequest(
            method: request.method, path: request.path, query: request.query, headers: request.headers,
            remotePort: remotePort, status: plan.status, bodyBytesSent: 0)
        return Prepared(plan: plan, record: record, handle: append(record), pacing: Pacing())
    }

    /// The request's response is complete, or its connection is gone: its `maxconc` slot is free.
    func release(_ prepared: Prepared) {
        if let w = prepared.worker {
            lock.withLock { workers.release(w.key) }
            lock.broadcast()
        }
        guard let key = prepared.concurrencyKey else { return }
        lock.withLock { ledger.release(key) }
    }

    func append(_ record: RecordedRequest) -> RecordHandle {
        lock.withLock {
            records.append(record)
            return RecordHandle(generation: recordGeneration, index: records.count - 1)
        }
    }

    func countBody(_ bytes: Int, for handle: RecordHandle) {
        guard bytes != 0 else { return }
        lock.withLock {
            totalBodyBytes += Int64(bytes)
            if handle.generation == recordGeneration, records.indices.contains(handle.index) {
                records[handle.index].bodyBytesSent += Int64(bytes)
            }
        }
    }

    /// Records the connection `handle`'s request came on: when it was accepted, and the request's place on it.
    func recordConnection(acceptedAt: Double, index: Int, for handle: RecordHandle) {
        lock.withLock {
            if handle.generation == recordGeneration, records.indices.contains(handle.index) {
                records[handle.index].connectionAcceptedAt = acceptedAt
                records[handle.index].indexOnConnection = index
            }
        }
    }

    /// Records how long `handle`'s response tail waited for an acknowledgement (`acktail`).
    func recordTailWait(_ seconds: Double, for handle: RecordHandle) {
        lock.withLock {
            if handle.generation == recordGeneration, records.indices.contains(handle.index) {
                records[handle.index].tailWait = seconds
            }
        }
    }

    func finished(_ record: RecordedRequest) {
        if let observer = lock.withLock({ requestObserver }) { observer(record) }
    }

    private func changedVersion(of name: String, base: Representation, length: Int64) -> Representation {
        let key = "\(name)\u{0}\(length)"
        return lock.withLock {
            if let cached = changedVersions[key], cached.base === base { return cached.changed }
            let changed = Representation(changedFrom: base, length: length)
            changedVersions[key] = (base, changed)
            return changed
        }
    }
}

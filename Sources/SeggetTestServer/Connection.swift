#if canImport(Glibc)
import Glibc
#endif

/// Serves the requests of one TCP connection, on its own thread.
struct Connection {
    let fd: Int32
    let remoteAddress: String
    let remotePort: Int
    /// When the server accepted it (`MonotonicClock`), and the requests read on it so far.
    let acceptedAt: Double
    private var requestsRead = 0
    let server: TestServer
    let stop: StopSignal
    private var reader: RequestReader
    private var bucket = TokenBucket()
    private var buffer: [UInt8]

    init(fd: Int32, remoteAddress: String, remotePort: Int, acceptedAt: Double, server: TestServer, stop: StopSignal) {
        self.fd = fd
        self.remoteAddress = remoteAddress
        self.remotePort = remotePort
        self.acceptedAt = acceptedAt
        self.server = server
        self.stop = stop
        self.reader = RequestReader(fd: fd, stop: stop)
        self.buffer = [UInt8](repeating: 0, count: 256 * 1024 + 96)
    }

    mutating func run() {
        defer { lingeringClose() }
        while !stop.isFired {
            switch reader.next() {
            case .closed:
                return
            case .malformed:
                var record = RecordedRequest(
                    method: "", path: "", query: "", headers: [:], remotePort: remotePort, status: 400, bodyBytesSent: 0)
                record.arrivedAt = MonotonicClock.seconds
                _ = server.append(record)
                var plan = ResponsePlan.text(400, "malformed request\n")
                plan.closeConnection = true
                _ = writeHead(plan, closing: true)
                server.finished(record)
                return
            case .request(let request):
                var prepared = server.prepare(request, remoteAddress: remoteAddress, remotePort: remotePort)
                prepared.record.connectionAcceptedAt = acceptedAt
                prepared.record.indexOnConnection = requestsRead
                server.recordConnection(acceptedAt: acceptedAt, index: requestsRead, for: prepared.handle)
                requestsRead += 1
                guard server.waitForWorker(&prepared) else { return }
                let keepAlive = respond(request, &prepared)
                server.release(prepared)
                server.finished(prepared.record)
                if !keepAlive { return }
            }
        }
    }

    /// Writes one response; returns whether the connection may serve another request.
    private mutating func respond(_ request: HTTPRequest, _ prepared: inout TestServer.Prepared) -> Bool {
        let plan = prepared.plan
        if plan.silent {
            waitForHangUp()
            return false
        }
        var closing = request.wantsClose || plan.closeConnection
        if case .untilClose = plan.framing { closing = true }
        if case .close = plan.cutoff { closing = true }
        if prepared.pacing.firstByteDelay > 0 {
            let milliseconds = Int32(min(86_400_000, prepared.pacing.firstByteDelay * 1000))
            if prepared.worker != nil {
                // A worker thinks whether or not the client is still there; it finds out when it writes.
                guard !stop.sleep(milliseconds: milliseconds) else { return false }
            } else {
                guard Self.pause(fd: fd, stop: stop, milliseconds: milliseconds) else { return false }
            }
        }
        // `acktail`: the head and the body up to the tail in one corked write, the tail after the
        // client acknowledged them.
        let heldTail = prepared.pacing.acknowledgedTail.map { min(max(0, $0), plan.body.count) }
        if heldTail != nil { Sock.set(cork: true, fd) }
        guard writeHead(plan, closing: closing) else { return false }
        if request.method == "HEAD" { return !closing }

        bucket.configure(bytesPerSecond: prepared.pacing.rate, catchUp: prepared.pacing.catchUp)
        let slowdown = prepared.pacing.slowdown

        let total = plan.body.count
        var limit = total
        switch plan.cutoff {
        case .close(let after)?, .stall(let after)?: limit = min(total, after)
        case nil: break
        }
        let chunked: String?
        if case .chunked = plan.framing { chunked = plan.chunkExtension.map { ";" + $0 } ?? "" } else { chunked = nil }

        let (fd, stop) = (self.fd, self.stop)
        var sent: Int64 = 0
        while sent < limit {
            var n = Int(min(Int64(bucket.sliceSize), limit - sent))
            if let slowdown {
                if sent >= slowdown.after {
                    let rate = slowdown.rate(atBody: sent, start: prepared.pacing.rate)
                    if rate == 0 {
                        // Silence: nothing more, the connection held until the client or the server ends it.
                        waitForHangUp()
                        return false
                    }
                    bucket.retune(bytesPerSecond: rate)
                    n = Int(min(Int64(bucket.sliceSize), limit - sent))
                    // A ramp's slices end where it does, so no byte after it goes at a ramp rate.
                    let rampEnd = slowdown.after + slowdown.ramp
                    if sent < rampEnd { n = Int(min(Int64(n), rampEnd - sent)) }
                } else {
                    n = Int(min(Int64(n), slowdown.after - sent))
                }
            }
            if let heldTail {
                let tailStart = total - heldTail
                if sent < tailStart {
                    n = Int(min(Int64(n), tailStart - sent))
                } else if sent == tailStart && prepared.record.tailWait == nil {
                    let waited = waitUntilAcknowledged()
                    prepared.record.tailWait = waited
                    server.recordTailWait(waited, for: prepared.handle)
                }
            }
            guard bucket.acquire(n, pause: { Self.pause(fd: fd, stop: stop, milliseconds: $0) }) else { return false }
            // Count before sending: a client may read the bytes and look at the counters before this
            // thread runs again, so the counters must never lag behind what the client can see.
            server.countBody(n, for: prepared.handle)
            let (written, ok) = sendSlice(plan.body, offset: sent, count: n, chunked: chunked)
            if written < n { server.countBody(written - n, for: prepared.handle) }
            prepared.record.bodyBytesSent += Int64(written)
            sent += Int64(written)
            guard ok else { return false }
        }

        if heldTail != nil { Sock.set(cork: false, fd) }
        switch plan.cutoff {
        case .close?:
            return false
        case .stall?:
            // Keep the connection open, silent, until the server stops or the client hangs up.
            waitForHangUp()
            return false
        case nil:
            break
        }
        if let ext = chunked {
            guard Sock.sendAll(fd, Array("0\(ext)\r\n\r\n".utf8)) else { return false }
        }
        return !closing
    }

    /// Sends what is corked and waits until the client has acknowledged every byte written (at most
    /// 1 s, less when the server stops); returns the seconds waited.
    private func waitUntilAcknowledged() -> Double {
        Sock.set(cork: false, fd)
        let start = MonotonicClock.seconds
        while Sock.unacknowledgedBytes(fd) > 0 && MonotonicClock.seconds - start < 1 && !stop.isFired {
            usleep(100)
        }
        let waited = MonotonicClock.seconds - start
        Sock.set(cork: true, fd)
        return waited
    }

    /// Sends `count` body bytes starting `offset` bytes into the body; returns the payload bytes written.
    /// `chunked`: as one chunk, its size line carrying this extension text (empty: none); nil: raw.
    private mutating func sendSlice(_ body: ResponsePlan.Body, offset: Int64, count: Int, chunked: String?)
        -> (written: Int, ok: Bool)
    {
        if chunked == nil, case .slice(let rep, let sliceOffset, _) = body,
            let direct = rep.sendDirect(to: fd, at: sliceOffset + offset, count: count)
        {
            return direct
        }
        // Chunked framing is built around the payload in the same buffer: one send per chunk.
        let prefix = chunked.map { Array("\(String(count, radix: 16))\($0)\r\n".utf8) } ?? []
        fillBody(body, offset: offset, count: count, at: prefix.count)
        let fd = self.fd
        return buffer.withUnsafeMutableBytes { raw in
            for (i, b) in prefix.enumerated() { raw[i] = b }
            var end = prefix.count + count
            if chunked != nil {
                raw[end] = 13
                raw[end + 1] = 10
                end += 2
            }
            let (written, ok) = Sock.sendAll(fd, UnsafeRawBufferPointer(rebasing: raw[..<end]))
            return (max(0, min(count, written - prefix.count)), ok)
        }
    }

    /// Sends FIN and drains briefly before the caller closes: closing a socket with unread input
    /// sends RST, which can make the client lose the end of a response it has not read yet.
    private func lingeringClose() {
        Sock.shutdownWrite(fd)
        var scratch = [UInt8](repeating: 0, count: 4096)
        let deadline = MonotonicClock.seconds + 0.5
        while MonotonicClock.seconds < deadline, Sock.waitReadable(fd, wake: stop.readFD, timeoutMs: 100) {
            let n = scratch.withUnsafeMutableBytes { Sock.receive(fd, into: $0) }
            if n <= 0 { return }
        }
    }

    /// Waits `milliseconds`; false (early) when the server stops or the client hangs up, so that a
    /// paced or delayed response frees its connection (and its `maxconc` slot) as soon as the client
    /// is gone, as a server watching its sockets does.
    static func pause(fd: Int32, stop: StopSignal, milliseconds: Int32) -> Bool {
        let deadline = MonotonicClock.seconds + Double(milliseconds) / 1000
        func left() -> Int32 { Int32(max(0, ((deadline - MonotonicClock.seconds) * 1000).rounded(.up))) }
        while true {
            if left() == 0 { return !stop.isFired }
            if Sock.waitReadable(fd, wake: stop.readFD, timeoutMs: left()) {
                if Sock.peerHasHungUp(fd) { return false }
                // A pipelined request is waiting: it is read after this response, so just sleep.
                return !stop.sleep(milliseconds: left())
            }
            if stop.isFired { return false }
        }
    }

    /// Reads and drops whatever the client sends until it closes or the server stops.
    private func waitForHangUp() {
        var scratch = [UInt8](repeating: 0, count: 4096)
        while Sock.waitReadable(fd, wake: stop.readFD, timeoutMs: -1) {
            let n = scratch.withUnsafeMutableBytes { Sock.receive(fd, into: $0) }
            if n <= 0 { return }
        }
    }

    private func writeHead(_ plan: ResponsePlan, closing: Bool) -> Bool {
        var head = "HTTP/1.1 \(plan.status) \(plan.reason ?? HTTPStatus.reason(plan.status))\r\n"
        head += "Server: segget-testserver\r\n"
        for (name, value) in plan.headers { head += "\(name): \(value)\r\n" }
        switch plan.framing {
        case _ where plan.omitFramingHeader: break
        case .contentLength(let length): head += "Content-Length: \(length)\r\n"
        case .chunked: head += "Transfer-Encoding: chunked\r\n"
        case .untilClose: break
        }
        if closing { head += "Connection: close\r\n" }
        head += "\r\n"
        return Sock.sendAll(fd, Array(head.utf8))
    }

    /// Copies `count` body bytes from `offset` into `buffer` at `at`; past the representation's end
    /// (the `long` mode) the bytes are zeros.
    private mutating func fillBody(_ body: ResponsePlan.Body, offset: Int64, count: Int, at start: Int) {
        buffer.withUnsafeMutableBytes { raw in
            let target = UnsafeMutableRawBufferPointer(rebasing: raw[start..<(start + count)])
            switch body {
            case .empty:
                target.initializeMemory(as: UInt8.self, repeating: 0)
            case .text(let bytes):
                for i in 0..<count { target[i] = bytes[Int(offset) + i] }
            case .slice(let rep, let sliceOffset, _):
                let got = rep.read(at: sliceOffset + offset, into: target)
                if got < count {
                    UnsafeMutableRawBufferPointer(rebasing: target[got...]).initializeMemory(as: UInt8.self, repeating: 0)
                }
            }
        }
    }
}

import SeggetCurl
import SeggetSystem

/// The ends of transfers: a transfer that ended by itself, the losers of end-game races, what each
/// cost the server.
extension FetchEngine {
    // MARK: Completion

    /// The budget share that counts connection `id`'s requests: the main URL's host's
    /// (`settings.hostShare`), none for a connection to a mirror on another host (see
    /// `Coordinator+HostLimit.swift`).
    func hostShare(of id: Int) -> HostShare? {
        guard let share = settings.hostShare, core.ranged != nil, core.connections.indices.contains(id) else { return settings.hostShare }
        return core.ranged!.onMainHost(core.connections[id].source) ? share : nil
    }

    /// Connection `c`'s transfer ended (the driver has removed it already).
    func finish(_ c: ConnectionIO, code: CurlCode) {
        settle(c)
        countEnded(c)
        // Our own cut (a range's end reached mid-answer): the server counts the request until it
        // sees the close, so its slot in the host's budget cools a moment before it is reused. A
        // refusal (429, 503) or any other answer refused at its head is over for the server already.
        if code == .writeError, (200..<300).contains(c.head.status) { hostShare(of: c.id)?.cancelled(1) }
        let conn = core.connections[c.id]
        trace("connection \(c.id) done code=\(code.rawValue) pos=\(conn.pos) port=\((try? c.easy.localPort()).map(String.init) ?? "?") rate=\(Format.rate(Double(conn.transferBytes) / max(0.001, monotonicSeconds() - conn.transferStartedAt)))")
        let end: Coordinator.TransferEnd
        let url = target.source(conn.source).url
        // Read only where the transfer failed on its own: a success or our own cut (a range's end
        // reached, every range of a download) has no handshake to tell of and needs no proxy lookup.
        let failed = code != .ok && code != .writeError
        let proxy = failed ? settings.transfer.proxy(for: url) : nil
        let handshake = failed ? HandshakeOutcome(after: code, of: c.easy, url: url, proxy: proxy) : HandshakeOutcome()
        // The head the coordinator judges: the answer's, or for a tunnel the proxy refused, its status
        // (its head no longer reaches the parser: `EasyHandle.setSuppressConnectHeaders`).
        var head = c.head
        if code == .ok, !c.head.isComplete {
            // libcurl's success for a connection closed in the middle of the head (see
            // `ProbeWalk.answered`): a cut answer, retried; taken for the end, it ended the file.
            end = .transient(CurlCode.partialFile.plainWords ?? "the connection closed before the end of the answer")
        } else if code == .ok {
            end = .ok
        } else if code == .partialFile {
            end = .partial
        } else if code == .operationTimedOut, c.head.byteCount == 0, !handshake.connected {
            // libcurl's one code for every timeout; in a fetch only the connection's has one.
            end = .transient("could not connect within \(Format.seconds(settings.transfer.connectTimeout)) (\(settings.connectTimeoutName))", cause: .timedOut)
        } else if handshake.alert != nil || handshake.notTLS {
            // A failed receive or handshake is transient, but not one the server (or proxy) ended
            // with an alert about certificates, or answered in plain text: it does so every time.
            end = .failed(Prober.networkError(code, url: url, proxy: proxy, handshake: handshake, options: settings.transfer))
        } else if let proxy, handshake.tunnelRefused {
            // A proxy that refused a connection's tunnel mid-download: a 429 or 503 (a cap on its
            // tunnels) or another 5xx goes to the coordinator as that status, which learns the limit
            // or retries as it did when the proxy's head reached it; a 4xx (403, 407) is the proxy's
            // refusal, said as such, at once.
            let status = handshake.tunnelStatus
            if (400..<500).contains(status) && status != 429 {
                end = .failed(Prober.networkError(code, url: url, head: c.head, proxy: proxy, handshake: handshake, options: settings.transfer))
            } else {
                end = .transient("the proxy \(URLParts.shown(proxy)) refused the tunnel (HTTP \(status))")
                head = ResponseHead(status: status, refusedBy: "\(URLParts.shown(proxy))")
            }
        } else if let proxy, Self.isProxysFailure(code) {
            // The proxy's failure (it went away mid-download, or a SOCKS proxy refused), named as the
            // proxy's: "Couldn't connect to server" blamed the server. Retried unless no retry helps.
            let e = Prober.networkError(code, url: url, head: c.head, proxy: proxy, handshake: handshake, options: settings.transfer)
            end = e.retryAdvice == .never
                ? .failed(e) : .transient("the proxy \(URLParts.shown(proxy)) failed (\(code.plainWords ?? code.description))", cause: NetworkCause(code))
        } else if code.isTransient && !Prober.headersTooLarge(code, head: c.head) || code == .writeError {
            end = .transient(code.plainWords ?? code.description, cause: NetworkCause(code))
        } else {
            end = .failed(Prober.networkError(code, url: url, head: c.head, proxy: proxy, handshake: handshake, options: settings.transfer))
        }
        apply(.ended(c.id, end, head: head))
    }

    /// Codes by which libcurl ends a transfer through a proxy that are the proxy's failing and may
    /// mend (a proxy whose name does not resolve is refused as before, without the retries).
    static func isProxysFailure(_ code: CurlCode) -> Bool {
        switch code {
        case .couldNotConnect, .proxyFailure: true
        default: false
        }
    }

    /// Removes the losers of end-game races; their staged bytes are discarded (the winner wrote them).
    func flushRemovals() {
        for id in pendingRemoval {
            let c = io[id]
            if core.connections[id].machine.isTransferring {
                countEnded(c)
                driver.cancel(c.easy)
                hostShare(of: id)?.cancelled(1)
                apply(.removed(id))
            }
            if let s = c.staging { writer.discard(s) }
        }
        pendingRemoval.removeAll()
    }

    /// Counts what connection `c`'s transfer cost the server as it ends (see `RequestTally`): the
    /// connection it opened, and a refusal for the host's limit.
    func countEnded(_ c: ConnectionIO) {
        tally.connections += (try? c.easy.newConnections()) ?? 0
        if c.head.status == 429 || c.head.status == 503 { tally.refusals += 1 }
    }
}

extension FetchEngine {
    /// What the probe and this fetch cost the servers: requests, connections, refusals, and the
    /// bytes received beyond those the file lacked.
    var spent: RequestTally {
        var t = settings.probeTally + tally
        let needed = missingAtStart ?? receivedBytes
        t.refetchedBytes = max(0, receivedBytes - needed - rejectedBytes)
        return t
    }

    /// The URLs of the sources that wrote bytes into the file in this fetch, the main URL's first.
    var sourcesThatServed: [String] {
        wroteFrom.indices.filter { wroteFrom[$0] && target.sources.indices.contains($0) }.map { target.sources[$0].url }
    }

    /// Source `source` wrote bytes (see `wroteFrom`).
    func noteWrite(from source: Int) {
        if source >= wroteFrom.count { wroteFrom += Array(repeating: false, count: source + 1 - wroteFrom.count) }
        wroteFrom[source] = true
    }
}

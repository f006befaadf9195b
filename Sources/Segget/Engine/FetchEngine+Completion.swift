import SeggetCurl
import SeggetSystem

/// The ends of transfers: a transfer that ended by itself, the losers of end-game races, what each
/// cost the server; and the source port of a re-dial.
extension FetchEngine {
    // MARK: Completion

    /// Connection `c`'s transfer ended (the driver has removed it already).
    func finish(_ c: ConnectionIO, code: CurlCode) {
        settle(c)
        countEnded(c)
        // Our own cut (a range's end reached mid-answer): the server counts the request until it
        // sees the close, so its slot in the host's budget cools a moment before it is reused. A
        // refusal (429, 503) or any other answer refused at its head is over for the server already.
        if code == .writeError, (200..<300).contains(c.head.status) { settings.hostShare?.cancelled(1) }
        let conn = core.connections[c.id]
        trace("connection \(c.id) done code=\(code.rawValue) pos=\(conn.pos) port=\((try? c.easy.localPort()).map(String.init) ?? "?") rate=\(Format.rate(Double(conn.transferBytes) / max(0.001, monotonicSeconds() - conn.transferStartedAt)))")
        let end: Coordinator.TransferEnd
        if code == .ok {
            end = .ok
        } else if code == .partialFile {
            end = .partial
        } else if code.isTransient && !Prober.headersTooLarge(code, head: c.head) || code == .writeError {
            end = .transient(code.description)
        } else {
            end = .failed(Prober.networkError(code, url: target.url, head: c.head))
        }
        apply(.ended(c.id, end, head: c.head))
    }

    /// Removes the losers of end-game races; their staged bytes are discarded (the winner wrote them).
    func flushRemovals() {
        for id in pendingRemoval {
            let c = io[id]
            if core.connections[id].machine.isTransferring {
                countEnded(c)
                driver.cancel(c.easy)
                apply(.removed(id))
                settings.hostShare?.cancelled(1)
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

    /// How many consecutive source ports libcurl may try from the random one before giving up.
    static let sourcePortTries = 64

    /// A random port in the system's ephemeral range, for a re-dial. Left to itself the kernel hands
    /// successive connections to one server ports that follow a pattern, and a path chosen by a hash
    /// of the addresses and ports (ECMP routing, load balancers, or the benchmark's "ports ending in 0
    /// or 1 are slow" server) can then pick the same slow path again; a random port draws it afresh.
    static func randomSourcePort() -> Int? {
        var low = 32768, high = 60999
        if let file = try? PosixFile.open(path: "/proc/sys/net/ipv4/ip_local_port_range", mode: .readOnly) {
            defer { file.close() }
            let text = String(decoding: (try? file.read(count: 64, at: 0)) ?? [], as: UTF8.self)
            let parts = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
            if parts.count == 2, parts[0] >= 1024, parts[1] - parts[0] > sourcePortTries { (low, high) = (parts[0], parts[1]) }
        }
        return Int.random(in: low...(high - sourcePortTries))
    }
}

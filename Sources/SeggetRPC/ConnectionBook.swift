/// The server's open client connections and which of them are in the middle of a call, so that a stop
/// closes the idle ones at once and lets each busy one write its answer first (the answer to
/// `aria2.shutdown` above all: the stop begins inside that call).
///
/// A value: `RPCServer` keeps it under a lock and does the closing the answers ask for.
struct ConnectionBook<Key: Hashable & Sendable, Connection: Sendable>: Sendable {
    private var open: [Key: (connection: Connection, calls: Int)] = [:]
    /// Set by `stop()`; from then on no new call is taken.
    private(set) var stopping = false

    var count: Int { open.count }

    /// A connection was accepted.
    mutating func opened(_ key: Key, _ connection: Connection) {
        open[key] = (connection, 0)
    }

    /// A connection closed, by either side.
    mutating func closed(_ key: Key) {
        open.removeValue(forKey: key)
    }

    /// A call arrived on `key`: true when it is to be served, false once stopping (the connection is then
    /// closed without an answer, as it would have been a moment later).
    mutating func begin(_ key: Key) -> Bool {
        guard !stopping, open[key] != nil else { return false }
        open[key]?.calls += 1
        return true
    }

    /// The call's answer is written: true when the connection is to close now (stopping, and nothing else
    /// is in flight on it).
    mutating func end(_ key: Key) -> Bool {
        guard let entry = open[key] else { return stopping }
        let calls = max(0, entry.calls - 1)
        open[key]?.calls = calls
        return stopping && calls == 0
    }

    /// Stopping begins: the connections with no call in flight, to close now. The others close themselves
    /// at their `end`.
    mutating func stop() -> [Connection] {
        stopping = true
        return open.values.filter { $0.calls == 0 }.map(\.connection)
    }

    /// Every connection still open, whatever it is doing: for the last resort after a stop's grace.
    var all: [Connection] { open.values.map(\.connection) }
}

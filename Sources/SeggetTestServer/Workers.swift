/// The `workers` parameter: an origin that works on at most N requests at a time (a synchronous
/// application server, an emulator, a busy origin behind a cache miss). The others wait in the
/// order they arrived; a request holds its worker from its turn through its think time
/// (`firstbyte`) and its body. A client that hangs up while its request waits still costs the
/// worker its think time when the turn comes, as a worker that reads the request, works on it and
/// only finds the connection closed when it writes. Keyed like `maxconc` (client address and target,
/// or the client alone with `scope=client`). Pure: the server calls it under its lock.
struct WorkerQueues {
    private var busy: [String: Int] = [:]
    private var waiting: [String: [Int]] = [:]
    private var nextTicket = 0
    /// The most requests that waited at once behind busy workers, for `GET /_stats`.
    private(set) var longestQueue = 0

    /// Workers busy, and requests waiting for one, over every queue (for `GET /_stats`).
    var busyTotal: Int { busy.values.reduce(0, +) }
    var queuedTotal: Int { waiting.values.reduce(0) { $0 + $1.count } }

    /// A request for `key` arrives: its place in line.
    mutating func arrive(_ key: String) -> Int {
        nextTicket += 1
        waiting[key, default: []].append(nextTicket)
        longestQueue = max(longestQueue, waiting[key, default: []].count - 1)
        return nextTicket
    }

    /// Whether `ticket` is first in line and one of `limit` workers is free.
    func isTurn(_ key: String, ticket: Int, limit: Int) -> Bool {
        busy[key, default: 0] < limit && waiting[key]?.first == ticket
    }

    /// `ticket`'s request takes a worker.
    mutating func take(_ key: String, ticket: Int) {
        waiting[key]?.removeAll { $0 == ticket }
        busy[key, default: 0] += 1
    }

    /// A request leaves the line without a worker (the server stops).
    mutating func leave(_ key: String, ticket: Int) {
        waiting[key]?.removeAll { $0 == ticket }
    }

    /// A worker is free again.
    mutating func release(_ key: String) {
        busy[key] = max(0, busy[key, default: 0] - 1)
    }
}

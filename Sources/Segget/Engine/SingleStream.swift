/// The decisions for a server without ranges: one connection, one plain stream from byte 0. A
/// retry can only start over from the beginning; a body of unknown length ends when the server
/// closes it cleanly. Nothing to schedule, steal, race or re-dial (see `Coordinator` for that).
struct SingleStream: Coordinating {
    var connections = [Connection(id: 0)]
    let config: Coordinator.Config
    var tracing = false
    var receivedBytes: Int64 = 0
    var rateSamples: [(Double, Int64)] = []
    var firstByteWaits: [Double] = []
    /// A stream has one source.
    mutating func noteFirstByteWait(_ wait: Double, source: Int) {}
    var failure: SeggetError?
    var changed: String?
    var ignored: String?
    var unusableInARow = 0
    var cost: RequestCostModel

    init(config: Coordinator.Config) {
        precondition(!config.ranged, "ranged requests are a Coordinator's")
        self.config = config
        cost = RequestCostModel(tls: config.url.lowercased().hasPrefix("https:"))
        // Where the stream ends: its announced length, or wherever the server closes it.
        connections[0].streamEnd = config.totalLength ?? Int64.max
    }

    /// The stream's bytes so far (all of them are in order).
    var finishedBytes: Int64 { connections[0].pos }
    var finishedChunks: [Bool] { [] }
    var isComplete: Bool { connections[0].machine.isIdle && connections[0].pos >= connections[0].streamEnd }
    func end(of id: Int) -> Int64 { connections[id].streamEnd }
    func isRacing(_ id: Int) -> Bool { false }
    /// One stream cannot be split: it never borrows a connection.
    var loans: Int { 0 }
    func wouldUseLoan(now: Double) -> Bool { false }
    mutating func addLoans(_ count: Int) {}
    mutating func returnIdleLoans() -> Int { 0 }
    mutating func recallLoan() {}
    mutating func endRecall() {}

    /// Where the first request starts: 0, or where the probe's answer that it continues got to
    /// (`EngineCore.streamContinues`).
    var startsAt: Int64 = 0

    mutating func begin(now: Double) -> [Command] {
        let end = connections[0].streamEnd
        // The probe's bytes before `startsAt` are the file's: progress, as a resumed range's are.
        connections[0].pos = min(startsAt, end)
        return [start(0, bytes: min(startsAt, end)..<end, chunkEnd: end, now: now)]
    }

    /// The furthest an earlier answer got (bytes written from byte 0): a retry's answer, which starts
    /// over, must reach at least as far, or the two were not the same file.
    var furthest: Int64 = 0

    mutating func startDue(now: Double) -> [Command] {
        guard case .startRequest = connections[0].machine.tick(now: now) else { return [] }
        // Without ranges a retry can only start over from byte 0.
        furthest = max(furthest, connections[0].pos)
        let end = connections[0].streamEnd
        return [start(0, bytes: 0..<end, chunkEnd: end, fresh: true, now: now)]
    }

    mutating func assignIdle(now: Double) -> [Command] { [] }
    mutating func noteCapHeld(now: Double) {}
    mutating func noteUnread(_ id: Int, bytes: Int) {}
    mutating func noteAnswering(_ id: Int) {}

    mutating func room(_ id: Int, now: Double) -> Int64? {
        let c = connections[id]
        let room = min(c.streamEnd, c.requestEnd) - c.pos
        guard room <= 0 else { return room }
        connections[id].machine.stop(.fatal(SeggetError(.protocolViolation, "the server sent more than the \(c.streamEnd) bytes it announced; the file on the server may have changed. Run the command again.")), now: now)
        return nil
    }

    mutating func wrote(_ id: Int, _ count: Int, now: Double) -> Coordinator.Crossing? {
        advance(id, by: count, now: now) ? Coordinator.Crossing() : nil
    }

    mutating func endedByItself(_ id: Int, _ end: Coordinator.TransferEnd, now: Double) -> [Command] {
        if config.totalLength == nil && end == .ok {
            // A chunked or close-delimited body ends when the server says so.
            let pos = connections[id].pos
            if pos < furthest {
                // An earlier answer, cut, brought more than this whole one: they are not the same
                // bytes, and what is past `pos` (already in the part file, or handed to a reader)
                // belongs to neither. Before, the file kept the earlier answer's tail, exit 0.
                if failure == nil {
                    failure = SeggetError(.protocolViolation, "the server's answers disagree: an earlier one brought \(furthest) bytes before it was cut, the last one ended complete at \(pos); the file on the server may have changed. Run the command again.")
                }
                return []
            }
            connections[id].streamEnd = pos
        }
        let c = connections[id]
        guard c.pos < c.streamEnd else { return [] }
        return retryOrFail(id, end, missing: c.streamEnd - c.pos, now: now)
    }

    mutating func recordFinished(_ id: Int, now: Double) {}
    mutating func abandonRace(_ id: Int) {}
    mutating func holdRaces(afterFailureOf id: Int, reason: String, retryAfter: Double?, now: Double) {}
    mutating func learn(warmUp: WarmUpOutcome, now: Double) -> [Command] { [] }
    mutating func periodicDecisions(now: Double) -> [Command] { [] }
    mutating func judgeSlowConnections(now: Double) -> [Command] { [] }
    mutating func dropSource(_ s: Int, now: Double) -> [Command]? { nil }
    mutating func sourceFailed(of id: Int, why: String, now: Double) -> [Command]? { nil }
    mutating func addSource(_ source: FetchSource, now: Double) -> [Command] { [] }
    mutating func reopen(_ k: Int) {}
    mutating func accepted(_ id: Int) {}
    /// One stream has nobody to leave its work to: a refusal is retried.
    mutating func refusedByHost(_ id: Int, head: ResponseHead, now: Double) -> [Command]? { nil }
    /// One stream sends one request at a time: nothing to hold back.
    mutating func judgeSaturation(now: Double) -> [Command] { [] }

    func progress(now: Double, elapsed: Double) -> DownloadProgress {
        let c = connections[0]
        let state: ConnectionProgress.State = c.machine.isWaiting ? .waiting : c.machine.isTransferring ? .receiving : .idle
        return DownloadProgress(
            completedBytes: c.pos, totalBytes: config.totalLength, receivedBytes: receivedBytes,
            bytesPerSecond: totalRate(window: 3, minSpan: 0.2) ?? 0, elapsed: elapsed,
            connections: [ConnectionProgress(id: 0, state: state, bytesPerSecond: c.shownRate(window: 2), remainingBytes: max(0, c.streamEnd - c.pos)) ],
            finishedRanges: config.totalLength != nil && c.pos > 0 ? [0..<c.pos] : [])
    }
}

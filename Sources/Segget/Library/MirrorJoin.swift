/// The mirrors of one attempt, probed while its fetch runs from the main URL: each that agrees
/// joins the engine (`FetchEngine.addSource`), at once when the engine runs, else when it starts.
/// Once the attempt ends (`end`), the probes still out are interrupted and what they answer is
/// neither used nor reported. Loop thread only, but for `isOver` and `interrupt`.
final class MirrorJoin: @unchecked Sendable {
    /// The probes' flag: set by `end`, and by the download's own.
    let interrupt: InterruptFlag
    private var engine: FetchEngine?
    private var waiting: [FetchSource] = []
    /// What the mirrors' probes cost before the engine was there to count it.
    private var unreported = RequestTally()
    private let over = InterruptFlag()

    init(following downloadInterrupt: InterruptFlag) {
        interrupt = InterruptFlag(following: downloadInterrupt)
    }

    /// The attempt ended: nothing joins any more, and no notice of a mirror is shown.
    var isOver: Bool { over.isSet }

    /// A mirror's probe agreed.
    func add(_ source: FetchSource) {
        guard !isOver else { return }
        if let engine { engine.addSource(source) } else { waiting.append(source) }
    }

    /// A mirror's probe ended: what it cost is the download's (`FetchEngine.tally`), kept or not.
    func count(_ spent: RequestTally) {
        guard !isOver else { return }
        if let engine { engine.tally = engine.tally + spent } else { unreported = unreported + spent }
    }

    /// What the mirrors' probes cost and no engine counted yet, handed over once.
    func takeUnreported() -> RequestTally {
        defer { unreported = RequestTally() }
        return unreported
    }

    /// The engine joined the loop (after `DownloadLoop.join`, which begins it).
    func attach(_ engine: FetchEngine) {
        guard !isOver else { return }
        self.engine = engine
        for s in waiting { engine.addSource(s) }
        waiting = []
        engine.tally = engine.tally + takeUnreported()
    }

    func end() {
        over.set()
        interrupt.set()
        engine = nil
        waiting = []
    }
}

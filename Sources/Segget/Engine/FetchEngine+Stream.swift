/// A download into a stream (see `StreamSink`): work is handed out only inside the reorder window,
/// and a failed reader ends the download.
extension FetchEngine {
    /// How often (ms) the loop looks again at connections paused for the reorder window.
    static let streamPollMs = 5.0
    /// A connection paused for the reorder window continues once this much room is ahead of it, so
    /// that it is not resumed for a few bytes and paused again at once.
    static let streamResumeRoom: Int64 = 1 << 20

    /// Before work is handed out: no new request reaches past the window's end (a range beyond it
    /// would hold a connection paused, and a run could not be stolen from it), and a stream whose
    /// reader failed stops the download. While bytes wait for the reader, no connection is judged
    /// slow: the reader sets the pace, and a connection that waited for it (paused, or starved by
    /// the kernel's buffers filling behind a pause) is not the network's fault.
    func limitToStreamWindow() throws {
        guard let gate = streamGate else { return }
        if let failure = gate.outputFailure { throw failure }
        if target.ranged { core.limitHandOut(below: gate.receiveLimit, readerBound: gate.readerIsBehind) }
    }
}

/// Connections borrowed from a lender (a batch's spare share, a daemon's budget; see
/// `ConnectionLender`): taken one a pass while they would find work, given back idle, and called
/// back one at a time while the lender is short.
extension Coordinator {
    /// A borrowed connection would get work at once: a slot is left, and chunks sit in the free pool,
    /// or some connection's run has chunks not started that are worth stealing by the usual rule
    /// (`worthStealing`: once its rate is known). A file that its own connections finish in a moment
    /// (a small one, or a fast server) borrows nothing: a new connection would only cost it.
    func wouldUseLoan(now: Double) -> Bool {
        guard connectionLimit < connections.count else { return false }
        if !scheduler.free.isEmpty { return true }
        let estimates = stealEstimates(now: now)
        return connections.contains { c in
            guard c.machine.isTransferring, let run = scheduler.run(of: c.id), run.count >= 2 else { return false }
            return estimates.worthStealing(c.id, notStartedChunks: run.count - 1)
        }
    }

    mutating func addLoans(_ count: Int) {
        connectionLimit = min(connections.count, connectionLimit + max(0, count))
    }

    /// Borrowed connections are the highest-numbered; those at the top that sit idle with nothing
    /// held are given back (one in the middle waits until those above it are idle too). One that
    /// waits out a failed race's backoff holds nothing either: its wait ends with it.
    mutating func returnIdleLoans() -> Int {
        var back = 0
        while connectionLimit > ownConnections {
            let c = connections[connectionLimit - 1]
            guard c.machine.isIdle || c.machine.isWaiting, scheduler.run(of: c.id) == nil, scheduler.duplicates[c.id] == nil else { break }
            if c.machine.isWaiting { connections[c.id].machine.cancel(now: 0) }
            connectionLimit -= 1
            back += 1
        }
        if let r = recalledLoan, r >= connectionLimit { recalledLoan = nil }
        return back
    }

    /// The lender is short (a daemon gave a task that started later its own share out of connections
    /// lent before; see `ConnectionLender.withdraw`): the highest borrowed connection gives up the
    /// chunks of its run not yet started, finishes the one in flight and is given back idle. One
    /// at a time for each download, the next once the last is back, so that a lender short of one
    /// connection is not paid with every loan of every download (each called back and borrowed
    /// again is a request more). Nothing is cut mid-chunk: the bytes in flight are kept.
    mutating func recallLoan() {
        guard recalledLoan == nil, connectionLimit > ownConnections else { return }
        let top = connectionLimit - 1
        recalledLoan = top
        if connections[top].machine.isWaiting {
            // Waiting to retry (a refusal, a cut): it gives its whole run back and is returned on
            // this pass, rather than hold the lender short through its backoff, or fail the task
            // for a connection it was giving back.
            scheduler.abandon(top)
        } else {
            scheduler.releaseNotStarted(of: top)
        }
    }

    /// Its own share lowered to `count` (a daemon's `max-concurrent-downloads` raised): the
    /// connections above it are loans from now on, given back idle or called back while the lender
    /// is short. Returns how many became loans (the shell takes them from the lender, which the
    /// queue gave them back to). Never raised.
    mutating func lowerOwn(to count: Int) -> Int {
        let own = max(1, count)
        guard own < ownConnections else { return 0 }
        let moved = ownConnections - own
        ownConnections = own
        return moved
    }

    /// The lender is no longer short: a loan being called back may take work again.
    mutating func endRecall() { recalledLoan = nil }
}

import SeggetCurl

// The driver's loop on its own, for these tests: segget runs every transfer on a `DownloadLoop`
// (the Segget module), which drives `performAndDispatch`, `tickDueClients` and `wait` itself.
extension TransferDriver {
    /// Runs the loop until `done` says so: perform and dispatch, tick the clients that are due, and
    /// wait for the sockets (at most `maxWaitMs`, less when a tick is due sooner). After a pass that
    /// ended transfers it does not wait, so that a client's next request goes out at once.
    func run(maxWaitMs: Int32 = 100, until done: () throws -> Bool) throws {
        while try !done() {
            let ended = try performAndDispatch()
            tickDueClients()
            if try done() { return }
            if ended > 0 { continue }
            let tickMs = secondsToNextTick().map { Int32(min(Double(maxWaitMs), ($0 * 1000).rounded(.up))) } ?? maxWaitMs
            try wait(timeoutMs: max(0, tickMs))
        }
    }

    /// Runs `handle`'s one transfer to its end, with the other clients' transfers going on meanwhile.
    /// `cut` is asked on every pass (at least every 10 ms); when it says so the transfer is ended as a
    /// write callback's `.abort` would (`.writeError`).
    func perform(_ handle: EasyHandle, cut: () -> Bool) throws(CurlError) -> CurlCode {
        let waiter = Waiter()
        try start(handle, for: waiter)
        defer { cancel(handle) }
        do {
            try run(maxWaitMs: 10) {
                if waiter.code != nil { return true }
                if cut() { waiter.code = .writeError }
                return waiter.code != nil
            }
        } catch let e as CurlError {
            throw e
        } catch {
            preconditionFailure("the loop's own condition does not throw")
        }
        return waiter.code ?? .writeError
    }

    final class Waiter: TransferClient {
        var code: CurlCode?
        func transferDriver(_ driver: TransferDriver, completed handle: EasyHandle, with code: CurlCode) { self.code = code }
    }
}

/// One user of a `TransferDriver`: typically one download's engine, with its connections.
///
/// Body bytes and header lines reach each transfer's `EasyHandle.delegate`; the client hears when
/// one of its transfers ends, and gets a periodic tick.
package protocol TransferClient: AnyObject {
    /// `handle`, started by this client, has ended with `code`. The driver has already removed it,
    /// so the client may start it again (or another) from here.
    func transferDriver(_ driver: TransferDriver, completed handle: EasyHandle, with code: CurlCode)
    /// Periodic work, about every `tickInterval` given to `register`; `now` is the driver's clock.
    func transferDriverTick(_ driver: TransferDriver, now: Double)
}

extension TransferClient {
    package func transferDriverTick(_ driver: TransferDriver, now: Double) {}
}

/// Runs the transfers of several independent clients (the downloads of a batch or a daemon) on one
/// multi handle, from one thread: perform, dispatch each completion to the client that started the
/// transfer, tick the clients, wait for the sockets.
///
/// The clients share the multi handle's connection cache, so a transfer to a server another one
/// just used reuses its connection. Clients are held weakly: one that goes away stops getting calls,
/// and its transfers still here are removed when they end.
package final class TransferDriver {
    package let multi: MultiHandle
    /// The driver's clock, in seconds; the ticks' `now`.
    package let clock: () -> Double

    /// A class, so that walking the registrations on every pass copies a strong reference to each,
    /// not a weak one: a batch over HTTP/2 registers hundreds of probes at once, and copying their
    /// weak references twice a pass (an entry and a destroy in the side table each) took a fifth of
    /// the batch's CPU (perf, 400 files through WAN link a against a server without HTTP/2).
    private final class Registration {
        weak var client: (any TransferClient)?
        let tickInterval: Double
        var lastTick: Double
        init(client: any TransferClient, tickInterval: Double, lastTick: Double) {
            self.client = client
            self.tickInterval = tickInterval
            self.lastTick = lastTick
        }
    }
    private var registrations: [ObjectIdentifier: Registration] = [:]
    /// Which client started each transfer now on the multi handle, by the handle's identity.
    private var owners: [ObjectIdentifier: Weak] = [:]
    private struct Weak { weak var client: (any TransferClient)? }

    /// - Parameters:
    ///   - multi: the multi handle to run on; pass a kept one to reuse its connections.
    ///   - clock: monotonic seconds; by default seconds since the driver was made.
    package init(multi: MultiHandle = MultiHandle(), clock: (() -> Double)? = nil) {
        self.multi = multi
        if let clock {
            self.clock = clock
        } else {
            let origin = ContinuousClock.now
            self.clock = {
                let d = ContinuousClock.now - origin
                // `components` divides a 128-bit count: once, not once per part. (SeggetSystem's
                // `Duration.inSeconds` does the same; this target links no SeggetSystem.)
                let (seconds, attoseconds) = d.components
                return Double(seconds) + Double(attoseconds) * 1e-18
            }
        }
    }

    // MARK: Clients and transfers

    /// Lets `client` tick every `tickInterval` seconds (0: on every pass of `run`, after each wait).
    package func register(_ client: any TransferClient, tickInterval: Double) {
        registrations[ObjectIdentifier(client)] = Registration(client: client, tickInterval: tickInterval, lastTick: clock())
    }

    /// Stops `client`'s ticks and removes its transfers still running, without completions.
    package func unregister(_ client: any TransferClient) {
        registrations[ObjectIdentifier(client)] = nil
        for handle in handles(of: client) { cancel(handle) }
    }

    /// Starts `handle`'s transfer for `client`, which hears when it ends.
    package func start(_ handle: EasyHandle, for client: any TransferClient) throws(CurlError) {
        try multi.add(handle)
        owners[ObjectIdentifier(handle)] = Weak(client: client)
    }

    /// Takes over `handle`, whose transfer already runs on this driver's multi handle (started by
    /// `MultiHandle.performAlone(_:hold:cut:)` and held there), for `client`, which hears when it ends.
    package func adopt(_ handle: EasyHandle, for client: any TransferClient) {
        precondition(multi.handles.contains { $0 === handle }, "adopting a transfer that is not on this driver's multi handle")
        owners[ObjectIdentifier(handle)] = Weak(client: client)
    }

    /// Ends `handle`'s transfer now, without a completion; nothing when it is not running here.
    /// Not from inside a callback of the driver's transfers (see `MultiHandle.remove`).
    package func cancel(_ handle: EasyHandle) {
        owners[ObjectIdentifier(handle)] = nil
        multi.remove(handle)
    }

    /// The client that started `handle`, while its transfer runs here.
    package func owner(of handle: EasyHandle) -> (any TransferClient)? {
        owners[ObjectIdentifier(handle)]?.client
    }

    /// The transfers `client` has running here.
    package func handles(of client: any TransferClient) -> [EasyHandle] {
        let id = ObjectIdentifier(client)
        return multi.handles.filter { h in owners[ObjectIdentifier(h)]?.client.map(ObjectIdentifier.init) == id }
    }

    // MARK: The loop, a step at a time

    /// Runs whatever transfers are ready (body and header callbacks run inside), then hands each
    /// completion to its client. Returns how many transfers ended.
    @discardableResult
    package func performAndDispatch() throws(CurlError) -> Int {
        try multi.perform()
        let done = multi.completed()
        for (handle, code) in done {
            let owner = owners.removeValue(forKey: ObjectIdentifier(handle))
            multi.remove(handle)
            owner?.client?.transferDriver(self, completed: handle, with: code)
        }
        return done.count
    }

    /// Ticks every registered client whose interval has passed.
    package func tickDueClients() {
        let now = clock()
        var gone: [ObjectIdentifier] = []
        for (id, r) in registrations where now - r.lastTick >= r.tickInterval {
            guard let client = r.client else {
                gone.append(id)
                continue
            }
            r.lastTick = now
            client.transferDriverTick(self, now: now)
        }
        for id in gone where registrations[id]?.client == nil { registrations[id] = nil }
    }

    /// Seconds until the next client's tick is due (0 if one is), nil without a client that ticks
    /// at an interval (those that tick on every pass do not shorten a wait).
    package func secondsToNextTick() -> Double? {
        let now = clock()
        var soonest: Double?
        for r in registrations.values where r.tickInterval > 0 && r.client != nil {
            soonest = min(soonest ?? .infinity, max(0, r.lastTick + r.tickInterval - now))
        }
        return soonest
    }

    /// Waits for activity on any transfer, at most `timeoutMs`.
    package func wait(timeoutMs: Int32) throws(CurlError) {
        try multi.poll(timeoutMs: timeoutMs)
    }
}

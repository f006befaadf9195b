import CCurl

/// One libcurl multi handle, driven from a single thread.
///
/// It owns the easy handles added to it (holds them until they are removed, so that none is freed
/// while libcurl still uses it) and hands completions back as those handles, not as C pointers. Its
/// connection cache outlives the transfers: a handle added later reuses a kept-alive connection.
package final class MultiHandle {
    let raw: UnsafeMutableRawPointer
    /// The handles added and not yet removed, by their C pointer.
    private var added: [UnsafeMutableRawPointer: EasyHandle] = [:]
    /// The sockets this handle's transfers opened, by local port (see `EasyHandle.acknowledgeNearTheEnd`).
    let sockets: UnsafeMutablePointer<segget_sockets>
    /// How many held acknowledgements `perform()` has had sent at once (see
    /// `EasyHandle.promptAcknowledgementWindow`); for tests and traces.
    package private(set) var promptAcknowledgements = 0
    /// The kernel's round-trip estimate of the connection `easy`'s transfer runs on, seconds; nil
    /// while it is not connected (libcurl names no local port yet) or not one of this handle's.
    package func roundTrip(of easy: EasyHandle) -> Double? {
        ask(socketOf: easy, segget_sockets_round_trip_us).map { Double($0) / 1e6 }
    }

    /// Bytes the kernel holds, received and not yet read, on the connection `easy`'s transfer runs on;
    /// nil while it is not connected or not one of this handle's. (Over HTTP/2 the connection's, which
    /// its streams share.)
    package func unreadBytes(of easy: EasyHandle) -> Int? {
        ask(socketOf: easy, segget_sockets_unread)
    }

    /// What `question` (a `segget_sockets_*` reader: the book and a local port, -1 for none) answers
    /// of the socket `easy`'s transfer runs on; nil while libcurl names no local port for it, or when
    /// the book has no such socket.
    private func ask(socketOf easy: EasyHandle,
                     _ question: (UnsafeMutablePointer<segget_sockets>, Int) -> Int) -> Int? {
        guard let port = try? easy.localPort(), port > 0 else { return nil }
        let answer = question(sockets, port)
        return answer < 0 ? nil : answer
    }

    /// How many sockets this handle's transfers opened and have not closed.
    package var trackedSockets: Int { Int(sockets.pointee.count) }
    /// Whether `perform()` has held acknowledgements sent at once (on by default; off only to
    /// measure what they save).
    package var promptAcknowledging = true

    package init() {
        CurlGlobal.ensure()
        guard let m = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        guard let book = segget_sockets_new() else { fatalError("out of memory") }
        raw = m
        sockets = book
        // One TCP connection per range: never multiplex ranges over one HTTP/2 connection unless asked.
        let rc = CurlMultiCode(segget_multi_setopt_long(raw, CURLMOPT_PIPELINING, 0))
        precondition(rc == .ok, CurlError(rc, "CURLMOPT_PIPELINING").description)
    }

    deinit {
        // Nothing can be done about a refusal here; the handles are released right after.
        for raw in added.keys { _ = curl_multi_remove_handle(self.raw, raw) }
        curl_multi_cleanup(raw)
        // After the cleanup, which closed the cached connections through the book.
        segget_sockets_free(sockets)
    }

    private func check(_ rc: CURLMcode, _ name: String) throws(CurlError) {
        guard rc == CURLM_OK else { throw CurlError(CurlMultiCode(rc), name) }
    }

    /// Lets HTTP/2 carry several transfers over one connection (`CURLMOPT_PIPELINING`, `CURLPIPE_MULTIPLEX`).
    package func setMultiplexing(_ on: Bool) throws(CurlError) {
        try check(segget_multi_setopt_long(raw, CURLMOPT_PIPELINING, on ? 2 : 0), "CURLMOPT_PIPELINING")
    }
    /// The most transfers one multiplexed HTTP/2 connection carries at once
    /// (`CURLMOPT_MAX_CONCURRENT_STREAMS`, default 100); libcurl opens another connection for more,
    /// and for more than the server's `SETTINGS_MAX_CONCURRENT_STREAMS`.
    package func setMaxConcurrentStreams(_ n: Int) throws(CurlError) {
        try check(segget_multi_setopt_long(raw, CURLMOPT_MAX_CONCURRENT_STREAMS, n), "CURLMOPT_MAX_CONCURRENT_STREAMS")
    }
    /// The most connections open at once to one host (`CURLMOPT_MAX_HOST_CONNECTIONS`, 0: no limit):
    /// a transfer that would need another waits, in libcurl, for a connection to take it (over
    /// HTTP/2, a free stream on one already open).
    package func setMaxHostConnections(_ n: Int) throws(CurlError) {
        try check(segget_multi_setopt_long(raw, CURLMOPT_MAX_HOST_CONNECTIONS, n), "CURLMOPT_MAX_HOST_CONNECTIONS")
    }
    /// How many idle connections the cache keeps (`CURLMOPT_MAXCONNECTS`).
    package func setMaxConnectionCache(_ n: Int) throws(CurlError) {
        try check(segget_multi_setopt_long(raw, CURLMOPT_MAXCONNECTS, n), "CURLMOPT_MAXCONNECTS")
    }

    /// True when `e` was added and not yet removed.
    package func contains(_ e: EasyHandle) -> Bool { added[e.raw] === e }
    /// The handles added and not yet removed.
    package var count: Int { added.count }
    /// The handles added and not yet removed, in no particular order.
    package var handles: [EasyHandle] { Array(added.values) }

    /// Starts `e`'s transfer on the next `perform()`; this multi handle keeps `e` until `remove(e)`.
    ///
    /// The corresponding C function is `curl_multi_add_handle`.
    package func add(_ e: EasyHandle) throws(CurlError) {
        precondition(added[e.raw] == nil, "an easy handle was added to a multi handle twice")
        try e.trackSockets(in: sockets)
        try check(curl_multi_add_handle(raw, e.raw), "curl_multi_add_handle")
        added[e.raw] = e
    }

    /// Ends `e`'s transfer (if libcurl has not already) and lets go of it; nothing when `e` is not here.
    /// Never call it from inside a callback of this multi handle's transfers: libcurl refuses that
    /// (`CURLM_RECURSIVE_API_CALL`), and the refusal is a programming error that stops the process.
    ///
    /// The corresponding C function is `curl_multi_remove_handle`.
    package func remove(_ e: EasyHandle) {
        guard added[e.raw] === e else { return }
        let rc = CurlMultiCode(curl_multi_remove_handle(raw, e.raw))
        precondition(rc == .ok, CurlError(rc, "curl_multi_remove_handle").description)
        added[e.raw] = nil
        // Connections it opened here stay in this handle's book (libcurl keeps each one's close
        // callback); what it opens elsewhere does not go into it.
        try? e.trackSockets(in: nil)
    }

    /// Runs whatever transfers are ready (callbacks run inside); returns the number still running.
    ///
    /// The corresponding C function is `curl_multi_perform`.
    @discardableResult
    package func perform() throws(CurlError) -> Int {
        var running: Int32 = 0
        var rc: CURLMcode
        repeat { rc = curl_multi_perform(raw, &running) } while rc == CURLM_CALL_MULTI_PERFORM
        if promptAcknowledging {
            promptAcknowledgements += Int(segget_sockets_acknowledge_pending(sockets))
        } else {
            sockets.pointee.pendingCount = 0
        }
        try check(rc, "curl_multi_perform")
        return Int(running)
    }

    /// Waits for activity on any transfer socket, at most `timeoutMs` (less when a libcurl timer is
    /// due sooner, or after `wakeUp()`).
    ///
    /// The corresponding C function is `curl_multi_poll`.
    package func poll(timeoutMs: Int32) throws(CurlError) {
        var numfds: Int32 = 0
        try check(curl_multi_poll(raw, nil, 0, timeoutMs, &numfds), "curl_multi_poll")
    }

    /// Makes a `poll` in progress (on another thread) or the next one return at once.
    ///
    /// The corresponding C function is `curl_multi_wakeup`.
    package func wakeUp() throws(CurlError) {
        try check(curl_multi_wakeup(raw), "curl_multi_wakeup")
    }

    /// Drains the completed-transfer messages: each handle (still added, to be removed by the caller)
    /// and how its transfer ended.
    ///
    /// The corresponding C function is `curl_multi_info_read`.
    package func completed() -> [(handle: EasyHandle, code: CurlCode)] {
        var out: [(handle: EasyHandle, code: CurlCode)] = []
        var left: Int32 = 0
        while let msg = curl_multi_info_read(raw, &left) {
            guard msg.pointee.msg == CURLMSG_DONE, let h = msg.pointee.easy_handle, let e = added[h] else { continue }
            out.append((e, CurlCode(segget_msg_result(msg))))
        }
        return out
    }

    /// Runs `e`'s one transfer to its end here, so that its connection stays in this handle's cache
    /// for the transfers that follow. This multi handle must have no other transfer. `cut` is asked
    /// every 10 ms; when it says so the transfer is ended as a write callback's `.abort` would
    /// (`.writeError`).
    package func performAlone(_ e: EasyHandle, cut: () -> Bool) throws(CurlError) -> CurlCode {
        try performAlone(e, hold: { false }, cut: cut) ?? .writeError
    }

    /// As `performAlone(_:cut:)`, but when `hold` says so (asked before `cut`) the transfer is left
    /// here as it is (paused by its delegate, or by `hold` itself) and nil is returned: the caller
    /// hands it on (see `TransferDriver.adopt`) or removes it.
    package func performAlone(_ e: EasyHandle, hold: () -> Bool, cut: () -> Bool) throws(CurlError) -> CurlCode? {
        try add(e)
        var held = false
        defer { if !held { remove(e) } }
        while true {
            try perform()
            if let done = completed().first(where: { $0.handle === e }) { return done.code }
            if hold() {
                held = true
                return nil
            }
            if cut() { return .writeError }
            try poll(timeoutMs: 10)
        }
    }
}

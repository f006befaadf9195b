import CCurl

/// A libcurl easy-interface result code.
///
/// The corresponding C type is `CURLcode`; `description` comes from `curl_easy_strerror`.
struct CurlCode: Error, Equatable, CustomStringConvertible {
    let rawValue: UInt32
    init(_ code: CURLcode) { rawValue = code.rawValue }

    static let ok = CurlCode(CURLE_OK)
    static let writeError = CurlCode(CURLE_WRITE_ERROR)
    static let partialFile = CurlCode(CURLE_PARTIAL_FILE)

    var description: String { String(cString: curl_easy_strerror(CURLcode(rawValue: rawValue))) }

    /// True for failures a retry on a new connection may cure (as opposed to bad input).
    var isTransient: Bool {
        switch CURLcode(rawValue: rawValue) {
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL, CURLE_PEER_FAILED_VERIFICATION,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_NOT_BUILT_IN, CURLE_WRITE_ERROR,
            CURLE_FILESIZE_EXCEEDED, CURLE_LOGIN_DENIED, CURLE_OUT_OF_MEMORY, CURLE_COULDNT_RESOLVE_HOST,
            CURLE_COULDNT_RESOLVE_PROXY, CURLE_SSL_ENGINE_NOTFOUND, CURLE_BAD_CONTENT_ENCODING:
            false
        default:
            true
        }
    }
}

/// Calls `curl_global_init` exactly once per process, before any handle is made.
enum CurlGlobal {
    private static let initialised: Bool = {
        curl_global_init(segget_curl_global_all()) == CURLE_OK
    }()
    static func ensure() { _ = initialised }
}

/// Receives the header lines of a transfer (the probe's or a connection's) into a `ResponseHead`.
final class HeadCollector {
    var head = ResponseHead()
}

private func headerCallback(
    _ ptr: UnsafeMutablePointer<CChar>?, _ size: Int, _ n: Int, _ ud: UnsafeMutableRawPointer?
) -> Int {
    guard let ptr, let ud else { return 0 }
    let collector = Unmanaged<HeadCollector>.fromOpaque(ud).takeUnretainedValue()
    let count = size * n
    collector.head.append(line: Substring(decodingLatin1(UnsafeRawBufferPointer(start: ptr, count: count))))
    return count
}

/// One libcurl easy handle: one transfer at a time. Only the transport files touch libcurl.
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?

    init() {
        CurlGlobal.ensure()
        guard let h = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        raw = h
    }

    deinit {
        curl_easy_cleanup(raw)
        if let headerList { curl_slist_free_all(headerList) }
    }

    /// Forgets all options (keeping live connections and caches), as between two transfers.
    func reset() {
        curl_easy_reset(raw)
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
    }

    func set(_ option: CURLoption, _ value: Int) {
        _ = segget_easy_setopt_long(raw, option, value)
    }
    func set(_ option: CURLoption, _ value: Bool) {
        _ = segget_easy_setopt_long(raw, option, value ? 1 : 0)
    }
    func set(_ option: CURLoption, offset value: Int64) {
        _ = segget_easy_setopt_off(raw, option, curl_off_t(value))
    }
    /// libcurl copies string options (since 7.17), so a temporary C string is fine.
    @discardableResult
    func set(_ option: CURLoption, _ value: String?) -> CurlCode {
        guard let value else { return CurlCode(segget_easy_setopt_ptr(raw, option, nil)) }
        return value.withCString { CurlCode(segget_easy_setopt_string(raw, option, $0)) }
    }
    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) {
        _ = segget_easy_setopt_ptr(raw, option, value)
    }
    func set(_ option: CURLoption, dataCallback value: segget_curl_data_cb) {
        _ = segget_easy_setopt_data_cb(raw, option, value)
    }
    func set(_ option: CURLoption, xferinfo value: segget_curl_xferinfo_cb) {
        _ = segget_easy_setopt_xferinfo_cb(raw, option, value)
    }

    /// Sends the response's header lines to `collector`, which the caller keeps alive for the transfer.
    func collectHeaders(into collector: HeadCollector) {
        set(CURLOPT_HEADERFUNCTION, dataCallback: headerCallback)
        set(CURLOPT_HEADERDATA, pointer: Unmanaged.passUnretained(collector).toOpaque())
    }

    /// Replaces the extra request header lines (`Name: value`).
    func setHeaders(_ lines: [String]) {
        if let headerList { curl_slist_free_all(headerList) }
        headerList = nil
        for line in lines { headerList = curl_slist_append(headerList, line) }
        _ = segget_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, headerList)
    }

    func perform() -> CurlCode { CurlCode(curl_easy_perform(raw)) }

    /// Runs this one transfer to its end on `multi` (which must have no other transfer), so that its
    /// connection stays in `multi`'s cache for the transfers that follow. `cut` is asked every 10 ms;
    /// when it says so the transfer is ended as a write callback refusing bytes would (`.writeError`).
    func perform(on multi: MultiHandle, cut: () -> Bool) -> CurlCode {
        multi.add(self)
        defer { multi.remove(self) }
        while true {
            _ = multi.perform()
            if let done = multi.completed().first(where: { $0.0 == raw }) { return done.1 }
            if cut() { return .writeError }
            multi.poll(timeoutMs: 10)
        }
    }

    var responseCode: Int {
        var v = 0
        _ = segget_easy_getinfo_long(raw, CURLINFO_RESPONSE_CODE, &v)
        return v
    }
    var localPort: Int {
        var v = 0
        _ = segget_easy_getinfo_long(raw, CURLINFO_LOCAL_PORT, &v)
        return v
    }
}

/// One libcurl multi handle, driven from a single thread.
final class MultiHandle {
    let raw: UnsafeMutableRawPointer

    init() {
        CurlGlobal.ensure()
        guard let m = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        raw = m
        // One TCP connection per range: never multiplex ranges over one HTTP/2 connection unless asked.
        _ = segget_multi_setopt_long(raw, CURLMOPT_PIPELINING, 0)
    }

    deinit { curl_multi_cleanup(raw) }

    func setMultiplexing(_ on: Bool) {
        _ = segget_multi_setopt_long(raw, CURLMOPT_PIPELINING, on ? 2 : 0)  // CURLPIPE_MULTIPLEX
    }
    func setMaxConnectionCache(_ n: Int) {
        _ = segget_multi_setopt_long(raw, CURLMOPT_MAXCONNECTS, n)
    }

    func add(_ e: EasyHandle) { curl_multi_add_handle(raw, e.raw) }
    func remove(_ e: EasyHandle) { curl_multi_remove_handle(raw, e.raw) }

    /// Runs whatever transfers are ready; returns the number still running.
    func perform() -> Int32 {
        var running: Int32 = 0
        var rc: CURLMcode
        repeat { rc = curl_multi_perform(raw, &running) } while rc == CURLM_CALL_MULTI_PERFORM
        return running
    }

    /// Waits for activity on any transfer socket, at most `timeoutMs`.
    func poll(timeoutMs: Int32) {
        var numfds: Int32 = 0
        _ = curl_multi_poll(raw, nil, 0, timeoutMs, &numfds)
    }

    /// Drains the completed-transfer messages: (handle pointer, result).
    func completed() -> [(UnsafeMutableRawPointer, CurlCode)] {
        var out: [(UnsafeMutableRawPointer, CurlCode)] = []
        var left: Int32 = 0
        while let msg = curl_multi_info_read(raw, &left) {
            if msg.pointee.msg == CURLMSG_DONE, let h = msg.pointee.easy_handle {
                out.append((h, CurlCode(segget_msg_result(msg))))
            }
        }
        return out
    }
}

/// Resolves a `Location` value (absolute or relative) against the URL it came from, with libcurl's
/// URL parser. Nil when the result is not a valid URL.
///
/// The corresponding C functions are `curl_url_set` and `curl_url_get`.
func resolveURL(_ reference: String, against base: String) -> String? {
    guard let h = curl_url() else { return nil }
    defer { curl_url_cleanup(h) }
    guard curl_url_set(h, CURLUPART_URL, base, 0) == CURLUE_OK else { return nil }
    // Allow any scheme here so that the redirect policy can name and refuse it.
    guard curl_url_set(h, CURLUPART_URL, reference, UInt32(CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK else { return nil }
    var out: UnsafeMutablePointer<CChar>?
    guard curl_url_get(h, CURLUPART_URL, &out, 0) == CURLUE_OK, let out else { return nil }
    defer { curl_free(out) }
    return String(cString: out)
}

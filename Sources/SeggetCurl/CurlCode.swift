import CCrypto
import CCurl

/// A libcurl easy-interface result code: what a transfer ended with, or why an option was refused.
///
/// The corresponding C type is `CURLcode`; `description` comes from `curl_easy_strerror`.
package struct CurlCode: Error, Hashable, CustomStringConvertible, Sendable {
    package let rawValue: UInt32
    init(_ code: CURLcode) { rawValue = code.rawValue }
    package init(rawValue: UInt32) { self.rawValue = rawValue }

    /// `CURLE_OK`.
    package static let ok = CurlCode(CURLE_OK)
    /// `CURLE_WRITE_ERROR`: a write callback said `abort` (or refused bytes).
    package static let writeError = CurlCode(CURLE_WRITE_ERROR)
    /// `CURLE_PARTIAL_FILE`: the body ended before its announced length.
    package static let partialFile = CurlCode(CURLE_PARTIAL_FILE)
    /// `CURLE_OPERATION_TIMEDOUT`.
    package static let operationTimedOut = CurlCode(CURLE_OPERATION_TIMEDOUT)
    /// `CURLE_URL_MALFORMAT`.
    package static let urlMalformed = CurlCode(CURLE_URL_MALFORMAT)
    /// `CURLE_UNSUPPORTED_PROTOCOL`.
    package static let unsupportedProtocol = CurlCode(CURLE_UNSUPPORTED_PROTOCOL)
    /// `CURLE_PEER_FAILED_VERIFICATION`.
    package static let peerFailedVerification = CurlCode(CURLE_PEER_FAILED_VERIFICATION)
    /// `CURLE_SSL_CACERT_BADFILE`.
    package static let caCertBadFile = CurlCode(CURLE_SSL_CACERT_BADFILE)
    /// `CURLE_SSL_CERTPROBLEM`: the client certificate or its key could not be used.
    package static let clientCertificateProblem = CurlCode(CURLE_SSL_CERTPROBLEM)
    /// `CURLE_COULDNT_RESOLVE_HOST`.
    package static let couldNotResolveHost = CurlCode(CURLE_COULDNT_RESOLVE_HOST)
    /// `CURLE_COULDNT_CONNECT`.
    package static let couldNotConnect = CurlCode(CURLE_COULDNT_CONNECT)
    /// `CURLE_WEIRD_SERVER_REPLY`: libcurl refused a malformed head.
    package static let weirdServerReply = CurlCode(CURLE_WEIRD_SERVER_REPLY)
    /// `CURLE_OUT_OF_MEMORY`; before 8.6 also what a header line over libcurl's limit gives.
    package static let outOfMemory = CurlCode(CURLE_OUT_OF_MEMORY)
    /// `CURLE_COULDNT_RESOLVE_PROXY`.
    package static let couldNotResolveProxy = CurlCode(CURLE_COULDNT_RESOLVE_PROXY)
    /// `CURLE_PROXY` (97, from libcurl 7.73): a SOCKS proxy's handshake failed or it could not connect
    /// on; named by number so that older headers build.
    package static let proxyFailure = CurlCode(rawValue: 97)
    /// `CURLE_RECV_ERROR`.
    package static let receiveError = CurlCode(CURLE_RECV_ERROR)
    /// `CURLE_SEND_ERROR`.
    package static let sendError = CurlCode(CURLE_SEND_ERROR)
    /// `CURLE_SSL_CONNECT_ERROR`: the TLS handshake failed.
    package static let tlsHandshakeFailed = CurlCode(CURLE_SSL_CONNECT_ERROR)
    /// `CURLE_TOO_LARGE` (100), from libcurl 8.6 on: named by number so that older headers build.
    package static let tooLarge = CurlCode(rawValue: 100)
    /// `CURLE_UNKNOWN_OPTION`: this libcurl does not know the option (it is older than segget).
    package static let unknownOption = CurlCode(CURLE_UNKNOWN_OPTION)
    /// `CURLE_BAD_FUNCTION_ARGUMENT`: the option's value is out of its range.
    package static let badFunctionArgument = CurlCode(CURLE_BAD_FUNCTION_ARGUMENT)
    /// `CURLE_NOT_BUILT_IN`: the option or feature was left out when libcurl was built.
    package static let notBuiltIn = CurlCode(CURLE_NOT_BUILT_IN)

    package var description: String { String(cString: curl_easy_strerror(CURLcode(rawValue: rawValue))) }

    /// What happened, in a user's words, for the failures a download meets on the way (libcurl's own
    /// texts, "Transferred a partial file", "Failure when receiving data from the peer", say what
    /// libcurl saw rather than what the network or the server did); nil for the rest.
    package var plainWords: String? {
        switch CURLcode(rawValue: rawValue) {
        case CURLE_PARTIAL_FILE: "the connection closed before the end of the answer"
        case CURLE_RECV_ERROR: "the connection broke while receiving (reset, or closed by the server)"
        case CURLE_SEND_ERROR: "the connection broke while sending the request"
        case CURLE_GOT_NOTHING: "the server closed the connection without answering"
        case CURLE_HTTP2_STREAM: "the server reset the HTTP/2 stream"
        case CURLE_HTTP2: "the HTTP/2 connection failed (a framing or protocol error)"
        case CURLE_SSL_CONNECT_ERROR: "the TLS handshake failed"
        default: nil
        }
    }

    /// True for failures a retry on a new connection may cure (as opposed to bad input).
    package var isTransient: Bool {
        switch CURLcode(rawValue: rawValue) {
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL, CURLE_PEER_FAILED_VERIFICATION,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_NOT_BUILT_IN, CURLE_WRITE_ERROR,
            CURLE_FILESIZE_EXCEEDED, CURLE_LOGIN_DENIED, CURLE_OUT_OF_MEMORY, CURLE_COULDNT_RESOLVE_HOST,
            CURLE_COULDNT_RESOLVE_PROXY, CURLE_SSL_ENGINE_NOTFOUND, CURLE_BAD_CONTENT_ENCODING,
            CURLE_WEIRD_SERVER_REPLY:
            false
        default:
            true
        }
    }
}

/// A libcurl multi-interface result code.
///
/// The corresponding C type is `CURLMcode`; `description` comes from `curl_multi_strerror`.
package struct CurlMultiCode: Hashable, CustomStringConvertible, Sendable {
    package let rawValue: Int32
    init(_ code: CURLMcode) { rawValue = code.rawValue }

    /// `CURLM_OK`.
    package static let ok = CurlMultiCode(CURLM_OK)
    /// `CURLM_BAD_EASY_HANDLE`.
    package static let badEasyHandle = CurlMultiCode(CURLM_BAD_EASY_HANDLE)
    /// `CURLM_UNKNOWN_OPTION`.
    package static let unknownOption = CurlMultiCode(CURLM_UNKNOWN_OPTION)

    package var description: String { String(cString: curl_multi_strerror(CURLMcode(rawValue: rawValue))) }
}

/// A libcurl call that failed: which call, option or info, and the code it returned.
///
/// An option that the libcurl in use is too old to know ends here with a sentence that says so,
/// rather than being ignored.
package struct CurlError: Error, Equatable, CustomStringConvertible, Sendable {
    package enum Code: Hashable, Sendable {
        case easy(CurlCode)
        case multi(CurlMultiCode)
    }
    package let code: Code
    /// The option, info or function: `CURLOPT_RANGE`, `CURLINFO_LOCAL_PORT`, `curl_multi_perform`.
    package let operation: String

    package init(_ code: CurlCode, _ operation: String) {
        self.code = .easy(code)
        self.operation = operation
    }
    package init(_ code: CurlMultiCode, _ operation: String) {
        self.code = .multi(code)
        self.operation = operation
    }

    package var description: String {
        let version = CurlGlobal.version
        switch code {
        case .easy(.unknownOption), .multi(.unknownOption):
            return "\(operation) is not known to libcurl \(version); segget needs a newer libcurl."
        case .easy(.notBuiltIn):
            return "\(operation) is not built into libcurl \(version)."
        case .easy(let c):
            return "libcurl \(version) refused \(operation): \(c)."
        case .multi(let c):
            return "libcurl \(version) failed in \(operation): \(c)."
        }
    }
}

/// Calls `curl_global_init` exactly once per process, before any handle is made.
package enum CurlGlobal {
    private static let initialised: Bool = {
        // Before libcurl initialises OpenSSL: no cleanup at exit, when other threads may still free
        // TLS connections (see `segget_crypto_without_atexit`).
        _ = segget_crypto_without_atexit()
        return curl_global_init(segget_curl_global_all()) == CURLE_OK
    }()
    /// Whether OpenSSL (libcurl's TLS) can still be used: false once it freed its global state,
    /// which it must not do while the process exits (see `initialised`).
    package static var tlsLibraryUsable: Bool { segget_crypto_usable() == 1 }
    package static func ensure() {
        precondition(initialised, "curl_global_init failed: libcurl cannot be used in this process")
    }

    /// The version of the libcurl this process runs with, such as "7.88.1".
    ///
    /// The corresponding C function is `curl_version_info`.
    package static var version: String { String(cString: segget_curl_version()) }
}

/// Header bytes are Latin-1 on the wire (RFC 9110 §5.5); decode them as such so nothing is lost.
package func decodingLatin1(_ bytes: UnsafeRawBufferPointer) -> String { decodedHeaderLine(bytes).text }

/// `decodingLatin1`, and whether the line was read as Latin-1 (its bytes are not UTF-8): then each
/// character of it stands for one byte, which a redirect's `Location` must be followed with.
package func decodedHeaderLine(_ bytes: UnsafeRawBufferPointer) -> (text: String, latin1: Bool) {
    // ASCII (nearly every header line) reads the same in both; `String(validating:)` took about
    // 1,000 instructions a line.
    let units = bytes.assumingMemoryBound(to: UInt8.self)
    if !units.contains(where: { $0 >= 0x80 }) { return (String(decoding: units, as: UTF8.self), false) }
    if let s = String(validating: bytes, as: UTF8.self) { return (s, false) }
    return (String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) })), true)
}

/// Resolves a `Location` value (absolute or relative) against the URL it came from, with libcurl's
/// URL parser. Nil when the result is not a valid URL.
///
/// The corresponding C functions are `curl_url_set` and `curl_url_get`.
package func resolveURL(_ reference: String, against base: String) -> String? {
    resolveURL(bytes: Array(reference.utf8), against: base)
}

/// `resolveURL` for a reference given as the bytes the server sent: bytes from 0x80 up and spaces
/// are percent-encoded as they are (`%E9` for a Latin-1 `é`, `%C3%A9` for a UTF-8 one), as curl
/// follows a redirect. Nil for a reference with a NUL byte.
package func resolveURL(bytes reference: [UInt8], against base: String) -> String? {
    guard !reference.contains(0), let h = curl_url() else { return nil }
    defer { curl_url_cleanup(h) }
    guard curl_url_set(h, CURLUPART_URL, base, 0) == CURLUE_OK else { return nil }
    // Allow any scheme here so that the redirect policy can name and refuse it.
    let flags = UInt32(CURLU_NON_SUPPORT_SCHEME) | UInt32(CURLU_URLENCODE) | UInt32(CURLU_ALLOW_SPACE)
    let set = (reference + [0]).withUnsafeBufferPointer { p in
        p.withMemoryRebound(to: CChar.self) { curl_url_set(h, CURLUPART_URL, $0.baseAddress, flags) }
    }
    guard set == CURLUE_OK else { return nil }
    var out: UnsafeMutablePointer<CChar>?
    guard curl_url_get(h, CURLUPART_URL, &out, 0) == CURLUE_OK, let out else { return nil }
    defer { curl_free(out) }
    return String(cString: out)
}

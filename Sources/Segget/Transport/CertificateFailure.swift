import SeggetCurl

/// What a failed transfer's handshakes showed, read from its handle where it failed.
struct HandshakeOutcome {
    /// Whether the connection was made (TCP and TLS), read where a transfer timed out: libcurl's one
    /// code for a timeout means `--connect-timeout` only when this is false.
    var connected = true
    /// OpenSSL's verdict on the server's certificate, read where it failed verification (see
    /// `EasyHandle.tlsVerifyResult()`).
    var verifyResult = 0
    /// The TLS alert about certificates the server ended the connection with, if that is how it failed.
    var alert: TLSAlert?

    mutating func read(after code: CurlCode, of easy: EasyHandle, url: String) {
        if code == .operationTimedOut { connected = easy.handshakeDone(tls: URLParts.isTLS(url)) }
        if code == .peerFailedVerification { verifyResult = easy.tlsVerifyResult() }
        alert = TLSAlert(code: code, detail: easy.failureDetail())
    }
}

extension Prober {
    /// A server's certificate that failed verification (`CURLE_PEER_FAILED_VERIFICATION`),
    /// authorities that could not be loaded (`CURLE_SSL_CACERT_BADFILE`), or a client certificate
    /// that could not be used (`CURLE_SSL_CERTPROBLEM`): exit 3 for the first, with why (OpenSSL's
    /// verdict, `verifyResult`) and what to do; the others are the user's files (`--ca-certificate`,
    /// `--certificate`, exit 2). `url` as `URLParts.shown` gives it.
    static func certificateError(_ code: CurlCode, url: ServerText, tls: TLSFiles, verifyResult: Int = 0) -> SeggetError {
        let caCertificate = tls.caCertificate
        if code == .caCertBadFile, let file = caCertificate {
            return SeggetError(.usage, "the certificates in \(file) (--ca-certificate) could not be loaded (\(code)); give a file of PEM certificates (-----BEGIN CERTIFICATE-----).", retryAdvice: .never)
        }
        if code == .clientCertificateProblem {
            let files = [tls.clientCertificate, tls.privateKey].compactMap { $0 }.joined(separator: " and ")
            return SeggetError(.usage, "the client certificate in \(files) (--certificate, --private-key) could not be used for \(url) (\(code)); give a PEM certificate with the unencrypted private key that belongs to it.", retryAdvice: .never)
        }
        if code == .caCertBadFile {
            return SeggetError(.network, "this machine's trusted TLS authorities could not be loaded (\(code)), so no certificate of \(url) can be verified; install them (apt-get install ca-certificates), or give the authority's certificate with --ca-certificate FILE.", retryAdvice: .never)
        }
        let (why, untrusted) = code == .peerFailedVerification ? certificateProblem(verifyResult) : ("\(code)", false)
        let against = caCertificate.map { " against the authorities in \($0) (--ca-certificate)" } ?? ""
        let advice =
            if caCertificate == nil && untrusted {
                "if a private or company authority signed it, \(NextStep.trustPrivateAuthority.cli)"
            } else if caCertificate != nil && untrusted {
                NextStep.checkAuthorityFile.cli
            } else {
                NextStep.serverMustFixCertificate.cli
            }
        var e = SeggetError(.network, "the TLS certificate of \(url) could not be verified\(against): \(why); \(advice).", retryAdvice: .never)
        e.untrustedCertificate = true
        return e
    }

    /// Plain words for OpenSSL's verification errors (`X509_V_ERR_…`) a server's certificate meets
    /// most, and whether the cause is an authority missing from those trusted (where
    /// `--ca-certificate` helps). libcurl 7.88 sets 1 when a handshake begins and reads OpenSSL's
    /// verdict only after its own check of the host name, so 1 (or 0) with a failed verification is
    /// that check (seen against nginx with a trusted certificate for another name).
    static func certificateProblem(_ verifyResult: Int) -> (words: String, untrusted: Bool) {
        switch verifyResult {
        case 0, 1: ("it does not name the host of the URL", false)
        case 2: ("the certificate of its issuer is missing (the server sent no chain to a trusted authority)", true)
        case 7: ("its signature is invalid", false)
        case 9: ("it is not valid yet (check this machine's clock)", false)
        case 10: ("it has expired", false)
        case 18: ("it is self-signed", true)
        case 19: ("its chain ends in a self-signed authority that is not trusted", true)
        case 20: ("no trusted authority signed it (unable to get the local issuer certificate)", true)
        case 21: ("its signature cannot be checked (the server sent no chain to a trusted authority)", true)
        case 23: ("it has been revoked", false)
        case 24: ("an authority in its chain may not sign certificates", false)
        case 26: ("it is not meant for a server", false)
        case 62: ("it does not name the host of the URL", false)
        default: ("OpenSSL's verification error \(verifyResult)", false)
        }
    }
}

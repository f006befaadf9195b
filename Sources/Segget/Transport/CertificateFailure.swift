import SeggetCurl

extension Prober {
    /// A server's certificate that failed verification (`CURLE_PEER_FAILED_VERIFICATION`), or
    /// authorities that could not be loaded (`CURLE_SSL_CACERT_BADFILE`): exit 3 for the first, with
    /// what to do; the second is the user's file (`--ca-certificate`, exit 2) unless none was given.
    /// `url` as `URLParts.shown` gives it.
    static func certificateError(_ code: CurlCode, url: ServerText, caCertificate: String?) -> SeggetError {
        if code == .caCertBadFile, let file = caCertificate {
            return SeggetError(.usage, "the certificates in \(file) (--ca-certificate) could not be loaded (\(code)); give a file of PEM certificates (-----BEGIN CERTIFICATE-----).", retryAdvice: .never)
        }
        let against = caCertificate.map { " against the authorities in \($0) (--ca-certificate)" } ?? ""
        let advice = caCertificate == nil
            ? "give the certificate of the authority that signed it with --ca-certificate FILE, or pass -k/--insecure only if you trust this server"
            : "check that the file holds the authority that signed this server's certificate, or pass -k/--insecure only if you trust this server"
        var e = SeggetError(.network, "the TLS certificate of \(url) could not be verified (\(code))\(against); \(advice).", retryAdvice: .never)
        e.untrustedCertificate = true
        return e
    }
}

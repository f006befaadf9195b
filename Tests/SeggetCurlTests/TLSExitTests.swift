import Glibc
import SeggetCurl
import Testing

/// OpenSSL must stay usable while the process exits. segget never joins its threads before `exit`:
/// a writer thread that drops the last reference to a finished batch's loop frees the loop's multi
/// handle, and with it its TLS connections, whenever it gets there. By default OpenSSL frees its
/// global state from an exit handler, and an `SSL_free` running beside that used a lock it had just
/// freed: a batch with `--http2` through a lossy link died with SIGSEGV (or glibc's
/// "malloc_consolidate(): unaligned fastbin chunk detected") in about one run in 400, after every
/// file was saved (Benchmarks/RESULTS.md, issue 38).
///
/// An exit handler registered before libcurl (and with it OpenSSL) is first used runs after
/// OpenSSL's own, if OpenSSL registered one: there it checks that OpenSSL is still usable (else the
/// process ends with status 3), then frees a multi handle whose cache keeps a TLS connection.
/// Meaningful only in a process of its own, where nothing used OpenSSL before:
/// `scripts/tests/servers.sh` runs it alone (`--filter TLSExitTests`) against its nginx over TLS
/// (`SEGGET_EXIT_URL`) and checks the exit status.
@Suite(.enabled(if: getenv("SEGGET_EXIT_URL") != nil, "needs a TLS server, in a process of its own (servers.sh)"))
struct TLSExitTests {
    /// What the exit handler frees: the multi handle (its cached connection) and the easy handle.
    nonisolated(unsafe) static var kept: [AnyObject] = []

    @Test func openSSLOutlivesTheExitHandlers() throws {
        atexit {
            if !CurlGlobal.tlsLibraryUsable { _exit(3) }
            TLSExitTests.kept.removeAll()
        }
        let m = MultiHandle()
        let e = EasyHandle()
        try e.setURL(String(cString: getenv("SEGGET_EXIT_URL")))
        try e.setNoSignal(true)
        try e.setVerifyTLS(false)
        try e.setRange("0-65535")
        #expect(try m.performAlone(e, cut: { false }) == .ok)
        #expect(m.trackedSockets == 1, "the TLS connection stays in the multi handle's cache")
        #expect(CurlGlobal.tlsLibraryUsable)
        Self.kept = [m, e]
    }
}

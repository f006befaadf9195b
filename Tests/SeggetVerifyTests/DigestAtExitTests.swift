import Glibc
import SeggetVerify
import Testing

/// OpenSSL must stay usable while the process exits when hashing is its first use too (`segget
/// verify`, which never starts libcurl): a hashing thread may free its digest context then, as a
/// writer freed a batch's TLS connections beside OpenSSL's exit-time cleanup and crashed the process
/// (issue 38; `TLSExitTests` has the whole story). An exit handler registered before OpenSSL is first
/// used runs after OpenSSL's own, if it registered one: there it checks that OpenSSL is still usable
/// (else the process ends with status 3) and frees a digester. Meaningful only in a process of its
/// own: `scripts/tests/servers.sh` runs it alone (`--filter DigestAtExitTests`, `SEGGET_EXIT_DIGEST=1`).
@Suite(.enabled(if: getenv("SEGGET_EXIT_DIGEST") != nil, "run alone by servers.sh, in a process of its own"))
struct DigestAtExitTests {
    nonisolated(unsafe) static var kept: [Digester] = []

    @Test func openSSLOutlivesTheExitHandlers() {
        atexit {
            if !Digester.openSSLUsable { _exit(3) }
            DigestAtExitTests.kept.removeAll()
        }
        let d = Digester(.sha256)
        d.update(Array("abc".utf8))
        #expect(Digester.openSSLUsable)
        Self.kept = [d]
    }
}

import Testing

@testable import SeggetRPC

/// The DNS-rebinding check: which `Host` values a loopback daemon answers.
@Suite struct HostPolicyTests {
    let policy = HostPolicy.loopback

    @Test(arguments: [
        "127.0.0.1:6800", "localhost:6800", "LOCALHOST:6800", "localhost.:6800", "127.1.2.3:6800", "127.0.0.001:6800",
        "[::1]:6800", "[0:0:0:0:0:0:0:1]:6800", "[::ffff:127.0.0.1]:6800", "[::ffff:7f00:1]:6800",
        // Another port or none: an SSH tunnel (ssh -L 6801:127.0.0.1:6800), a local port forward, port 80.
        "127.0.0.1", "localhost", "127.0.0.1:6801", "localhost:80", "[::1]", "LOCALHOST.:9",
    ])
    func loopbackNamesAreAnswered(host: String) {
        #expect(policy.admits(host))
    }

    @Test(arguments: [
        // Rebinding: a name the attacker's DNS controls.
        "evil.example:6800", "evil.example", "localhost.evil.example:6800", "127.0.0.1.evil.example:6800",
        "sub.localhost:6800", "localhostx:6800",
        // Loopback, but a port that cannot be.
        "[::1]:68000", "localhost:0",
        // Not loopback addresses.
        "0.0.0.0:6800", "10.0.0.1:6800", "128.0.0.1:6800", "[::2]:6800", "[::ffff:10.0.0.1]:6800",
        "[fe80::1%eth0]:6800",
        // Malformed.
        "", ":6800", "127.0.0.1:", "127.0.0.1:+6800", "127.0.0.1:6800x", "127.0.0.1:6800:1", "127.0.0:6800",
        "127.0.0.0.1:6800", "127.0.0.256:6800", "127.0.0.-1:6800", "127.0.0.1 :6800", " 127.0.0.1:6800", "[::1:6800",
        "[::1]x:6800", "[]:6800", "127.0.0.1\r\nX: y:6800", "localhost:6800\u{0}",
    ])
    func everythingElseIsRefused(host: String) {
        #expect(!policy.admits(host), "admitted \(host)")
    }

    @Test func missingHostIsRefusedOnLoopback() {
        #expect(!policy.admits(nil))
        #expect(HostPolicy.anyHost.admits(nil))
    }

    @Test func listeningOnAllInterfacesAnswersEveryHost() {
        #expect(HostPolicy.anyHost.admits("nas.lan:6800"))
        #expect(HostPolicy.anyHost.admits("evil.example"))
    }

    @Test func splitting() {
        #expect(HostPolicy.split("a:1")! == ("a", 1))
        #expect(HostPolicy.split("[::1]:65535")! == ("[::1]", 65535))
        #expect(HostPolicy.split("a")! == ("a", nil))
        #expect(HostPolicy.split("a:0") == nil)
        #expect(HostPolicy.split("a:65536") == nil)
        #expect(HostPolicy.split("a:000080") == nil)
    }

    @Test func printableEscapesWhatCouldForgeALogLine() {
        #expect(HostPolicy.printable("evil.example:6800") == "evil.example:6800")
        #expect(HostPolicy.printable("a\r\nb") == "a\\x0d\\x0ab")
        #expect(HostPolicy.printable("\u{1B}[2J") == "\\x1b[2J")
        #expect(HostPolicy.printable("\\") == "\\x5c")
        #expect(HostPolicy.printable("é") == "\\xc3\\xa9")
        #expect(HostPolicy.printable(String(repeating: "a", count: 200), limit: 10) == "aaaaaaaaaa...")
    }
}

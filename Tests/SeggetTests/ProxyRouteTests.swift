import SeggetCurl
import Testing

@testable import Segget

/// Which proxy a request takes (as libcurl picks it) and the messages that blame the proxy, not the
/// server, when the proxy is what failed.
@Suite struct ProxyRouteTests {
    func env(_ values: [String: String]) -> (String) -> String? { { values[$0] } }

    @Test func theProxyChosenForAURL() {
        let none = env([:])
        #expect(ProxyRoute.proxy(for: "http://a.example/f", explicit: nil, environment: none) == nil)
        #expect(ProxyRoute.proxy(for: "http://a.example/f", explicit: "http://p:3128", environment: none) == "http://p:3128")
        #expect(ProxyRoute.proxy(for: "http://a.example/f", explicit: "", environment: env(["http_proxy": "http://e:1"])) == nil, "--proxy '' is no proxy, as curl's")
        // An @ inside the credentials, not written %40: libcurl would look for a host that is not there.
        #expect(ProxyRoute.problem("http://bob:p@ss:w0rd@127.0.0.1:3128")?.contains("%40") == true)
        #expect(ProxyRoute.problem("http://bob:p%40ss@127.0.0.1:3128") == nil)
        #expect(Prober.networkError(.urlMalformed, url: "http://bob:p@ss@h.example/f").message.contains("as %40, %3A and %25"))
        #expect(!Prober.networkError(.urlMalformed, url: "http://bob:p@ss@h.example/f").message.contains("p@ss"))
        // A proxy written without a scheme is libcurl's http one: its credentials are found, and hidden.
        let bare = ProxyRoute.proxy(for: "http://a.example/f", explicit: nil, environment: env(["http_proxy": "user:secret@h:1"]))
        #expect(bare == "http://user:secret@h:1")
        #expect(!Prober.networkError(.couldNotConnect, url: "http://a.example/f", proxy: bare).message.contains("secret"))
        #expect(ProxyRoute.problem("bob:p@ss@h:1") != nil)
        let vars = env(["http_proxy": "http://h:1", "HTTPS_PROXY": "http://s:2", "ALL_PROXY": "socks5h://all:3"])
        #expect(ProxyRoute.proxy(for: "http://a.example/f", explicit: nil, environment: vars) == "http://h:1")
        #expect(ProxyRoute.proxy(for: "https://a.example/f", explicit: nil, environment: vars) == "http://s:2")
        // libcurl reads no HTTP_PROXY (in upper case) for http: a CGI program's request header.
        #expect(ProxyRoute.proxy(for: "http://a.example/f", explicit: nil, environment: env(["HTTP_PROXY": "http://x:1"])) == nil)
        #expect(ProxyRoute.proxy(for: "http://a.example/f", explicit: nil, environment: env(["ALL_PROXY": "socks5://x:1"])) == "socks5://x:1")
        // no_proxy wins over every source, --proxy included.
        let bypass = env(["no_proxy": "localhost, .example.org,10.0.0.0/8", "http_proxy": "http://h:1"])
        #expect(ProxyRoute.proxy(for: "http://b.example.org/f", explicit: nil, environment: bypass) == nil)
        #expect(ProxyRoute.proxy(for: "http://example.org/f", explicit: "http://p:1", environment: bypass) == nil)
        #expect(ProxyRoute.proxy(for: "http://10.1.2.3/f", explicit: nil, environment: bypass) == nil)
        #expect(ProxyRoute.proxy(for: "http://notexample.org/f", explicit: nil, environment: bypass) == "http://h:1")
        #expect(ProxyRoute.proxy(for: "http://LOCALHOST:80/f", explicit: nil, environment: bypass) == nil)
        #expect(ProxyRoute.proxy(for: "http://[::1]:80/f", explicit: "http://p:1", environment: env(["NO_PROXY": "::1"])) == nil)
        #expect(ProxyRoute.proxy(for: "http://x/f", explicit: "http://p:1", environment: env(["no_proxy": "*"])) == nil)
    }

    /// `no_proxy` as libcurl 7.88 reads it: each row was checked with curl 7.88.1 against a server on
    /// 127.0.0.1 (or ::1) through `--proxy http://127.0.0.1:1` (a match reached the server).
    @Test(arguments: [
        ("127.0.0.1", "127.0.0.0/8", true), ("127.0.0.1", "127.0.0.1/32", true), ("127.0.0.1", "127.0.0.1/0", true),
        ("127.0.0.1", "127.0.0.2/0", false), ("127.0.0.1", "0.0.0.0/0", false), ("127.0.0.1", "127.1.0.0/16", false),
        ("127.0.0.1", "127.0.0.1/08", true), ("127.0.0.1", "127.0.0.1/abc", false), ("127.0.0.1", "127.0.0.1/33", false),
        ("127.0.0.1", "127.0.0.0/8x", false), ("127.0.0.1", "127.0.0.1:8080", false), ("127.0.0.1", "127.0.0.1", true),
        ("127.0.0.1", " 127.0.0.1 ", true), ("127.0.0.1", ".0.0.1", false), ("127.0.0.1", "0.0.1", false),
        ("127.0.0.1", "127.0.0.1.", false), ("127.0.0.1", "127.0.0.001", false), ("127.0.0.1", "127.0.0.*", false),
        ("127.0.0.1", "localhost", false), ("127.0.0.1", "*", true), ("127.0.0.1", "foo,*", false),
        ("localhost", "localhost:18777", false), ("localhost", "localhost", true), ("localhost", ".localhost", true),
        ("localhost", "LOCALHOST", true), ("localhost", "localhost.", true), ("localhost", "*.localhost", false),
        ("localhost", "127.0.0.1/8", false), ("localhost", "foo,*", false),
        ("[::1]", "::1", true), ("[::1]", "0:0::1", false), ("[::1]", "::1/128", false), ("[::1]", "::/0", false), ("[::1]", "[::1]", false),
        ("localhost", "x.test localhost", true), ("localhost", "x.test,,localhost", true), ("localhost", "localhost x.test", true),
        ("127.0.0.1", "10.0.0.0/8,127.0.0.0/30", true), ("127.0.0.1", "127.0.0.0/31", true),
        // Beyond what was checked: a host in a domain, and blocks of other sizes.
        ("a.example.org", "x.test, example.org", true), ("notexample.org", "example.org", false),
        ("10.20.30.40", "192.168.0.0/16,10.20.0.0/16", true), ("10.20.30.40", "10.20.30.42/31", false), ("10.20.30.40", "10.20.30.41/31", true), ("10.20.30.40", "10.20.30.41/30", true),
    ])
    func noProxyAsLibcurlReadsIt(_ host: String, _ list: String, _ bypassed: Bool) {
        #expect(ProxyRoute.bypasses(host: host, list: list) == bypassed, "\(host) in '\(list)'")
    }

    @Test func proxySchemes() {
        for ok in ["", "proxy:3128", "http://p:1", "HTTPS://p:1", "socks4://p", "socks4a://p", "socks5://p", "socks5h://u:p@p:1080"] {
            #expect(ProxyRoute.problem(ok) == nil, "\(ok)")
        }
        #expect(ProxyRoute.problem("socks9://x") == "'socks9' is not a proxy scheme; use one of http, https, socks4, socks4a, socks5, socks5h (no scheme: http).")
        #expect(ProxyRoute.problem("ftp://x") != nil)
    }

    func head(_ status: Int) -> ResponseHead {
        var h = ResponseHead()
        h.append(line: Substring("HTTP/1.1 \(status) X\r\n"))
        h.append(line: "\r\n")
        return h
    }

    @Test func failuresThatAreTheProxysNameIt() {
        let url = "https://origin.example/f"
        let p = "http://user:secret@proxy.example:3128"
        let down = Prober.networkError(.couldNotConnect, url: url, proxy: p)
        #expect(down.message.hasPrefix("could not connect to the proxy http://user:***@proxy.example:3128 (for https://origin.example/f)") || down.message.contains("proxy.example:3128 (for https://origin.example/f)"), "\(down.message)")
        #expect(!down.message.contains("secret"))
        #expect(down.kind == .network)
        let unresolved = Prober.networkError(.couldNotResolveProxy, url: url, proxy: p)
        #expect(unresolved.message.hasPrefix("could not resolve the host of the proxy"), "\(unresolved.message)")
        let auth = Prober.networkError(.receiveError, url: url, proxy: p, tunnelStatus: 407)
        #expect(auth.message.contains("refused the user name and password in its URL (HTTP 407)") && auth.httpStatus == 407, "\(auth.message)")
        #expect(!auth.message.contains("secret"))
        let noAuth = Prober.networkError(.receiveError, url: url, proxy: "http://proxy.example:3128", tunnelStatus: 407)
        #expect(noAuth.message.contains("wants credentials (HTTP 407)") && noAuth.httpStatus == 407, "\(noAuth.message)")
        // A plain-http request whose 407 is the proxy's answer: the same difference.
        #expect(Prober.statusError(407, url: "http://o.example/f", proxy: p).message.contains("user name and password in the proxy URL were refused"))
        #expect(Prober.statusError(407, url: "http://o.example/f", proxy: "http://proxy.example:3128").message.contains("the proxy wants credentials"))
        // A SOCKS proxy that refused the credentials, or wanted some: said, and never retried.
        let rejected = Prober.networkError(
            .proxyFailure, url: url, proxy: "socks5://bob:wrong@s:1080", proxyDetail: "User was rejected by the SOCKS5 server (1 2).")
        #expect(rejected.message.contains("user name and password in the proxy URL were refused") && rejected.retryAdvice == .never, "\(rejected.message)")
        #expect(!rejected.message.contains("wrong"))
        let wanted = Prober.networkError(
            .proxyFailure, url: url, proxy: "socks5://s:1080", proxyDetail: "No authentication method was acceptable.")
        #expect(wanted.message.contains("it wants a user name and password") && wanted.retryAdvice == .never, "\(wanted.message)")
        // The tunnel's refusal is its status (the proxy's head no longer reaches the parser), whatever
        // libcurl's code; a head is the server's, never taken for the proxy's refusal.
        let tunnel = Prober.networkError(.receiveError, url: url, proxy: p, tunnelStatus: 502)
        #expect(tunnel.message.contains("refused the tunnel to https://origin.example/f with HTTP 502"), "\(tunnel.message)")
        let otherCode = Prober.networkError(.couldNotConnect, url: url, proxy: p, tunnelStatus: 403)
        #expect(otherCode.message.contains("refused the tunnel to https://origin.example/f with HTTP 403"), "\(otherCode.message)")
        let serversHead = Prober.networkError(.receiveError, url: url, head: head(302), proxy: p)
        #expect(!serversHead.message.contains("refused the tunnel"), "\(serversHead.message)")
        let socks = Prober.networkError(.proxyFailure, url: url, proxy: "socks5h://s:1080")
        #expect(socks.message.hasPrefix("the proxy socks5h://s:1080 failed to reach https://origin.example/f"), "\(socks.message)")
        // Without a proxy, or a failure that is not the proxy's: the messages about the server.
        #expect(Prober.networkError(.couldNotConnect, url: url).message.hasPrefix("could not connect to https://origin.example/f"))
        #expect(Prober.networkError(.receiveError, url: url, proxy: p).message.hasPrefix("the request to https://origin.example/f failed"))
    }

    /// A plain-http URL's error status through an HTTP proxy may be the proxy's own answer (a 502 when
    /// it could not reach the server): the message names the proxy. An https URL's answers come through
    /// a tunnel, from the server; a SOCKS proxy only relays.
    @Test func anErrorStatusThroughAnHTTPProxyNamesIt() {
        let p = "http://user:secret@proxy.example:3128"
        #expect(ProxyRoute.answeringProxy(for: "http://o.example/f", proxy: p) == p)
        #expect(ProxyRoute.answeringProxy(for: "http://o.example/f", proxy: "proxy.example:3128") == "proxy.example:3128")
        #expect(ProxyRoute.answeringProxy(for: "https://o.example/f", proxy: p) == nil)
        #expect(ProxyRoute.answeringProxy(for: "http://o.example/f", proxy: "socks5h://s:1080") == nil)
        #expect(ProxyRoute.answeringProxy(for: "http://o.example/f", proxy: nil) == nil)
        let e = Prober.statusError(502, url: "http://o.example/f", proxy: p)
        #expect(e.message == "http://o.example/f answered HTTP 502 through the proxy http://proxy.example:3128, which may have given that answer itself; the server, or the proxy on its way to it, failed; try again later, or without the proxy.", "\(e.message)")
        #expect(e.httpStatus == 502 && e.kind == .httpStatus)
        #expect(!Prober.statusError(404, url: "http://o.example/f", proxy: p).message.contains("secret"))
        #expect(Prober.statusError(502, url: "http://o.example/f").message == "http://o.example/f answered HTTP 502; the server failed; try again later.")
    }

    /// An answer without a file that is no refusal is not called one (a 204 said "the server refused
    /// the request"); a refusal still is.
    @Test func answersWithoutAFileAreNotCalledRefusals() {
        let u = "http://o.example/f"
        #expect(Prober.statusError(204, url: u).message == "http://o.example/f answered HTTP 204; the server has no content at this URL; check the URL.")
        #expect(Prober.statusError(304, url: u).message.contains("'not modified' where the file's bytes were asked for"))
        #expect(Prober.statusError(202, url: u).message.contains("has no file to send yet"))
        #expect(Prober.statusError(302, url: u).message.contains("a redirect where the file's bytes were asked for"))
        for status in [202, 204, 205, 299, 300, 304, 399] {
            #expect(!Prober.statusError(status, url: u).message.contains("refused"), "\(status)")
        }
        #expect(Prober.statusError(418, url: u).message.contains("the server refused the request"))
    }
}

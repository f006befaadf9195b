/// Which proxy, if any, a request to a URL goes through, worked out as libcurl does, so that a failure
/// can name the proxy rather than blame the server behind it: `--proxy` (the daemon's `all-proxy`),
/// else `http_proxy` for http, `https_proxy` or `HTTPS_PROXY` for https, else `all_proxy` or `ALL_PROXY`;
/// none for a host `no_proxy` (`NO_PROXY`) names. Pure: the environment is a parameter.
enum ProxyRoute {
    /// The schemes libcurl takes in a proxy URL; a proxy given without one is HTTP.
    static let schemes: Set<String> = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]

    /// Why `proxy` is not a proxy URL segget can use; nil when it is one (or empty: no proxy).
    static func problem(_ proxy: String) -> String? {
        // libcurl reads the host after the first @, and would look for one that does not exist.
        if URLAuthority.atSignsBeforeHost(withScheme(proxy)) > 1 {
            return "its user name or password holds an @; \(percentEncodeAdvice)."
        }
        guard let scheme = scheme(of: proxy) else { return nil }
        if schemes.contains(scheme) { return nil }
        return "'\(scheme)' is not a proxy scheme; use one of \(schemes.sorted().joined(separator: ", ")) (no scheme: http)."
    }

    /// Whether `proxy` speaks HTTP to its clients (an `http` or `https` proxy, or one given without a
    /// scheme), so that a plain-http URL's answer may be the proxy's own; a SOCKS proxy only relays.
    static func speaksHTTP(_ proxy: String) -> Bool {
        guard let scheme = scheme(of: proxy) else { return true }
        return scheme == "http" || scheme == "https"
    }

    /// How to write credentials that hold URL delimiters.
    static let percentEncodeAdvice = "write @, : and % inside a user name or password as %40, %3A and %25"

    /// `proxy` with the scheme libcurl gives one written without (`http`), so that its credentials
    /// are found (and hidden) as in any URL: `user:secret@proxy:3128` is `http://user:secret@proxy:3128`.
    static func withScheme(_ proxy: String) -> String {
        schemeSeparator(in: proxy) == nil ? "http://" + proxy : proxy
    }

    /// Whether `proxy` is an https proxy: one the client speaks TLS to, before any tunnel.
    static func isTLS(_ proxy: String) -> Bool { scheme(of: proxy) == "https" }

    /// The scheme a proxy URL gives, in lower case; nil when it gives none.
    private static func scheme(of proxy: String) -> String? {
        schemeSeparator(in: proxy).map { proxy[..<$0.lowerBound].lowercased() }
    }

    /// The proxy that may answer in the server's stead for `url`: an HTTP proxy carrying a plain-http
    /// request (an https URL's answers come through a tunnel, from the server); nil otherwise.
    static func answeringProxy(for url: String, proxy: String?) -> String? {
        guard let proxy, URLParts(url)?.scheme == "http", speaksHTTP(proxy) else { return nil }
        return proxy
    }

    /// The proxy a request to `url` goes through; nil when none. An `explicit` proxy that is empty
    /// is none, whatever the environment names (curl's `--proxy ""`).
    static func proxy(for url: String, explicit: String?, environment: (String) -> String?) -> String? {
        guard let parts = URLParts(url) else { return nil }
        func set(_ name: String) -> String? { environment(name).flatMap { $0.isEmpty ? nil : $0 } }
        let chosen: String?
        if let explicit {
            if explicit.isEmpty { return nil }
            chosen = explicit
        } else {
            let byScheme = parts.scheme == "http" ? set("http_proxy") : set("https_proxy") ?? set("HTTPS_PROXY")
            chosen = byScheme ?? set("all_proxy") ?? set("ALL_PROXY")
        }
        guard let chosen else { return nil }
        let bypass = set("no_proxy") ?? set("NO_PROXY")
        if let bypass, bypasses(host: parts.host, list: bypass) { return nil }
        return withScheme(chosen)
    }

    /// Whether `no_proxy`'s `list` names `host`, as libcurl 7.88 reads it (checked against curl
    /// 7.88.1 here): the list `*` alone names every host. Tokens are separated by commas and blanks.
    /// A host name is named by itself or a domain it is in (`example.org` and `.example.org` both
    /// name `a.example.org`; trailing dots ignored, case too). An IPv4 host is named by its address
    /// or a CIDR block holding it (`10.0.0.0/8`; `/0` and `/32` mean the address alone). An IPv6 host
    /// only by its text, as written in the URL (without brackets). A port in a token never matches.
    static func bypasses(host: String, list: String) -> Bool {
        if list == "*" { return true }
        var name = Substring(host.lowercased())
        let ipv6 = name.hasPrefix("[") && name.hasSuffix("]")
        if ipv6 { name = name.dropFirst().dropLast() }
        let ipv4 = ipv6 ? nil : IPv4(name)
        if !ipv6, ipv4 == nil, name.hasSuffix(".") { name = name.dropLast() }
        for var token in tokens(list) {
            token = Substring(token.lowercased())
            if let ipv4 {
                if ipv4.isIn(token) { return true }
            } else if ipv6 {
                if token == name { return true }
            } else {
                if token.hasSuffix(".") { token = token.dropLast() }
                if token.hasPrefix(".") { token = token.dropFirst() }
                if token.isEmpty { continue }
                if name == token || name.hasSuffix("." + token) { return true }
            }
        }
        return false
    }

    /// `list`'s tokens, between commas and blanks (curl 7.88.1 took `x.test localhost` for two).
    private static func tokens(_ list: String) -> [Substring] {
        list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
    }
}

/// An IPv4 address in dotted decimal (four numbers 0-255, no leading zeros, as `inet_pton` takes
/// it), for `no_proxy`'s CIDR blocks.
struct IPv4: Equatable {
    let value: UInt32

    init?(_ text: Substring) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var v: UInt32 = 0
        for p in parts {
            guard !p.isEmpty, p.count <= 3, p.allSatisfy(\.isASCII), p.allSatisfy(\.isNumber), p == "0" || !p.hasPrefix("0"),
                let n = UInt32(p), n <= 255
            else { return nil }
            v = v << 8 | n
        }
        value = v
    }

    /// Whether `token` (`A.B.C.D` or `A.B.C.D/BITS`) names this address.
    func isIn(_ token: Substring) -> Bool {
        let pieces = token.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let network = IPv4(pieces[0]) else { return false }
        guard pieces.count == 2 else { return network == self }
        let digits = pieces[1]
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let bits = Int(digits), bits <= 32 else { return false }
        if bits == 0 || bits == 32 { return network == self }
        let mask = UInt32.max << (32 - bits)
        return (network.value ^ value) & mask == 0
    }
}

/// Which proxy, if any, a request to a URL goes through, worked out as libcurl does, so that a failure
/// can name the proxy rather than blame the server behind it: `--proxy` (the daemon's `all-proxy`),
/// else `http_proxy` for http, `https_proxy` or `HTTPS_PROXY` for https, else `all_proxy` or `ALL_PROXY`;
/// none for a host `no_proxy` (`NO_PROXY`) names. Pure: the environment is a parameter.
enum ProxyRoute {
    /// The schemes libcurl takes in a proxy URL; a proxy given without one is HTTP.
    static let schemes: Set<String> = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]

    /// Why `proxy` is not a proxy URL segget can use; nil when it is one (or empty: no proxy).
    static func problem(_ proxy: String) -> String? {
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

    /// The proxy a request to `url` goes through; nil when none.
    static func proxy(for url: String, explicit: String?, environment: (String) -> String?) -> String? {
        guard let parts = URLParts(url) else { return nil }
        func set(_ name: String) -> String? { environment(name).flatMap { $0.isEmpty ? nil : $0 } }
        let chosen: String?
        if let explicit, !explicit.isEmpty {
            chosen = explicit
        } else {
            let byScheme = parts.scheme == "http" ? set("http_proxy") : set("https_proxy") ?? set("HTTPS_PROXY")
            chosen = byScheme ?? set("all_proxy") ?? set("ALL_PROXY")
        }
        guard let chosen else { return nil }
        let bypass = set("no_proxy") ?? set("NO_PROXY")
        if let bypass, bypasses(host: parts.host, list: bypass) { return nil }
        return chosen
    }

    /// Whether `no_proxy`'s comma-separated `list` names `host`: `*`, the host itself, or a domain the
    /// host is in (`example.org` and `.example.org` both cover `a.example.org`). Ports are ignored.
    static func bypasses(host: String, list: String) -> Bool {
        var host = Substring(host.lowercased())
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        for raw in list.split(separator: ",") {
            var entry = raw.trimmingSpacesAndTabs().lowercased()
            if entry == "*" { return true }
            if entry.hasPrefix("[") { entry = String(entry.dropFirst().prefix { $0 != "]" }) }
            else if let colon = entry.lastIndex(of: ":"), entry.filter({ $0 == ":" }).count == 1 {
                entry = String(entry[..<colon])
            }
            if entry.hasPrefix(".") { entry.removeFirst() }
            if entry.isEmpty { continue }
            if host == entry || host.hasSuffix("." + entry) { return true }
        }
        return false
    }
}

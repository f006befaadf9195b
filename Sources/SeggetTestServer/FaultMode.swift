/// How the server (mis)behaves for a request, chosen by the first path segment: `/MODE/NAME?params`.
/// `/NAME` is `.normal`.
public enum FaultMode: String, CaseIterable, Sendable {
    case normal
    case noranges
    case range200
    case chunked
    case closeDelimited = "close-delimited"
    case redirect
    case status
    case zeroonly
    case wrongrange
    case short
    case long
    case mid200
    case changing
    case encoding
    case always416
    case stall
    case drop
    case digest
    case disposition
}

/// A request resolved to a mode, a resource name and the decoded query parameters.
struct Route {
    var mode: FaultMode
    var name: String
    var params: [String: String]

    func int(_ key: String) -> Int64? { params[key].flatMap { Int64($0) } }
    func flag(_ key: String) -> Bool { params[key].map { $0 == "1" || $0 == "true" || $0 == "yes" } ?? false }

    /// The pacing for a connection from `remotePort`: `slowrate` when the port's last decimal digit is
    /// in `slowports`, else `rate`; nil means unthrottled.
    func rate(forRemotePort remotePort: Int) -> Int64? {
        if let ports = params["slowports"], let slow = params["slowrate"].flatMap(URLText.parseRate) {
            let digit = Character(String(remotePort % 10))
            if ports.contains(digit) { return slow }
        }
        return params["rate"].flatMap(URLText.parseRate)
    }

    /// Resolves `path` against the registered names: an exact name is the normal mode, otherwise the
    /// first segment names the mode. Nil if neither fits.
    static func resolve(path: String, query: String, isRegistered: (String) -> Bool) -> Route? {
        let params = URLText.parseQuery(query)
        let trimmed = String(path.drop { $0 == "/" })
        if isRegistered(trimmed) { return Route(mode: .normal, name: trimmed, params: params) }
        guard let slash = trimmed.firstIndex(of: "/"),
            let mode = FaultMode(rawValue: String(trimmed[..<slash]))
        else { return nil }
        let name = String(trimmed[trimmed.index(after: slash)...])
        guard isRegistered(name) else { return nil }
        return Route(mode: mode, name: name, params: params)
    }
}

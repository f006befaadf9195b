/// Whether a partial download that an earlier run made from another URL may be continued from this
/// one, as a value (`PartialDownload.resume` acts on it).
///
/// An equal length and equal validators do not show equal bytes across two URLs: nginx, h2o, Apache
/// and Caddy make their `ETag` from the file's modification time and size alone, so two different
/// files of one size written in the same second (two builds, two folders of one upload) answer
/// alike, and a partial download of one continued from the other mixes them. Only these show that
/// the other URL names the same file, each for its own reason:
/// - the same resource: host, port and path agree, and only the query (a signed link's signature and
///   expiry), credentials, fragment or scheme differ;
/// - the user said so: the journal's URL is one of this download's URLs (`--mirror`, a Metalink's,
///   a daemon task's URIs);
/// - the bytes are checked: a digest (`--checksum`, a Metalink's) or piece hashes catch a mix
///   before the file is published;
/// - a renewed link, from the user's `--refresh-command` (or the daemon's client), whose answer was
///   checked against the expired one.
/// Anything else is `unproven`: the partial download is left as it is, and the download refused.
enum OtherURLResume: Equatable, Sendable {
    case sameURL
    case sameResource
    case declaredSameFile
    case bytesChecked
    case renewedLink
    case unproven

    /// The judgment for a journal that records `journalURL` (credentials redacted, as journals keep
    /// it), continued from `url`, whose download also names `declared` as its file's URLs.
    static func judge(
        journalURL: String, url: String, declared: [String], bytesChecked: Bool, renewed: Bool
    ) -> OtherURLResume {
        let redacted = URLParts.redactingCredentials(url)
        if journalURL == redacted { return .sameURL }
        if renewed { return .renewedLink }
        if let a = ResourceKey(journalURL), let b = ResourceKey(redacted), a == b { return .sameResource }
        if declared.contains(where: { URLParts.redactingCredentials($0) == journalURL }) { return .declaredSameFile }
        if bytesChecked { return .bytesChecked }
        return .unproven
    }

    /// What the notice of a continued download says about why (nil where none is owed).
    var reason: String? {
        switch self {
        case .sameURL, .renewedLink, .unproven: nil
        case .sameResource: "the same path on the same server, so a fresh link to the same file"
        case .declaredSameFile: "one of this download's own URLs"
        case .bytesChecked: "the checksum checks every byte before the file is kept"
        }
    }
}

/// The part of an http(s) URL that names the resource on its server: host (lower case), port as
/// written, and path, without scheme, credentials, query or fragment. Two URLs with one key are
/// one resource; a signed link's fresh signature changes only its query.
struct ResourceKey: Equatable, Sendable {
    let host: String
    let port: String
    let path: String

    init?(_ url: String) {
        guard let cut = URLAuthority(url) else { return nil }
        let pathEnd = cut.rest.firstIndex(where: { $0 == "?" || $0 == "#" }) ?? cut.rest.endIndex
        let path = cut.rest[..<pathEnd]
        self.host = cut.host.lowercased()
        self.port = String(cut.port)
        self.path = path.isEmpty ? "/" : String(path)
    }

    /// What sets URL `b` apart from `a` as a resource, in words for a message: its server (host
    /// name as written: `localhost` and `127.0.0.1` are not compared as one), its port, or its path.
    static func difference(_ a: String, _ b: String) -> String {
        guard let ka = ResourceKey(a), let kb = ResourceKey(b) else { return "it is another resource" }
        if ka.host != kb.host { return "its host differs" }
        if ka.port != kb.port { return "its port differs" }
        if ka.path != kb.path { return "its path differs" }
        return "it names the same resource"
    }
}

/// What a download knows that shows another URL serves its file (`OtherURLResume.judge`): the URLs
/// its user named for the file (its own, `--mirror`s, a Metalink's), and whether a digest or piece
/// hashes check the bytes before the file is kept.
struct SameFileEvidence: Sendable {
    var urls: [String] = []
    var bytesChecked = false
}

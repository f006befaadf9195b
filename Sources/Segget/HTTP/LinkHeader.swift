/// The `Link` header fields of an answer (RFC 8288), as Metalink/HTTP (RFC 6249) uses them:
/// `<https://mirror/f.iso>; rel=duplicate; pri=1; geo=de` names another copy of the file, and
/// `<https://origin/f.iso.meta4>; rel=describedby; type="application/metalink4+xml"` its Metalink.
/// Parsing is forgiving of what it does not need (unknown parameters, a malformed member is
/// skipped) and strict about what it takes: a target between `<` and `>`, parameters as tokens or
/// quoted strings.
struct LinkHeader: Equatable {
    struct Link: Equatable {
        /// The target as written (a URI reference; resolve it against the request's URL).
        var target: String
        /// The relation types, lower case.
        var rel: [String]
        /// `pri`: 1 (most preferred) upwards; nil when absent or not a positive number.
        var priority: Int?
        /// `geo`: the ISO 3166 country code, lower case.
        var location: String?
        /// `type`: the media type, lower case.
        var type: String?
    }

    var links: [Link]

    /// Reads the combined field value (several `Link` lines joined with commas).
    init(_ value: String) {
        var links: [Link] = []
        let chars = Array(value.unicodeScalars)
        var i = 0
        func skipBlanks() { while i < chars.count, chars[i] == " " || chars[i] == "\t" { i += 1 } }
        func skipToNextMember() {
            var quoted = false
            while i < chars.count {
                if chars[i] == "\"" { quoted.toggle() }
                if chars[i] == "\\" && quoted { i += 1 }
                if chars[i] == "," && !quoted { break }
                i += 1
            }
        }
        while i < chars.count {
            skipBlanks()
            if i < chars.count, chars[i] == "," {
                i += 1
                continue
            }
            guard i < chars.count, chars[i] == "<", let close = chars[i...].firstIndex(of: ">") else {
                skipToNextMember()
                continue
            }
            var link = Link(target: String(String.UnicodeScalarView(chars[(i + 1)..<close])), rel: [])
            i = close + 1
            var ok = true
            while true {
                skipBlanks()
                guard i < chars.count, chars[i] == ";" else { break }
                i += 1
                skipBlanks()
                var name = ""
                while i < chars.count, chars[i] != "=", chars[i] != ";", chars[i] != ",", chars[i] != " " {
                    name.unicodeScalars.append(chars[i])
                    i += 1
                }
                skipBlanks()
                var parameter = ""
                if i < chars.count, chars[i] == "=" {
                    i += 1
                    skipBlanks()
                    if i < chars.count, chars[i] == "\"" {
                        i += 1
                        var closed = false
                        while i < chars.count {
                            if chars[i] == "\\", i + 1 < chars.count {
                                parameter.unicodeScalars.append(chars[i + 1])
                                i += 2
                                continue
                            }
                            if chars[i] == "\"" {
                                closed = true
                                i += 1
                                break
                            }
                            parameter.unicodeScalars.append(chars[i])
                            i += 1
                        }
                        if !closed { ok = false }
                    } else {
                        while i < chars.count, chars[i] != ";", chars[i] != ",", chars[i] != " ", chars[i] != "\t" {
                            parameter.unicodeScalars.append(chars[i])
                            i += 1
                        }
                    }
                }
                switch name.lowercased() {
                case "rel":
                    // The first `rel` counts (RFC 8288 section 3.3).
                    if link.rel.isEmpty { link.rel = parameter.lowercased().split(separator: " ").map(String.init) }
                case "pri":
                    if let n = Int(parameter), n > 0 { link.priority = n }
                case "geo":
                    link.location = parameter.isEmpty ? nil : parameter.lowercased()
                case "type":
                    link.type = parameter.lowercased()
                default:
                    break
                }
            }
            skipBlanks()
            if i < chars.count, chars[i] != "," {
                ok = false
                skipToNextMember()
            }
            if ok { links.append(link) }
        }
        self.links = links
    }

    /// The other copies (`rel=duplicate`), most preferred first: those in `location` first, then
    /// by `pri` (none: last), then in the order given.
    func duplicates(preferring location: String? = nil) -> [Link] {
        let wanted = location?.lowercased()
        return links.enumerated().filter { $0.element.rel.contains("duplicate") }.sorted { x, y in
            let la = wanted != nil && x.element.location == wanted, lb = wanted != nil && y.element.location == wanted
            if la != lb { return la }
            let (pa, pb) = (x.element.priority ?? Int.max, y.element.priority ?? Int.max)
            if pa != pb { return pa < pb }
            return x.offset < y.offset
        }.map(\.element)
    }

    /// The Metalink that describes the file (`rel=describedby` with the Metalink 4 media type).
    var metalink: Link? {
        links.first { $0.rel.contains("describedby") && $0.type == "application/metalink4+xml" }
    }
}

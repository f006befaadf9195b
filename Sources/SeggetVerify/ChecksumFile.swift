/// Reads sha256sum / md5sum style files ("HEX  name", "HEX *name", BSD "SHA256 (name) = HEX"), picks the line for
/// `fileName` (basename match); algorithm from hex length or BSD tag.
///
/// Also understood: GNU's escaped names (a line starting with `\`), OpenSSL 3's `SHA2-256(name)= HEX`,
/// CRLF line ends, `#` comments, blank lines, and a file holding a single bare digest with no name (as many
/// sites publish `file.iso.sha256`). A line that names the file exactly wins over one whose basename matches;
/// when both a SHA-256 and an MD5 line match, SHA-256 wins. Lines that cannot be read are skipped.
public enum ChecksumFile {
    /// Finds the expected digest for `forFileName` in the text of a checksum file.
    ///
    /// Throws `ChecksumSpecError` when no usable line names the file, or when matching lines disagree.
    public static func expectedDigest(in contents: String, forFileName fileName: String) throws -> ExpectedDigest {
        var entries: [Entry] = []
        var unsupported: [String] = []
        for line in contents.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            switch parse(line: line) {
            case .entry(let entry): entries.append(entry)
            case .unsupportedAlgorithm(let tag): unsupported.append(tag)
            case .ignored: break
            }
        }

        // A lone nameless digest is the whole answer; there is nothing to match it against.
        if entries.count == 1, let only = entries.first, only.name == nil {
            return only.digest
        }

        let wantedBase = basename(fileName)
        let exact = entries.filter { $0.name == fileName }
        let candidates = exact.isEmpty ? entries.filter { $0.name.map(basename) == wantedBase } : exact
        guard !candidates.isEmpty else {
            if entries.isEmpty {
                let reason =
                    unsupported.isEmpty
                    ? "no checksum lines"
                    : "only \(Set(unsupported).sorted().joined(separator: ", ")) checksums, which segget cannot check"
                throw ChecksumSpecError(
                    "The checksum file has \(reason); it should contain lines such as “HEX  \(wantedBase)”."
                )
            }
            let listed = entries.compactMap(\.name).prefix(5).joined(separator: ", ")
            throw ChecksumSpecError(
                "The checksum file has no line for “\(wantedBase)”; it lists \(listed)"
                    + (entries.count > 5 ? " and \(entries.count - 5) more." : ".")
            )
        }

        for algorithm in DigestAlgorithm.checkable {
            let digests = candidates.filter { $0.digest.algorithm == algorithm }.map(\.digest)
            guard let first = digests.first else { continue }
            guard digests.allSatisfy({ $0 == first }) else {
                throw ChecksumSpecError(
                    "The checksum file has \(digests.count) different \(algorithm.displayName) lines for "
                        + "“\(wantedBase)”; pass the right one with --checksum instead."
                )
            }
            return first
        }
        // Unreachable: every entry has one of the algorithms tried above.
        throw ChecksumSpecError("The checksum file has no usable line for “\(wantedBase)”.")
    }

    /// One usable line: a digest and the name it belongs to (nil for a bare digest).
    private struct Entry {
        let digest: ExpectedDigest
        let name: String?
    }

    private enum Line {
        case entry(Entry)
        case unsupportedAlgorithm(String)
        case ignored
    }

    private static func parse(line rawLine: Substring) -> Line {
        var line = rawLine.trimmingASCIIWhitespace()
        if line.isEmpty || line.hasPrefix("#") { return .ignored }

        // GNU coreutils writes "\HEX  name" when the name needed escaping (a backslash or a newline).
        var escaped = false
        if line.hasPrefix("\\") {
            escaped = true
            line = line.dropFirst()
        }

        if let bsd = parseBSD(line, escaped: escaped) {
            return bsd
        }

        // GNU form: HEX, one space, then a space (text mode) or `*` (binary mode), then the name.
        let hexEnd = line.firstIndex(where: { $0 == " " || $0 == "\t" }) ?? line.endIndex
        let hex = line[..<hexEnd]
        guard let digestBytes = decodeHex(hex),
            let algorithm = DigestAlgorithm(digestLength: digestBytes.count),
            let digest = ExpectedDigest(algorithm: algorithm, bytes: digestBytes)
        else {
            // A hex run of another length is most likely SHA-1 or SHA-512: say so if nothing else matches.
            if decodeHex(hex).map({ [20, 28, 48, 64].contains($0.count) }) == true {
                return .unsupportedAlgorithm(unsupportedName(hexDigits: hex.utf8.count))
            }
            return .ignored
        }
        var rest = line[hexEnd...]
        if rest.isEmpty {
            return .entry(Entry(digest: digest, name: nil))
        }
        rest = rest.dropFirst()  // the separating space
        if rest.first == "*" || rest.first == " " {
            rest = rest.dropFirst()
        }
        let name = escaped ? unescapeGNU(rest) : String(rest)
        return name.isEmpty ? .entry(Entry(digest: digest, name: nil)) : .entry(Entry(digest: digest, name: name))
    }

    /// Reads "TAG (name) = HEX" (coreutils --tag) or "TAG(name)= HEX" (OpenSSL); nil if the line is not BSD form.
    ///
    /// The name runs from the first "(" to the last ")" before the last "=", so names may contain both.
    private static func parseBSD(_ line: Substring, escaped: Bool) -> Line? {
        guard let open = line.firstIndex(of: "("), let equals = line.lastIndex(of: "=") else { return nil }
        let beforeEquals = line[..<equals].trimmingASCIIWhitespace()
        guard beforeEquals.hasSuffix(")"), open < beforeEquals.endIndex else { return nil }
        let tag = line[..<open].trimmingASCIIWhitespace()
        guard !tag.isEmpty, tag.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else { return nil }
        let rawName = line[line.index(after: open)..<beforeEquals.index(before: beforeEquals.endIndex)]
        let name = escaped ? unescapeGNU(rawName) : String(rawName)
        let hex = line[line.index(after: equals)...].trimmingASCIIWhitespace()
        guard let algorithm = DigestAlgorithm(specName: tag) else {
            return .unsupportedAlgorithm(tag.uppercased())
        }
        guard let digestBytes = decodeHex(hex),
            let digest = ExpectedDigest(algorithm: algorithm, bytes: digestBytes)
        else { return .ignored }
        return .entry(Entry(digest: digest, name: name.isEmpty ? nil : name))
    }

    /// Undoes GNU coreutils' name escaping: `\\` is a backslash, `\n` a newline.
    private static func unescapeGNU(_ name: Substring) -> String {
        var result = ""
        var iterator = name.makeIterator()
        while let character = iterator.next() {
            guard character == "\\", let next = iterator.next() else {
                result.append(character)
                continue
            }
            switch next {
            case "n": result.append("\n")
            case "r": result.append("\r")
            default: result.append(next)
            }
        }
        return result
    }

    private static func unsupportedName(hexDigits: Int) -> String {
        switch hexDigits {
        case 40: "SHA-1"
        case 56: "SHA-224"
        case 96: "SHA-384"
        default: "SHA-512"
        }
    }

    /// The last path component, for either separator; a name without one is its own basename.
    private static func basename(_ path: String) -> String {
        let trimmed = path.hasPrefix("./") ? String(path.dropFirst(2)) : path
        if let slash = trimmed.lastIndex(where: { $0 == "/" || $0 == "\\" }) {
            return String(trimmed[trimmed.index(after: slash)...])
        }
        return trimmed
    }
}

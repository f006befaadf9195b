import SeggetVerify

extension MetalinkDocument {
    /// The Metalink 4 namespace (RFC 5854).
    public static let namespace = "urn:ietf:params:xml:ns:metalink"
    /// Metalink 3's namespace, which segget does not read.
    static let version3Namespace = "http://www.metalinker.org/"

    /// Reads a Metalink 4 document. Refused, with one sentence: a document beyond `limits`; one that
    /// is not well-formed XML, declares a document type or refers to entities; one in another
    /// namespace (Metalink 3); a file without a name, with an unsafe name, the same name twice, no
    /// http(s) URL, a size that is not a number in range, a digest of the wrong length, or pieces
    /// that do not cover its size exactly. URLs of other schemes (ftp, rsync, a relative one) are
    /// skipped and counted; digests of algorithms segget does not compute are ignored.
    public init(parsing bytes: [UInt8], limits: MetalinkLimits = MetalinkLimits()) throws(MetalinkError) {
        guard bytes.count <= limits.documentBytes else {
            throw MetalinkError("the Metalink is \(bytes.count) bytes long, more than the \(limits.documentBytes) segget reads.")
        }
        try Self.screen(bytes)
        var builder = Builder(limits: limits)
        let reader = try XMLReader(bytes, limits: limits)
        while let node = try reader.next() {
            try builder.take(node, line: reader.line)
        }
        self.init(files: try builder.finish())
    }

    /// Reads a Metalink whose files are to be downloaded: as ``init(parsing:limits:)``, and every
    /// file must have an http(s) URL. (A Metalink that a server points to for a file it serves, by
    /// Metalink/HTTP, may list none.)
    public static func forDownload(parsing bytes: [UInt8], limits: MetalinkLimits = MetalinkLimits()) throws(MetalinkError) -> MetalinkDocument {
        let d = try MetalinkDocument(parsing: bytes, limits: limits)
        for f in d.files where f.urls.isEmpty {
            let skipped = f.skippedURLs > 0 ? " (its \(f.skippedURLs) URL\(f.skippedURLs == 1 ? " is" : "s are") not absolute http:// or https:// URLs)" : ""
            throw MetalinkError("the Metalink gives no http:// or https:// URL for \(DocumentText(f.name))\(skipped); segget downloads over HTTP(S) only.")
        }
        return d
    }

    /// Refuses, before any XML parser sees them, the bytes through which XML expands or reaches out:
    /// a document type declaration (which declares entities), and any encoding in which those bytes
    /// would not show (a NUL byte: UTF-16 or UTF-32).
    static func screen(_ bytes: [UInt8]) throws(MetalinkError) {
        if bytes.contains(0) {
            throw MetalinkError("the Metalink is not UTF-8 text (it has NUL bytes); a Metalink is UTF-8 XML.")
        }
        for marker in ["<!DOCTYPE", "<!ENTITY"] where contains(bytes, Array(marker.utf8)) {
            throw MetalinkError("the Metalink has a document type declaration (\(marker)), which a Metalink never needs; segget refuses it rather than expand or fetch entities.")
        }
    }

    private static func contains(_ bytes: [UInt8], _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, bytes.count >= needle.count else { return false }
        var i = 0
        while i <= bytes.count - needle.count {
            if bytes[i] == first, bytes[i..<i + needle.count].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}

/// Builds the files from the reader's nodes, one element at a time.
private struct Builder {
    let limits: MetalinkLimits
    var files: [MetalinkFile] = []
    /// The open elements' local names in the Metalink namespace (another namespace: nil).
    var stack: [String?] = []
    var text = ""
    // The file being read.
    var file: MetalinkFile?
    var fileLine = 0
    var hashType: String?
    var urlAttributes: [String: String] = [:]
    var piecesType: String?
    var piecesLength: Int64?
    var pieceDigests: [UInt8] = []
    var pieceDigestOK = true
    var fileDigests: [DigestAlgorithm: [UInt8]] = [:]
    var filePieces: [PieceHashes] = []
    var piecesTotal = 0

    init(limits: MetalinkLimits) { self.limits = limits }

    /// The path of open Metalink elements, as "metalink/file/…".
    var path: String { stack.map { $0 ?? "?" }.joined(separator: "/") }

    mutating func take(_ node: XMLNode, line: Int) throws(MetalinkError) {
        switch node {
        case .start(let name, let ns, let attributes, let empty):
            if stack.isEmpty {
                if ns == MetalinkDocument.version3Namespace {
                    throw MetalinkError("this is a Metalink 3 document (\(MetalinkDocument.version3Namespace)); segget reads Metalink 4 (RFC 5854, .meta4) only.")
                }
                guard name == "metalink", ns == MetalinkDocument.namespace else {
                    throw MetalinkError("the document is not a Metalink 4: its root element is not <metalink> in \(MetalinkDocument.namespace).")
                }
            }
            stack.append(ns == MetalinkDocument.namespace ? name : nil)
            text = ""
            try opened(attributes: attributes, line: line)
            if empty { try closed(line: line) }
        case .text(let t):
            if text.utf8.count + t.utf8.count > limits.textBytes {
                throw MetalinkError("a text of the Metalink is longer than \(limits.textBytes) bytes (line \(line)).")
            }
            text += t
        case .end:
            try closed(line: line)
        }
    }

    private mutating func opened(attributes: [String: String], line: Int) throws(MetalinkError) {
        switch path {
        case "metalink/file":
            guard files.count < limits.files else {
                throw MetalinkError("the Metalink describes more than \(limits.files) files.")
            }
            guard let name = attributes["name"], !name.isEmpty else {
                throw MetalinkError("a <file> of the Metalink has no name (line \(line)).")
            }
            try Self.checkName(name)
            if files.contains(where: { $0.name == name }) {
                throw MetalinkError("the Metalink describes the file \(DocumentText(name)) twice.")
            }
            file = MetalinkFile(name: name, size: nil, urls: [])
            fileLine = line
            fileDigests = [:]
            filePieces = []
        case "metalink/file/hash":
            hashType = attributes["type"]
        case "metalink/file/url":
            urlAttributes = attributes
        case "metalink/file/pieces":
            piecesType = attributes["type"]
            pieceDigests = []
            pieceDigestOK = true
            guard let text = attributes["length"], let length = Self.number(text), length > 0, length <= 1 << 30 else {
                throw MetalinkError("the <pieces> of \(DocumentText(file?.name ?? "")) have no length between 1 byte and 1 GiB (line \(line)).")
            }
            piecesLength = length
        default:
            break
        }
    }

    private mutating func closed(line: Int) throws(MetalinkError) {
        let value = text.trimmingWhitespace()
        defer {
            stack.removeLast()
            text = ""
        }
        switch path {
        case "metalink/file/size":
            guard let size = Self.number(value), size <= limits.fileSize else {
                throw MetalinkError("the size of \(DocumentText(file?.name ?? "")) is not a number of bytes up to \(limits.fileSize) (line \(line)).")
            }
            file?.size = size
        case "metalink/file/hash":
            guard let type = hashType.flatMap(DigestAlgorithm.init(textualName:)) else { return }
            guard let bytes = Self.hex(value), bytes.count == type.digestLength else {
                throw MetalinkError("the \(type.displayName) hash of \(DocumentText(file?.name ?? "")) is not \(type.digestLength * 2) hex digits (line \(line)).")
            }
            fileDigests[type] = bytes
        case "metalink/file/url":
            guard var f = file else { return }
            guard f.urls.count + f.skippedURLs < limits.urlsPerFile else {
                throw MetalinkError("the Metalink lists more than \(limits.urlsPerFile) URLs for \(DocumentText(f.name)).")
            }
            if Self.isHTTPURL(value) {
                let priority = urlAttributes["priority"].flatMap(Self.number).flatMap { (1...999_999).contains($0) ? Int($0) : nil }
                let location = urlAttributes["location"].map { $0.lowercased() }.flatMap { $0.isEmpty ? nil : $0 }
                if !f.urls.contains(where: { $0.url == value }) {
                    f.urls.append(MetalinkURL(url: value, priority: priority, location: location))
                }
            } else {
                f.skippedURLs += 1
            }
            file = f
        case "metalink/file/pieces/hash":
            guard let type = piecesType.flatMap(DigestAlgorithm.init(textualName:)) else { return }
            guard piecesTotal < limits.pieces else {
                throw MetalinkError("the Metalink has more than \(limits.pieces) piece hashes.")
            }
            guard let bytes = Self.hex(value), bytes.count == type.digestLength else {
                throw MetalinkError("a \(type.displayName) piece hash of \(DocumentText(file?.name ?? "")) is not \(type.digestLength * 2) hex digits (line \(line)).")
            }
            piecesTotal += 1
            pieceDigests += bytes
        case "metalink/file/pieces":
            guard let type = piecesType.flatMap(DigestAlgorithm.init(textualName:)), let length = piecesLength,
                let pieces = PieceHashes(algorithm: type, length: length, digests: pieceDigests)
            else { return }
            filePieces.append(pieces)
            pieceDigests = []
        case "metalink/file":
            guard var f = file else { return }
            if let best = Self.strongest.first(where: { fileDigests[$0] != nil }), let bytes = fileDigests[best] {
                f.digests = [(best, bytes)]
            }
            let read = filePieces
            f.pieces = Self.strongest.lazy.compactMap { a in read.first { $0.algorithm == a } }.first
            try check(f)
            files.append(f)
            file = nil
        default:
            break
        }
    }

    /// The checks of a whole `<file>`, once read.
    private func check(_ f: MetalinkFile) throws(MetalinkError) {
        if let pieces = f.pieces {
            guard let size = f.size else {
                throw MetalinkError("the Metalink gives piece hashes for \(DocumentText(f.name)) but not its size.")
            }
            guard pieces.fits(size: size) else {
                throw MetalinkError("the Metalink gives \(pieces.count) piece hashes of \(pieces.length) bytes for \(DocumentText(f.name)), whose size \(size) needs \(PieceHashes.pieceCount(size: size, length: pieces.length)).")
            }
        }
    }

    func finish() throws(MetalinkError) -> [MetalinkFile] {
        guard !files.isEmpty else { throw MetalinkError("the Metalink describes no file.") }
        return files
    }

    /// Strongest first.
    static let strongest: [DigestAlgorithm] = [.sha512, .sha256, .sha1, .md5]

    /// A non-negative decimal that fits an `Int64` (no sign, no blanks inside).
    static func number(_ text: String) -> Int64? {
        let t = text.trimmingWhitespace()
        guard !t.isEmpty, t.utf8.count <= 18, t.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(t)
    }

    static func hex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let h = nibble(digits[i]), let l = nibble(digits[i + 1]) else { return nil }
            out.append(h << 4 | l)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        case 0x41...0x46: c - 0x41 + 10
        default: nil
        }
    }

    /// An absolute http:// or https:// URL with a host, and no blank or control character.
    static func isHTTPURL(_ url: String) -> Bool {
        let lower = url.lowercased()
        let rest: Substring
        if lower.hasPrefix("http://") {
            rest = lower.dropFirst(7)
        } else if lower.hasPrefix("https://") {
            rest = lower.dropFirst(8)
        } else {
            return false
        }
        guard let first = rest.first, first != "/", first != "?", first != "#" else { return false }
        return !url.unicodeScalars.contains { $0.value <= 0x20 || $0.value == 0x7F || (0x80...0x9F).contains($0.value) }
    }

    /// A name must be a relative path without `..`, empty or control-character components.
    static func checkName(_ name: String) throws(MetalinkError) {
        let bad = name.hasPrefix("/") || name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || $0 == "\\" }
            || name.split(separator: "/", omittingEmptySubsequences: false).contains { $0.isEmpty || $0 == ".." || $0 == "." }
        if bad || name.utf8.count > 4096 {
            throw MetalinkError("the Metalink names a file \(DocumentText(name)), which is not a safe relative path; segget refuses it.")
        }
    }
}

/// Text from a document, for a message: quoted and escaped as Segget's `ServerText` escapes a
/// server's text (this target sits below Segget): each control character, DEL, C1 and bidi control
/// and line separator as a visible escape (`\x1b`, `\u{202e}`), a backslash as `\\`, at most 300
/// characters. `MetalinkQuotingTests` holds the two to the same output.
public struct DocumentText: CustomStringConvertible, Sendable {
    let text: String
    public init(_ text: String) { self.text = text }
    public var description: String { "'\(Self.escaped(text))'" }

    public static func escaped(_ text: String, limit: Int = 300) -> String {
        var out = ""
        var shown = 0
        for s in text.unicodeScalars {
            let v = s.value
            let piece: String
            switch v {
            case 0x5C: piece = "\\\\"
            case 0x09: piece = "\\t"
            case 0x0A: piece = "\\n"
            case 0x0D: piece = "\\r"
            case 0..<0x20, 0x7F: piece = "\\x" + (v < 0x10 ? "0" : "") + String(v, radix: 16)
            case 0x80..<0xA0, 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069:
                piece = "\\u{" + String(v, radix: 16) + "}"
            default: piece = String(s)
            }
            let n = piece.unicodeScalars.count
            if shown + n > limit - 1 {
                out += "…"
                break
            }
            out += piece
            shown += n
        }
        return out
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !Self.isBlank($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !Self.isBlank($0) }) ?? first
        return String(scalars[first...last])
    }
    private static func isBlank(_ s: Unicode.Scalar) -> Bool { s == " " || s == "\t" || s == "\n" || s == "\r" }
}

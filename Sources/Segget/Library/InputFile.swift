import SeggetVerify

/// A list of downloads in the aria2 input-file style, as read by `segget -i FILE`.
///
/// ```
/// # comments and blank lines are ignored
/// https://example.com/a.iso
///   out=debian.iso
///   checksum=sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
/// https://example.com/b.bin	https://mirror.example.org/b.bin
///   dir=downloads
/// ```
///
/// A line that starts with a non-blank character holds one URL, or several separated by tabs: the
/// first is the URL, the others are mirrors of the same file (a line may also name a Metalink, a
/// path or URL ending in `.meta4`, whose files the command line adds in its place). Lines indented by spaces or tabs
/// under it are `name=value` options for that URL, aria2's names read through ``OptionSchema``:
/// `out` (a file name), `dir` (a directory), `checksum` (`ALGO=HEX`, repeatable), `header`
/// (`Name: value`, repeatable), `user-agent`, `referer`, `all-proxy`, `split` and
/// `max-download-limit`. Parsing is strict: an unknown option, a malformed URL or a value its option
/// refuses is an error naming the line, with the sentence the command line and the daemon give.
public struct InputFile: Sendable, Equatable {
    /// One URL of the list with its options.
    public struct Entry: Sendable, Equatable {
        /// The http(s) URL to download.
        public var url: String
        /// Further URLs of the same file (tab-separated on the URL line).
        public var mirrors: [String] = []
        /// The 1-based line of the URL, for messages.
        public var line: Int
        /// The option lines (`out=`, `dir=`, `checksum=`, …), read as every entry point reads them
        /// (``OptionSchema``).
        public var options = FileOptions()
        /// What a Metalink says of the file (its mirrors, size, digests, pieces), when one brought it.
        public var metalink: MetalinkDownload?

        public init(url: String, line: Int) {
            self.url = url
            self.line = line
        }
    }

    /// The entries in file order.
    public var entries: [Entry]

    public init(entries: [Entry]) { self.entries = entries }

    /// The first two of `entries` whose `out=` lines name the same file (the same `dir=`, or none).
    public static func sameOutputName(in entries: [Entry], directory: String? = nil) -> (Entry, Entry)? {
        var seen: [String: Entry] = [:]
        for e in entries {
            guard let name = e.options.outputName else { continue }
            // The path each is saved under: `dl`, `dl/`, `./dl` and `-d dl` without `dir=` are one
            // directory (they were compared as written).
            let key = OutputNames.normalized(OutputNames.join(e.options.directory ?? directory, name))
            if let earlier = seen[key] { return (earlier, e) }
            seen[key] = e
        }
        return nil
    }

    /// The option names an indented line may use.
    public static var optionNames: [String] { OptionSchema.inputFileKeys }

    /// Parses the text of an input file (UTF-8; LF or CRLF line ends; a byte order mark at its start,
    /// as Windows editors write one, is not part of the first line).
    public init(parsing given: String) throws(InputFileError) {
        let text = given.unicodeScalars.first == "\u{FEFF}" ? String(given.unicodeScalars.dropFirst()) : given
        var copy = text
        guard let lines = copy.withUTF8({ Self.asciiLines($0) }) else {
            try self.init(referenceParsing: text)
            return
        }
        // Pure ASCII: the lines, their tabs and their blanks were found on bytes (see `asciiLines`).
        let utf8 = text.utf8
        func slice(_ r: Range<Int>) -> Substring {
            text[utf8.index(utf8.startIndex, offsetBy: r.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: r.upperBound)]
        }
        var entries: [Entry] = []
        for line in lines {
            switch line.kind {
            case .urls(let ranges):
                let urls = ranges.map { String(slice($0)) }
                for u in urls {
                    if !MetalinkSource.looksLikeMetalink(u), let problem = Self.urlProblem(u) { throw InputFileError(line: line.number, message: problem) }
                }
                var entry = Entry(url: urls[0], line: line.number)
                entry.mirrors = Array(urls.dropFirst())
                entries.append(entry)
            case .option(let content):
                try Self.readOption(slice(content), line: line.number, into: &entries)
            }
        }
        self.init(entries: entries)
    }

    /// `init(parsing:)` on `Character`s: the reference the ASCII path must agree with, and the parser
    /// of a text that is not pure ASCII.
    init(referenceParsing text: String) throws(InputFileError) {
        var entries: [Entry] = []
        var number = 0
        // "\r\n" is one Character in Swift, so both separators must be named.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            number += 1
            var line = Substring(rawLine)
            if line.last == "\r" { line = line.dropLast() }
            let indented = line.first == " " || line.first == "\t"
            let content = line.trimmingSpacesAndTabs()
            if content.isEmpty || content.first == "#" { continue }
            if !indented {
                let urls = content.split(separator: "\t").map { String($0.trimmingSpacesAndTabs()) }.filter { !$0.isEmpty }
                for u in urls {
                    if !MetalinkSource.looksLikeMetalink(u), let problem = Self.urlProblem(u) { throw InputFileError(line: number, message: problem) }
                }
                var entry = Entry(url: urls[0], line: number)
                entry.mirrors = Array(urls.dropFirst())
                entries.append(entry)
                continue
            }
            try Self.readOption(content, line: number, into: &entries)
        }
        self.entries = entries
    }

    /// Applies the indented option line `content` (trimmed) to the last entry.
    private static func readOption(_ content: Substring, line number: Int, into entries: inout [Entry]) throws(InputFileError) {
        guard !entries.isEmpty else {
            throw InputFileError(line: number, message: "the option '\(content)' comes before any URL; indented lines belong to the URL above them.")
        }
        guard let eq = content.firstIndex(of: "=") else {
            throw InputFileError(line: number, message: "expected an indented option NAME=VALUE, such as out=file.iso (got '\(content)').")
        }
        let name = String(content[..<eq]).trimmingSpacesAndTabs().lowercased()
        let value = String(content[content.index(after: eq)...].trimmingSpacesAndTabs())
        guard !value.isEmpty else {
            throw InputFileError(line: number, message: "the option '\(name)' has an empty value.")
        }
        guard let spec = OptionSchema.spec(name), spec.isGiven(at: .inputFile) else {
            throw InputFileError(line: number, message: "unknown option '\(name)'; the options are \(Self.optionNames.joined(separator: ", ")).")
        }
        do {
            try spec.apply(value, &entries[entries.count - 1].options)
        } catch {
            throw InputFileError(line: number, message: error.message)
        }
    }

    /// Why `url` cannot be downloaded, or nil when it is an absolute http(s) URL.
    public static func urlProblem(_ url: String) -> String? {
        switch ASCIIURL(url) {
        case .notASCII: return referenceURLProblem(url)
        case .invalid: return notAbsolute(url)
        case .parsed(let parts):
            guard parts.scheme == "http" || parts.scheme == "https" else { return unsupported(parts.scheme) }
            // In ASCII, the spaces, line ends and control characters are the bytes up to 0x20, and 0x7F.
            return url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) ? spacesOrControls(url) : nil
        }
    }

    /// `urlProblem(_:)` on `Character`s and scalars: the reference, and the check of a URL that is not
    /// pure ASCII.
    static func referenceURLProblem(_ url: String) -> String? {
        guard let parts = URLParts(reference: url) else { return notAbsolute(url) }
        guard parts.isHTTPFamily else { return unsupported(parts.scheme) }
        if url.contains(where: { $0 == " " || $0.isNewline }) || url.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return spacesOrControls(url)
        }
        return nil
    }

    private static func notAbsolute(_ url: String) -> String {
        "'\(URLParts.redactingCredentials(url))' is not an absolute URL; give one such as https://example.com/file.iso."
    }

    private static func unsupported(_ scheme: String) -> String {
        "the scheme '\(scheme)' is not supported; segget downloads http:// and https:// URLs."
    }

    private static func spacesOrControls(_ url: String) -> String {
        "'\(URLParts.redactingCredentials(url))' contains spaces or control characters; percent-encode them (%20)."
    }
}

/// A problem in an input file, with the 1-based line it was found on.
public struct InputFileError: Error, CustomStringConvertible, Sendable, Equatable {
    public let line: Int
    public let message: String

    public init(line: Int, message: String) {
        self.line = line
        self.message = message
    }

    /// `line 3: …`
    public var description: String { "line \(line): \(message)" }
}

extension StringProtocol {
    /// The text without the spaces and tabs at its ends (those inside are kept).
    public func trimmingSpacesAndTabs() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }
}

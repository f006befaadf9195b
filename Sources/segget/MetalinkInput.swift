import ArgumentParser
import Segget
import SeggetSystem

/// The command line's Metalink options.
struct MetalinkOptions: ParsableArguments {
    @Option(
        name: .customLong("metalink"),
        help: ArgumentHelp(
            "Download the files a Metalink 4 document (.meta4) describes: an http(s) URL to fetch it from, or a path ('-' for standard input) (repeatable).",
            valueName: "source"))
    var sources: [String] = []

    @Option(
        name: .customLong("metalink-location"),
        help: ArgumentHelp(
            "Prefer a Metalink's (and a server's Link) mirrors in this country, an ISO 3166 code such as de.", valueName: "code"))
    var location: String?

    @Flag(
        name: .customLong("no-metalink-http"),
        help: "Ignore the mirrors and Metalink a server's first answer names in Link fields (Metalink/HTTP, RFC 6249).")
    var noMetalinkHTTP = false

    func validate() throws {
        if let l = location, l.isEmpty || l.count > 8 || !l.allSatisfy({ $0.isLetter || $0 == "-" }) {
            throw ValidationError("--metalink-location takes a country code such as de or us (got '\(l)').")
        }
    }

    func apply(to o: inout DownloadOptions) {
        o.metalinkLocation = location?.lowercased()
        o.metalinkHTTP = !noMetalinkHTTP
    }
}

/// Turns the Metalinks of a command line into the files of its batch: `--metalink` sources, and
/// arguments or `-i` lines that name one (a path of an existing file, a path or URL ending in
/// `.meta4`, a mirrorbits `?meta4` URL). Each file of a document becomes an entry with its URLs,
/// name, size, digest and pieces; an entry's own option lines (`dir=`, `header=` …) apply to every
/// file it brings. Documents are read (or fetched) before any file is, so a refused one stops the
/// run with exit 2 before anything is downloaded.
enum MetalinkInput {
    /// Whether a command-line argument or `-i` line names a Metalink rather than a file to download.
    static func names(_ argument: String) -> Bool {
        if MetalinkSource.looksLikeMetalink(argument) { return true }
        // Not a URL, but a file that is there: read as a Metalink (a mistyped URL keeps its message).
        return InputFile.urlProblem(argument) != nil && FileSystem.status(argument)?.kind == .regular
    }

    static func expand(
        _ entries: [InputFile.Entry], sources: [String], options: DownloadOptions, verify: Bool
    ) throws(SeggetError) -> [InputFile.Entry] {
        var out: [InputFile.Entry] = []
        func add(_ source: String, like template: InputFile.Entry) throws(SeggetError) {
            let document = try MetalinkSource.load(source, transfer: options.transfer)
            let count = document.files.count
            if count > 1 {
                // One file's name or digest for several files: refused before anything is fetched
                // (out= was dropped without a word; a digest was held against every file, each
                // downloaded and then discarded for the mismatch, exit 6).
                let shown = ServerText(source)
                if template.options.outputName != nil {
                    throw SeggetError(.usage, "the Metalink \(shown) describes \(count) files, but out= names one; drop it (each file keeps the name the document gives it), or give dir=.")
                }
                if !template.options.checksums.isEmpty || !options.checksums.isEmpty {
                    throw SeggetError(.usage, "the Metalink \(shown) describes \(count) files, but --checksum or checksum= gives one file's digest; drop it (the document's own digests check each file).")
                }
            }
            for file in document.files {
                var m = file.download(preferring: options.metalinkLocation)
                if !verify {
                    m.checksums = []
                    m.pieces = nil
                }
                var e = InputFile.Entry(url: m.url, line: template.line)
                e.options = template.options
                if e.options.outputName == nil || document.files.count > 1 {
                    // The document's name, directories and all (`iso/boot.iso` under `-d` or `dir=`).
                    e.options.outputName = m.name
                    e.options.directory = m.directory(under: e.options.directory ?? options.directory)
                }
                e.metalink = m
                out.append(e)
            }
        }
        for e in entries {
            if names(e.url) { try add(e.url, like: e) } else { out.append(e) }
        }
        for s in sources { try add(s, like: InputFile.Entry(url: s, line: out.count + 1)) }
        return out
    }
}

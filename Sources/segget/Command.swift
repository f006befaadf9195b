import ArgumentParser
import Glibc
import Segget
import SeggetSystem
import SeggetVerify

let exitCodeTable = FailureKind.allCases.sorted { $0.exitCode < $1.exitCode }
    .map { "  \(String($0.exitCode) + String(repeating: " ", count: max(1, 5 - String($0.exitCode).count))) \($0.summary)" }
    .joined(separator: "\n")

struct SeggetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "segget",
        abstract: "Download a file over many parallel HTTP connections, resumably and verifiably.",
        discussion: """
            segget splits the file into byte ranges fetched in parallel, writes them straight into \
            NAME.segget-part and records finished chunks in NAME.segget-journal. If it is stopped \
            (Ctrl-C, kill -9, crash, power cut), run the same command again to resume. The file gets \
            its final name only when it is complete and verified.

            EXIT CODES:
              0     success
            \(exitCodeTable)
            """,
        version: seggetVersion,
        subcommands: [Get.self, Verify.self, Daemon.self, Add.self, List.self, Pause.self, Resume.self, Remove.self, ShowToken.self],
        defaultSubcommand: Get.self
    )
}

/// The download command: one URL, several, or a list file (`-i`), with human or JSON output.
struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download one or more URLs (the default command: `segget URL` is `segget get URL`).",
        discussion: """
            SEVERAL FILES: give several URLs, or -i FILE with one URL per line (# comments; indented \
            option lines \(OptionSchema.inputFileKeys.map { $0 + "=..." }.joined(separator: ", ")) (aria2's \
            names; see README, "Per-file options") belong to the URL above; tab-separated URLs on one line are mirrors of one file). -j N downloads N files \
            at once. -n is per file, but all files together never use more than --total-connections \
            (default: the largest of 16, -n and -j): each file gets min(-n, total / jobs). Files that \
            would get the same name are numbered in list order: file.bin, file.1.bin, file.2.bin; two \
            out= lines that name the same file are refused (exit 2). \
            A batch exits 0 when every file succeeded, 130 if it was interrupted, and otherwise with \
            the code of the first failed file in list order.

            JSON: --json prints one JSON object per line on stdout (start, progress, notice, retry, \
            redial, finish, error, summary; see docs/json.md) and nothing on stderr.

            EXIT CODES:
              0     success
            \(exitCodeTable)
            """
    )

    @Argument(help: "The http:// or https:// URLs to download, or Metalink files (FILE.meta4) whose files to download.")
    var urls: [String] = []

    @Option(name: [.short, .customLong("input-file")], help: "Read URLs from this file, one per line ('-' for standard input).")
    var inputFile: String?

    @OptionGroup(title: "Connections and scheduling") var connection: ConnectionOptions
    @OptionGroup(title: "Output") var output: OutputOptions
    @OptionGroup(title: "Output format") var format: FormatOptions
    @OptionGroup(title: "Verification") var verification: VerificationOptions
    @OptionGroup(title: "Metalink") var metalink: MetalinkOptions
    @OptionGroup(title: "Retries and time limits") var retry: RetryOptions
    @OptionGroup(title: "HTTP requests") var request: RequestOptions
    @OptionGroup(title: "Network") var network: NetworkOptions
    @OptionGroup(title: "Durability and I/O") var durability: DurabilityOptions
    @OptionGroup(title: "Streaming to standard output") var stream: StreamOptions

    /// Checks across groups; each group checks its own options first.
    func validate() throws {
        let several = urls.count > 1 || inputFile != nil
        if several && output.output != nil {
            throw ValidationError("-o names one file; with several URLs use -d DIR, or out=NAME lines in an input file.")
        }
        if several && !verification.checksum.isEmpty {
            throw ValidationError("--checksum applies to one file; with several URLs use checksum= lines in an input file or --checksum-file.")
        }
        if output.output == "-" && format.json {
            throw ValidationError("-o - writes the file to standard output, where --json would write its objects; give one of them.")
        }
        if output.output != "-" && stream.isGiven {
            throw ValidationError("--stream-window and --stream-from apply to -o - (streaming to standard output) only.")
        }
        if several && !connection.mirrors.isEmpty {
            throw ValidationError("--mirror applies to one file; with several URLs put mirrors on the URL's line in an input file, separated by tabs.")
        }
    }

    /// The options every file starts from (before per-file settings and the connection budget):
    /// the one place the command line becomes the library's `DownloadOptions`.
    func downloadOptions() throws -> DownloadOptions {
        var o = DownloadOptions()
        try connection.apply(to: &o)
        output.apply(to: &o)
        try verification.apply(to: &o)
        retry.apply(to: &o)
        try network.apply(to: &o)
        durability.apply(to: &o)
        metalink.apply(to: &o)
        return o.applying(try request.fileOptions())
    }

    /// What this command line asks for; `run` carries it out.
    func parsedRequest() throws -> GetRequest {
        GetRequest(
            urls: urls, inputFile: inputFile, mirrors: connection.mirrors, checksumFile: verification.checksumFile,
            options: try downloadOptions(), jobs: connection.jobs, totalConnections: connection.totalConnections,
            maxConnectionsPerHost: connection.maxConnectionsPerHost,
            json: format.json, quiet: format.quiet, skipExisting: output.skipExisting, stream: stream.settings,
            metalinks: metalink.sources)
    }

    func run() throws {
        try parsedRequest().run()
    }
}

enum FileNameHint {
    static func fromURL(_ url: String) -> String { FileName.fromURLPath(url) }
}

func lastPathComponent(_ path: String) -> String {
    // On the bytes of an ASCII path, where "/" is never part of a larger Character (this runs for
    // every file of a batch).
    let bytes = path.utf8
    guard bytes.allSatisfy({ $0 < 0x80 }) else { return path.split(separator: "/").last.map(String.init) ?? path }
    let slash = UInt8(ascii: "/")
    var end = bytes.endIndex
    while end > bytes.startIndex, bytes[bytes.index(before: end)] == slash { end = bytes.index(before: end) }
    guard end > bytes.startIndex else { return path }
    var start = end
    while start > bytes.startIndex, bytes[bytes.index(before: start)] != slash { start = bytes.index(before: start) }
    return String(path[start..<end])
}

func loadChecksumFile(_ path: String, outputName: String) throws -> ExpectedDigest {
    let text = try readTextFile(path, what: "the checksum file")
    do {
        return try ChecksumFile.expectedDigest(in: text, forFileName: outputName)
    } catch {
        throw SeggetError(.usage, "\(path): \(error)")
    }
}

/// Reads a small text file (at most 16 MiB; `-` is standard input); a failure is a usage error.
/// `utf8Only`: a line that is not UTF-8 is refused, naming it (an input file's names, paths and URLs
/// would have been read with U+FFFD for its odd bytes, and a file saved under another name). A
/// checksum file is read as it comes: its other files' lines may be in any encoding.
func readTextFile(_ path: String, what: String, utf8Only: Bool = false) throws(SeggetError) -> String {
    let bytes: [UInt8]
    do throws(Errno) {
        let file = path == "-" ? FileDescriptor.standardInput : try FileDescriptor.open(path, .readOnly)
        defer { if path != "-" { file.close() } }
        bytes = try file.readToEnd(limit: 16 << 20)
    } catch {
        throw SeggetError(.usage, "cannot read \(what) \(path): \(error).")
    }
    if bytes.count > 16 << 20 { throw SeggetError(.usage, "\(what) \(path) is too large (over 16 MiB).") }
    guard utf8Only else { return String(decoding: bytes, as: UTF8.self) }
    if let text = String(validating: bytes, as: UTF8.self) { return text }
    // Only a file that is not UTF-8 is split into lines, to name the first bad one.
    let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map(Array.init)
    let bad = RawArguments.firstNotUTF8(lines)
    throw SeggetError(.usage, "\(what) \(path) is not UTF-8 at line \(bad?.position ?? 1) ('\(bad?.shown ?? "")'); segget reads names, paths and URLs as UTF-8 and would have used another name. Write it in UTF-8 (iconv -f latin1 -t utf-8 converts a Latin-1 one).")
}

/// The files `--ca-certificate`, `--certificate` and `--private-key` name (with `proxy`, their
/// `--proxy-` twins for an https proxy), checked before any request (readable, at most 16 MiB, PEM,
/// a key unencrypted) and made absolute: the daemon's tasks read them long after its start.
func tlsFiles(caCertificate: String?, certificate: String?, privateKey: String?, proxy: Bool = false) throws(SeggetError) -> TLSFiles {
    let o = proxy ? "--proxy-" : "--"
    if privateKey != nil && certificate == nil {
        throw SeggetError(.usage, "\(o)private-key is the key of \(o)certificate; give the certificate too.")
    }
    var files = TLSFiles()
    if let path = caCertificate {
        let text = try readPEMFile(path, option: "\(o)ca-certificate", what: "the CA certificate file")
        guard text.contains("-----BEGIN CERTIFICATE-----") else {
            throw SeggetError(.usage, "the CA certificate file \(path) (\(o)ca-certificate) holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the authority's certificate in PEM form (openssl x509 -inform der -in CA.der -out CA.pem converts a DER one).")
        }
        files.caCertificate = absolutePath(path)
    }
    if let path = certificate {
        let text = try readPEMFile(path, option: "\(o)certificate", what: "the client certificate file")
        guard text.contains("-----BEGIN CERTIFICATE-----") else {
            throw SeggetError(.usage, "the client certificate file \(path) (\(o)certificate) holds no PEM certificate (-----BEGIN CERTIFICATE-----); segget takes PEM (openssl pkcs12 -in C.p12 -nodes -out C.pem converts a PKCS#12 one).")
        }
        let key = try privateKey.map { path throws(SeggetError) in try readPEMFile(path, option: "\(o)private-key", what: "the private key file") } ?? text
        let keyPath = privateKey ?? path
        if key.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || key.contains("Proc-Type: 4,ENCRYPTED") {
            throw SeggetError(.usage, "the private key in \(keyPath) is encrypted, and segget has no way to ask for its pass phrase; give an unencrypted copy (openssl pkey -in KEY -out KEY.plain), readable by you alone.")
        }
        guard key.contains("PRIVATE KEY-----") else {
            throw SeggetError(.usage, privateKey == nil
                ? "the client certificate file \(path) holds no private key; give it with \(o)private-key FILE, or put it in the same file."
                : "the private key file \(keyPath) holds no PEM private key (-----BEGIN PRIVATE KEY-----).")
        }
        files.clientCertificate = absolutePath(path)
        files.privateKey = privateKey.map(absolutePath)
    }
    return files
}

private func readPEMFile(_ path: String, option: String, what: String) throws(SeggetError) -> String {
    guard path != "-" else {
        throw SeggetError(.usage, "\(option) needs a file: standard input (-) cannot be read again for every connection.")
    }
    return try readTextFile(path, what: what)
}

/// The working directory ("." if it cannot be read).
func currentDirectory() -> String {
    getcwd(nil, 0).map { p in
        defer { free(p) }; return String(cString: p)
    } ?? "."
}

/// `path` made absolute against the working directory.
func absolutePath(_ path: String) -> String {
    path.hasPrefix("/") ? path : currentDirectory() + "/" + path
}

import ArgumentParser
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
        subcommands: [Get.self, Verify.self, Daemon.self, Add.self, List.self, Pause.self, Resume.self, Remove.self],
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
            option lines out=NAME, dir=DIR, checksum=ALGO=HEX, header=..., referer=... belong to the \
            URL above; tab-separated URLs on one line are mirrors of one file). -j N downloads N files \
            at once. -n is per file, but all files together never use more than --total-connections \
            (default: the larger of 16 and -n): each file gets min(-n, total / jobs). Files that \
            would get the same name are numbered in list order: file.bin, file.1.bin, file.2.bin. \
            A batch exits 0 when every file succeeded, 130 if it was interrupted, and otherwise with \
            the code of the first failed file in list order.

            JSON: --json prints one JSON object per line on stdout (start, progress, notice, retry, \
            redial, finish, error, summary; see docs/json.md) and nothing on stderr.

            EXIT CODES:
              0     success
            \(exitCodeTable)
            """
    )

    @Argument(help: "The http:// or https:// URLs to download.")
    var urls: [String] = []

    @Option(name: [.short, .customLong("input-file")], help: "Read URLs from this file, one per line ('-' for standard input).")
    var inputFile: String?

    @Option(name: [.short, .customLong("connections")], help: "Parallel connections per file, 1 to 128, or 'auto' to add connections while throughput rises (default 8).")
    var n: String = "8"

    @Option(name: [.short, .customLong("jobs")], help: "Files downloaded at once, 1 to 32 (default 1).")
    var jobs: Int = 1

    @Option(name: .customLong("total-connections"), help: "Connections across all files at once (default: the larger of 16 and -n).")
    var totalConnections: Int?

    @Option(name: .customLong("mirror"), help: "Another URL of the same file; ranges are spread over all of them (repeatable).")
    var mirrors: [String] = []

    @Option(name: .shortAndLong, help: "Write to this file instead of the name the server suggests (one URL only).")
    var output: String?

    @Option(name: [.short, .customLong("dir")], help: "Save into this directory (created if missing).")
    var directory: String?

    @Flag(name: .shortAndLong, help: "Overwrite output files that exist.")
    var force = false

    @Flag(name: .customLong("skip-existing"), help: "Leave output files that exist untouched and count them as done.")
    var skipExisting = false

    @Flag(name: .customLong("no-continue"), help: "Ignore any partial download and start over.")
    var noContinue = false

    @Flag(help: "Print one JSON object per line on stdout instead of human progress (see docs/json.md).")
    var json = false

    @Option(name: .customLong("chunk-size"), help: "Journal and work unit, e.g. 1M or 256k (default 1M).")
    var chunkSize: String = "1M"

    @Flag(name: .shortAndLong, help: "Print nothing but errors.")
    var quiet = false

    @Flag(name: [.customShort("k"), .long], help: "Do not verify TLS certificates (only for servers you trust).")
    var insecure = false

    @Option(name: [.customShort("H"), .long], help: "Extra request header 'Name: value' (repeatable).")
    var header: [String] = []

    @Option(name: [.customShort("A"), .customLong("user-agent")], help: "The User-Agent header to send.")
    var userAgent: String?

    @Option(name: .shortAndLong, help: "Credentials 'USER:PASSWORD' for HTTP authentication.")
    var user: String?

    @Flag(help: "Read credentials from ~/.netrc.")
    var netrc = false

    @Option(name: [.customShort("b"), .long], help: "Cookies 'NAME=VALUE; ...' or a cookie file to read.")
    var cookie: String?

    @Option(name: [.customShort("e"), .long], help: "The Referer header to send.")
    var referer: String?

    @Option(help: "Proxy URL (default: the http_proxy / https_proxy / no_proxy variables).")
    var proxy: String?

    @Option(help: "Expected digest ALGO=HEX, with ALGO sha256 or md5 (repeatable; one URL only).")
    var checksum: [String] = []

    @Option(name: .customLong("checksum-file"), help: "A sha256sum/md5sum style file holding the expected digests, looked up by file name.")
    var checksumFile: String?

    @Flag(name: .customLong("no-verify"), help: "Skip all digest checks, including digests the server sends.")
    var noVerify = false

    @Option(help: "Retries per range after a failure (default 5).")
    var retries: Int = 5

    @Option(name: .customLong("retry-wait"), help: "Seconds before the first retry; doubles each time (default 1).")
    var retryWait: Double = 1

    @Option(name: .customLong("connect-timeout"), help: "Seconds to wait for a connection (default 15).")
    var connectTimeout: Double = 15

    @Option(name: .customLong("stall-timeout"), help: "Drop and retry a connection silent for this many seconds (default 20).")
    var stallTimeout: Double = 20

    @Option(help: "Give up on a file after this many seconds in all: probe, redirects, retry waits and transfer (the partial download is kept).")
    var timeout: Double?

    @Option(name: .customLong("max-retry-wait"), help: "Wait at most this many seconds when a server asks to retry later with Retry-After (default 300).")
    var maxRetryWait: Double = 300

    @Option(name: .customLong("max-speed"), help: "Cap the download rate of each file, all its connections together, e.g. 20M (bytes per second).")
    var maxSpeed: String?

    @Option(name: .customLong("sync-interval"), help: "Seconds between durability checkpoints (default 5).")
    var syncInterval: Double = 5

    @Flag(name: .customLong("fsync"), help: "Wait until the finished file is on the disk before giving it its name, so that it survives a power cut right after (slower on a slow disk).")
    var fsync = false

    @Flag(name: .customLong("no-fsync"), help: .hidden)
    var noFsync = false

    @Option(name: .customLong("write-path"), help: "How data reaches the disk: adaptive (O_DIRECT while the disk keeps up, the page cache for the rest), direct, or page-cache (default adaptive).")
    var writePath: String = "adaptive"

    @Flag(name: .customLong("buffered-io"), help: .hidden)
    var bufferedIO = false

    @Flag(help: "Allow HTTP/2 (ranges may then share one connection).")
    var http2 = false

    @Flag(name: .customLong("allow-insecure-redirect"), help: "Follow a redirect from https to plain http.")
    var allowInsecureRedirect = false

    /// The most connections `-n auto` grows to (before the batch budget).
    static let autoConnectionCap = 16

    /// `-n`: a fixed count or adaptive.
    var connectionSetting: (count: Int, auto: Bool)? {
        if n.lowercased() == "auto" { return (Self.autoConnectionCap, true) }
        guard let v = Int(n), (1...128).contains(v) else { return nil }
        return (v, false)
    }

    func validate() throws {
        guard connectionSetting != nil else {
            throw ValidationError("-n takes a number from 1 to 128 or 'auto' (got '\(n)').")
        }
        guard (1...32).contains(jobs) else { throw ValidationError("-j takes a number from 1 to 32 (got \(jobs)).") }
        if let t = totalConnections, !(1...512).contains(t) {
            throw ValidationError("--total-connections takes a number from 1 to 512 (got \(t)).")
        }
        let several = urls.count > 1 || inputFile != nil
        if several && output != nil {
            throw ValidationError("-o names one file; with several URLs use -d DIR, or out=NAME lines in an input file.")
        }
        if several && !checksum.isEmpty {
            throw ValidationError("--checksum applies to one file; with several URLs use checksum= lines in an input file or --checksum-file.")
        }
        if several && !mirrors.isEmpty {
            throw ValidationError("--mirror applies to one file; with several URLs put mirrors on the URL's line in an input file, separated by tabs.")
        }
        if force && skipExisting { throw ValidationError("give either --force or --skip-existing, not both.") }
        guard let cs = parseByteSize(chunkSize), cs >= 16 * 1024, cs <= 1 << 30 else {
            throw ValidationError("--chunk-size must be a size between 16k and 1G, such as 1M (got '\(chunkSize)').")
        }
        if let m = maxSpeed, (parseByteSize(m) ?? 0) < 1024 {
            throw ValidationError("--max-speed must be a rate of at least 1k, such as 20M (got '\(m)').")
        }
        guard retries >= 0 && retries <= 100 else { throw ValidationError("--retries must be between 0 and 100.") }
        guard retryWait >= 0 && retryWait <= 3600 else { throw ValidationError("--retry-wait must be between 0 and 3600 seconds.") }
        guard connectTimeout > 0, stallTimeout >= 0, syncInterval > 0 else {
            throw ValidationError("timeouts and --sync-interval must be positive numbers of seconds.")
        }
        if let t = timeout, t <= 0 { throw ValidationError("--timeout must be a positive number of seconds.") }
        if WritePath(rawValue: writePath) == nil {
            throw ValidationError("--write-path takes adaptive, direct or page-cache (got '\(writePath)').")
        }
        if fsync && noFsync { throw ValidationError("give either --fsync or --no-fsync, not both.") }
        guard maxRetryWait >= 0 && maxRetryWait <= 86400 else { throw ValidationError("--max-retry-wait must be between 0 and 86400 seconds.") }
        if output != nil && directory != nil { throw ValidationError("give either -o FILE or -d DIR, not both.") }
        for h in header where !h.contains(":") {
            throw ValidationError("-H takes 'Name: value' (got '\(h)').")
        }
        for c in checksum {
            do { _ = try ExpectedDigest(parsing: c) } catch { throw ValidationError("--checksum: \(error)") }
        }
        if noVerify && (!checksum.isEmpty || checksumFile != nil) {
            throw ValidationError("--no-verify cannot be combined with --checksum or --checksum-file.")
        }
    }

    /// The options every file starts from (before per-file settings and the connection budget).
    func baseOptions() throws -> DownloadOptions {
        var o = DownloadOptions()
        let setting = connectionSetting ?? (8, false)
        o.connections = setting.count
        o.autoConnections = setting.auto
        o.mirrors = mirrors
        o.chunkSize = parseByteSize(chunkSize) ?? (1 << 20)
        o.outputPath = output
        o.directory = directory
        o.force = force
        o.resume = !noContinue
        o.retries = retries
        o.retryWait = retryWait
        o.timeout = timeout
        o.maxRetryWait = maxRetryWait
        o.maxSpeed = maxSpeed.flatMap(parseByteSize)
        o.checkpointInterval = syncInterval
        o.syncBeforeRename = fsync
        o.writePath = bufferedIO ? .pageCache : (WritePath(rawValue: writePath) ?? .adaptive)
        o.verifyServerDigests = !noVerify
        o.checksums = try checksum.map { try ExpectedDigest(parsing: $0) }
        var t = TransferOptions()
        t.headers = header
        if let ua = userAgent { t.userAgent = ua }
        t.insecure = insecure
        t.http2 = http2
        t.connectTimeout = connectTimeout
        t.stallTimeout = stallTimeout
        t.allowInsecureRedirect = allowInsecureRedirect
        t.credentials = user
        t.useNetrc = netrc
        t.cookie = cookie
        t.referer = referer
        t.proxy = proxy
        o.transfer = t
        return o
    }

    func run() throws {
        // Checked here, not in validate(): ArgumentParser reports unknown options only after
        // validate(), and "unknown option --foo" is the better message for `segget --foo URL`.
        if urls.isEmpty && inputFile == nil { throw SeggetError(.usage, "give a URL to download, or -i FILE with a list of URLs.") }
        for u in urls + mirrors {
            if let problem = InputFile.urlProblem(u) { throw SeggetError(.usage, problem) }
        }
        var entries = urls.enumerated().map { InputFile.Entry(url: $0.element, line: $0.offset + 1) }
        if let path = inputFile {
            let text = try readTextFile(path, what: "the input file")
            do {
                entries += try InputFile(parsing: text).entries
            } catch {
                throw SeggetError(.usage, "\(path == "-" ? "standard input" : path): \(error)")
            }
            if entries.isEmpty { throw SeggetError(.usage, "\(path) lists no URLs.") }
        }
        let checksums = try checksumFile.map { try readTextFile($0, what: "the checksum file") }
        let batch = Batch(
            entries: entries, base: try baseOptions(), jobs: jobs, totalConnections: totalConnections,
            listMode: inputFile != nil || entries.count > 1,
            planPaths: inputFile != nil || entries.count > 1 || json || skipExisting, skipExisting: skipExisting,
            checksumFile: checksumFile.flatMap { path in checksums.map { (path, $0) } })
        let reporter: Reporter
        if json {
            reporter = JSONReporter()
        } else if batch.listMode {
            reporter = BatchUI(quiet: quiet, count: entries.count)
        } else {
            reporter = SingleUI(quiet: quiet)
        }
        let interrupt = InterruptFlag()
        let signals = SignalTrap(interrupt: interrupt)
        defer { withExtendedLifetime(signals) {} }
        let outcomes = batch.run(reporter: reporter, interrupt: interrupt)
        let code = Batch.exitCode(outcomes)
        if code != 0 {
            throw ExitCode(code)
        }
    }
}

enum FileNameHint {
    static func fromURL(_ url: String) -> String { FileName.fromURLPath(url) }
}

func lastPathComponent(_ path: String) -> String {
    path.split(separator: "/").last.map(String.init) ?? path
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
func readTextFile(_ path: String, what: String) throws(SeggetError) -> String {
    let bytes: [UInt8]
    do throws(Errno) {
        let file = path == "-" ? FileDescriptor.standardInput : try FileDescriptor.open(path, .readOnly)
        defer { if path != "-" { file.close() } }
        bytes = try file.readToEnd(limit: 16 << 20)
    } catch {
        throw SeggetError(.usage, "cannot read \(what) \(path): \(error).")
    }
    if bytes.count > 16 << 20 { throw SeggetError(.usage, "\(what) \(path) is too large (over 16 MiB).") }
    return String(decoding: bytes, as: UTF8.self)
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a file already on disk against a digest.",
        discussion: "Exit 0 when it matches, 6 when it does not, 2 for bad input, 5 when the file cannot be read."
    )

    @Argument(help: "The file to check.")
    var file: String

    @Option(help: "Expected digest ALGO=HEX, with ALGO sha256 or md5 (repeatable).")
    var checksum: [String] = []

    @Option(name: .customLong("checksum-file"), help: "A sha256sum/md5sum style file holding the expected digest.")
    var checksumFile: String?

    @Flag(name: .shortAndLong, help: "Print nothing but errors.")
    var quiet = false

    func validate() throws {
        if checksum.isEmpty && checksumFile == nil {
            throw ValidationError("give --checksum ALGO=HEX or --checksum-file FILE.")
        }
        for c in checksum {
            do { _ = try ExpectedDigest(parsing: c) } catch { throw ValidationError("\(error)") }
        }
    }

    func run() throws {
        var expected = try checksum.map { try ExpectedDigest(parsing: $0) }
        if let cf = checksumFile { expected.append(try loadChecksumFile(cf, outputName: lastPathComponent(file))) }
        let digests: [DigestAlgorithm: [UInt8]]
        do {
            digests = try digestFile(path: file, algorithms: Array(Set(expected.map(\.algorithm))))
        } catch {
            throw SeggetError(.fileSystem, "cannot read \(file): \(error).")
        }
        for e in expected {
            let got = digests[e.algorithm] ?? []
            guard got == e.bytes else {
                throw SeggetError(.verification, "\(e.algorithm.displayName) mismatch for \(file): expected \(e.hex), got \(hexString(got)).")
            }
            if !quiet { writeStderr("segget: \(file): \(e.algorithm.displayName) OK (\(e.hex))\n") }
        }
    }
}

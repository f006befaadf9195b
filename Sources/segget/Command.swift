import ArgumentParser
import Glibc
import Segget
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
        subcommands: [Get.self, Verify.self],
        defaultSubcommand: Get.self
    )
}

/// Options shared by the download command's parsing and tests.
struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Download URL (the default command: `segget URL` is `segget get URL`).",
        discussion: "EXIT CODES:\n  0     success\n\(exitCodeTable)"
    )

    @Argument(help: "The http:// or https:// URL to download.")
    var url: String

    @Option(name: [.short, .customLong("connections")], help: "Parallel connections, 1 to 128 (default 8).")
    var n: Int = 8

    @Option(name: .shortAndLong, help: "Write to this file instead of the name the server suggests.")
    var output: String?

    @Option(name: [.short, .customLong("dir")], help: "Save into this directory (created if missing).")
    var directory: String?

    @Flag(name: .shortAndLong, help: "Overwrite the output file if it exists.")
    var force = false

    @Flag(name: .customLong("no-continue"), help: "Ignore any partial download and start over.")
    var noContinue = false

    @Option(name: .customLong("chunk-size"), help: "Journal and work unit, e.g. 1M or 256k (default 1M).")
    var chunkSize: String = "1M"

    @Flag(name: .shortAndLong, help: "Print nothing but errors.")
    var quiet = false

    @Flag(name: .shortAndLong, help: "Do not verify TLS certificates (only for servers you trust).")
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

    @Option(help: "Expected digest ALGO=HEX, with ALGO sha256 or md5 (repeatable).")
    var checksum: [String] = []

    @Option(name: .customLong("checksum-file"), help: "A sha256sum/md5sum style file holding the expected digest.")
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

    @Option(help: "Give up after this many seconds overall (the partial download is kept).")
    var timeout: Double?

    @Option(name: .customLong("max-speed"), help: "Cap the total download rate, e.g. 20M (bytes per second).")
    var maxSpeed: String?

    @Option(name: .customLong("sync-interval"), help: "Seconds between durability checkpoints (default 5).")
    var syncInterval: Double = 5

    @Flag(help: "Allow HTTP/2 (ranges may then share one connection).")
    var http2 = false

    @Flag(name: .customLong("allow-insecure-redirect"), help: "Follow a redirect from https to plain http.")
    var allowInsecureRedirect = false

    func validate() throws {
        guard (1...128).contains(n) else { throw ValidationError("-n must be between 1 and 128 (got \(n)).") }
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
        if output != nil && directory != nil { throw ValidationError("give either -o FILE or -d DIR, not both.") }
        for h in header where !h.contains(":") {
            throw ValidationError("-H takes 'Name: value' (got '\(h)').")
        }
        for c in checksum {
            do { _ = try ExpectedDigest(parsing: c) } catch { throw ValidationError("\(error)") }
        }
        if noVerify && (!checksum.isEmpty || checksumFile != nil) {
            throw ValidationError("--no-verify cannot be combined with --checksum or --checksum-file.")
        }
    }

    func makeOptions(outputName: String?) throws -> DownloadOptions {
        var o = DownloadOptions()
        o.connections = n
        o.chunkSize = parseByteSize(chunkSize) ?? (1 << 20)
        o.outputPath = output
        o.directory = directory
        o.force = force
        o.resume = !noContinue
        o.retries = retries
        o.retryWait = retryWait
        o.timeout = timeout
        o.maxSpeed = maxSpeed.flatMap(parseByteSize)
        o.checkpointInterval = syncInterval
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
        var options = try makeOptions(outputName: nil)
        if let file = checksumFile {
            options.checksums.append(try loadChecksumFile(file, outputName: output.map { lastPathComponent($0) } ?? FileNameHint.fromURL(url)))
        }
        let ui = TerminalUI(quiet: quiet)
        let interrupt = InterruptFlag()
        let signals = SignalTrap(interrupt: interrupt)
        defer { withExtendedLifetime(signals) {} }
        let download = Download(url: url, options: options)
        do {
            let result = try download.run(
                progress: { ui.progress($0) }, events: { ui.event($0) }, interrupt: interrupt)
            ui.finished(result)
        } catch {
            ui.clearLine()
            throw error
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
    guard let f = fopen(path, "r") else {
        throw SeggetError(.usage, "cannot read the checksum file \(path): \(String(cString: strerror(errno))).")
    }
    defer { fclose(f) }
    var bytes: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buf, 1, buf.count, f)
        if n <= 0 { break }
        bytes.append(contentsOf: buf[0..<n])
        if bytes.count > 16 << 20 { throw SeggetError(.usage, "the checksum file \(path) is too large.") }
    }
    let text = String(decoding: bytes, as: UTF8.self)
    do {
        return try ChecksumFile.expectedDigest(in: text, forFileName: outputName)
    } catch {
        throw SeggetError(.usage, "\(path): \(error)")
    }
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

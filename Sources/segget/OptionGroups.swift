import ArgumentParser
import Segget
import SeggetRPC
import SeggetVerify

// The download command's options, one group per concern, each with the titled section it gets in
// `segget --help`. Every group fills its part of the library's `DownloadOptions` in `apply(to:)`;
// `Get.downloadOptions()` is the one place that runs them all. Checks that involve one group only
// live in its `validate()`; checks across groups (several URLs with `-o`) stay in `Get.validate()`.

/// How many connections, how many files at once, and how the work is cut.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: [.short, .customLong("connections")], parsing: .unconditional,
        help: ArgumentHelp(
            "Parallel connections per file, 1 to 128, or 'auto' to add connections while throughput rises (default 8).",
            valueName: "n"),
        transform: ArgumentValue.connections)
    var n: ConnectionCount = .fixed(8)

    @Option(
        name: [.short, .customLong("jobs")], parsing: .unconditional,
        help: "Files downloaded at once, 1 to 32 (default 1).",
        transform: ArgumentValue.wholeNumber)
    var jobs: Int = 1

    @Option(
        name: .customLong("total-connections"), parsing: .unconditional,
        help: "Connections across all files at once (default: the largest of 16, -n and -j).")
    var totalConnections: Int?

    @Option(
        name: .customLong("max-connections-per-host"), parsing: .unconditional,
        help: ArgumentHelp(
            "Connections at once to one host (scheme, name and port) across all files, 1 to 128 (default: no cap beyond what the host's 429/503 answers teach): the requests in flight, except in a batch sharing HTTP/2 connections (--http2 -j N), whose files go as streams on them.",
            valueName: "n"),
        transform: ArgumentValue.wholeNumber)
    var maxConnectionsPerHost: Int?

    @Option(
        name: .customLong("mirror"),
        help: "Another URL of the same file; ranges are spread over all of them, and where the URL fails at once, one stands in for it (repeatable).")
    var mirrors: [String] = []

    /// The journal's unit: below 16k the journal grows large; above 1G one chunk is most of a file.
    static let chunkSizes = ByteSize.kibibytes(16)...ByteSize.gibibytes(1)

    @Option(
        name: .customLong("chunk-size"), parsing: .unconditional,
        help: ArgumentHelp("Journal and work unit, e.g. 1M or 256k (default 1M).", valueName: "chunk-size"),
        transform: ArgumentValue.size(in: chunkSizes))
    var chunkSize: ByteSize = .mebibytes(1)

    @Option(
        name: .customLong(OptionSchema.maxSpeed.longName), parsing: .unconditional, help: OptionSchema.maxSpeed.argumentHelp,
        transform: OptionSchema.maxSpeed.argument)
    var maxSpeed: String?

    func validate() throws {
        guard (1...32).contains(jobs) else { throw ValidationError("-j takes a number from 1 to 32 (got \(jobs)).") }
        if let t = totalConnections, !(1...512).contains(t) {
            throw ValidationError("--total-connections takes a number from 1 to 512 (got \(t)).")
        }
        if let h = maxConnectionsPerHost, !(1...128).contains(h) {
            throw ValidationError("--max-connections-per-host takes a number from 1 to 128 (got \(h)).")
        }
    }

    func apply(to o: inout DownloadOptions) throws {
        o.connectionCount = n
        o.mirrors = mirrors
        o.chunkSize = chunkSize.bytes
        var own = FileOptions()
        try own.set(OptionSchema.maxSpeed, maxSpeed)
        o.maxSpeed = own.maxSpeed
    }
}

/// Where the file goes and what happens to files already there.
struct OutputOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "Write to this file instead of the name the server suggests (one URL only).")
    var output: String?

    @Option(
        name: [.short, .customLong("dir")], help: OptionSchema.directory.argumentHelp,
        transform: OptionSchema.directory.argument)
    var directory: String?

    @Flag(name: .shortAndLong, help: "Overwrite output files that exist.")
    var force = false

    @Flag(name: .customLong("skip-existing"), help: "Leave output files that exist untouched and count them as done.")
    var skipExisting = false

    @Flag(name: .customLong("no-continue"), help: "Ignore any partial download and start over.")
    var noContinue = false

    func validate() throws {
        if force && skipExisting { throw ValidationError("give either --force or --skip-existing, not both.") }
        if output != nil && directory != nil { throw ValidationError("give either -o FILE or -d DIR, not both.") }
    }

    func apply(to o: inout DownloadOptions) {
        o.outputPath = output
        o.directory = directory
        o.force = force
        o.resume = !noContinue
    }
}

/// The digests the file must match.
struct VerificationOptions: ParsableArguments {
    @Option(help: OptionSchema.checksum.argumentHelp, transform: OptionSchema.checksum.argument)
    var checksum: [String] = []

    @Option(
        name: .customLong("checksum-file"),
        help: "A sha256sum/md5sum style file holding the expected digests, looked up by file name.")
    var checksumFile: String?

    @Flag(name: .customLong("no-verify"), help: "Skip all digest checks, including digests the server sends.")
    var noVerify = false

    func validate() throws {
        if noVerify && (!checksum.isEmpty || checksumFile != nil) {
            throw ValidationError("--no-verify cannot be combined with --checksum or --checksum-file.")
        }
    }

    func apply(to o: inout DownloadOptions) throws {
        o.verifyServerDigests = !noVerify
        var own = FileOptions()
        try own.set(OptionSchema.checksum, checksum)
        o.checksums = own.checksums
    }
}

/// When data is made durable and how it reaches the disk.
struct DurabilityOptions: ParsableArguments {
    @Option(
        name: .customLong("sync-interval"), parsing: .unconditional,
        help: "Seconds between durability checkpoints (default 5).",
        transform: ArgumentValue.seconds)
    var syncInterval: Double = 5

    @Flag(
        name: .customLong("fsync"),
        help:
            "Wait until the finished file is on the disk before giving it its name, so that it survives a power cut right after (slower on a slow disk)."
    )
    var fsync = false

    @Flag(name: .customLong("no-fsync"), help: .hidden)
    var noFsync = false

    @Option(
        name: .customLong("write-path"),
        help:
            "How data reaches the disk: adaptive (O_DIRECT while the disk keeps up, the page cache for the rest), direct, or page-cache (default adaptive).",
        transform: ArgumentValue.writePath)
    var writePath: WritePath = .adaptive

    @Flag(name: .customLong("buffered-io"), help: .hidden)
    var bufferedIO = false

    func validate() throws {
        if fsync && noFsync { throw ValidationError("give either --fsync or --no-fsync, not both.") }
        guard syncInterval > 0 else { throw ValidationError("--sync-interval must be a positive number of seconds.") }
    }

    func apply(to o: inout DownloadOptions) {
        o.checkpointInterval = syncInterval
        o.syncBeforeRename = fsync
        o.writePath = bufferedIO ? .pageCache : writePath
    }
}

/// Retries, their waits, and every time limit.
struct RetryOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: "Retries per range after a failure (default 5).", transform: ArgumentValue.wholeNumber)
    var retries: Int = 5

    @Option(
        name: .customLong("retry-wait"), parsing: .unconditional,
        help: "Seconds before the first retry; doubles each time (default 1).",
        transform: ArgumentValue.seconds)
    var retryWait: Double = 1

    @Option(
        name: .customLong("connect-timeout"), parsing: .unconditional,
        help: "Seconds to wait for a connection (default 15).",
        transform: ArgumentValue.seconds)
    var connectTimeout: Double = 15

    @Option(
        name: .customLong("stall-timeout"), parsing: .unconditional, help: "Drop and retry a connection silent for this many seconds (default 20; 0: never).",
        transform: ArgumentValue.seconds)
    var stallTimeout: Double = 20

    @Option(
        parsing: .unconditional,
        help:
            "Give up on a file after this many seconds in all: probe, redirects, retry waits and transfer (the partial download is kept).",
        transform: ArgumentValue.seconds)
    var timeout: Double?

    @Option(
        name: .customLong("max-retry-wait"), parsing: .unconditional,
        help: "Wait at most this many seconds when a server asks to retry later with Retry-After (default 300).",
        transform: ArgumentValue.seconds)
    var maxRetryWait: Double = 300

    @Option(
        name: .customLong("refresh-command"),
        help: ArgumentHelp(
            "When the link expires mid-download (401, 403 or 410), run this through /bin/sh -c for a new one: it prints the URL; SEGGET_URL, SEGGET_STATUS, SEGGET_BYTES_DONE, SEGGET_TOTAL_BYTES, SEGGET_RENEWAL and SEGGET_OUTPUT are set.",
            valueName: "command"))
    var refreshCommand: String?

    @Option(
        name: .customLong("refresh-timeout"), parsing: .unconditional,
        help: "Seconds the refresh command may run before it is stopped (default 60).",
        transform: ArgumentValue.seconds)
    var refreshTimeout: Double = 60

    func validate() throws {
        guard retries >= 0 && retries <= 100 else { throw ValidationError("--retries must be between 0 and 100.") }
        guard retryWait >= 0 && retryWait <= 3600 else {
            throw ValidationError("--retry-wait must be between 0 and 3600 seconds.")
        }
        guard connectTimeout > 0 else { throw ValidationError("--connect-timeout must be a positive number of seconds.") }
        guard stallTimeout >= 0 else { throw ValidationError("--stall-timeout must be a number of seconds, or 0 to turn the check off.") }
        if let t = timeout, t <= 0 { throw ValidationError("--timeout must be a positive number of seconds.") }
        guard maxRetryWait >= 0 && maxRetryWait <= 86400 else {
            throw ValidationError("--max-retry-wait must be between 0 and 86400 seconds.")
        }
        guard refreshTimeout > 0 && refreshTimeout <= 3600 else {
            throw ValidationError("--refresh-timeout must be more than 0 and at most 3600 seconds.")
        }
        if let c = refreshCommand, c.allSatisfy({ $0 == " " || $0 == "\t" }) {
            throw ValidationError("--refresh-command is empty.")
        }
    }

    func apply(to o: inout DownloadOptions) {
        o.retries = retries
        o.retryWait = retryWait
        o.timeout = timeout
        o.maxRetryWait = maxRetryWait
        o.transfer.connectTimeout = connectTimeout
        o.transfer.stallTimeout = stallTimeout
        o.linkRenewer = refreshCommand.map { RefreshCommand(command: $0, timeout: refreshTimeout).renewer }
    }
}

/// What each request carries; shared by the download command and `segget add`. Names, help and
/// checks come from ``OptionSchema``.
struct RequestOptions: ParsableArguments {
    @Option(name: [.customShort("H"), .long], help: OptionSchema.header.argumentHelp, transform: OptionSchema.header.argument)
    var header: [String] = []

    @Option(
        name: [.customShort("A"), .customLong("user-agent")], help: OptionSchema.userAgent.argumentHelp,
        transform: OptionSchema.userAgent.argument)
    var userAgent: String?

    @Option(name: [.customShort("e"), .long], help: OptionSchema.referer.argumentHelp, transform: OptionSchema.referer.argument)
    var referer: String?

    @Option(help: OptionSchema.proxy.argumentHelp, transform: OptionSchema.proxy.argument)
    var proxy: String?

    /// The same settings as an input file's entry or a daemon task would give them.
    func fileOptions() throws -> FileOptions {
        var o = FileOptions()
        try o.set(OptionSchema.header, header)
        try o.set(OptionSchema.userAgent, userAgent)
        try o.set(OptionSchema.referer, referer)
        try o.set(OptionSchema.proxy, proxy)
        return o
    }
}

/// TLS, credentials, cookies and protocol choices of the download command.
struct NetworkOptions: ParsableArguments {
    @Flag(name: [.customShort("k"), .long], help: "Do not verify TLS certificates (only for servers you trust).")
    var insecure = false

    @Option(name: [.customLong("ca-certificate"), .customLong("cacert")],
            help: ArgumentHelp("Verify servers' TLS certificates against the authorities in this PEM file instead of the system's.", valueName: "file"))
    var caCertificate: String?

    @Option(help: ArgumentHelp("Show this PEM client certificate to servers that ask for one (its unencrypted key in the same file, or in --private-key).", valueName: "file"))
    var certificate: String?

    @Option(name: .customLong("private-key"), help: ArgumentHelp("The unencrypted PEM private key of --certificate.", valueName: "file"))
    var privateKey: String?

    @Flag(name: .customLong("proxy-insecure"), help: "Do not verify an https proxy's TLS certificate (only for a proxy you trust).")
    var proxyInsecure = false

    @OptionGroup var proxyTLS: ProxyTLSOptions

    @Option(name: .shortAndLong, help: "Credentials 'USER:PASSWORD' for HTTP authentication.")
    var user: String?

    @Flag(help: "Read credentials from ~/.netrc.")
    var netrc = false

    @Option(name: [.customShort("b"), .long], help: "Cookies 'NAME=VALUE; ...' or a cookie file to read.")
    var cookie: String?

    @Flag(help: "Allow HTTP/2: a file's ranges keep a connection each; a batch's files (-j > 1) share connections as streams.")
    var http2 = false

    @Flag(name: .customLong("allow-insecure-redirect"), help: "Follow a redirect from https to plain http.")
    var allowInsecureRedirect = false

    func apply(to o: inout DownloadOptions) throws {
        o.transfer.insecure = insecure
        o.transfer.tls = try tlsFiles(caCertificate: caCertificate, certificate: certificate, privateKey: privateKey)
        o.transfer.proxyInsecure = proxyInsecure
        o.transfer.proxyTLS = try proxyTLS.files()
        o.transfer.credentials = user
        o.transfer.useNetrc = netrc
        o.transfer.cookie = cookie
        o.transfer.http2 = http2
        o.transfer.allowInsecureRedirect = allowInsecureRedirect
    }
}

/// The files for an https proxy's TLS, apart from the server's, on the command line and
/// `segget daemon` alike (the daemon has no `--proxy-insecure`: it always verifies).
struct ProxyTLSOptions: ParsableArguments {
    @Option(name: .customLong("proxy-ca-certificate"),
            help: ArgumentHelp("Verify an https proxy's TLS certificate against the authorities in this PEM file instead of the system's.", valueName: "file"))
    var caCertificate: String?

    @Option(name: .customLong("proxy-certificate"),
            help: ArgumentHelp("Show this PEM client certificate to an https proxy that asks for one (its key in the same file, or in --proxy-private-key).", valueName: "file"))
    var certificate: String?

    @Option(name: .customLong("proxy-private-key"), help: ArgumentHelp("The unencrypted PEM private key of --proxy-certificate.", valueName: "file"))
    var privateKey: String?

    func files() throws(SeggetError) -> TLSFiles {
        try tlsFiles(caCertificate: caCertificate, certificate: certificate, privateKey: privateKey, proxy: true)
    }
}

/// How progress and results are printed.
struct FormatOptions: ParsableArguments {
    @Flag(help: "Print one JSON object per line on stdout instead of human progress (see docs/json.md).")
    var json = false

    @Flag(name: .shortAndLong, help: "Print nothing but errors.")
    var quiet = false
}

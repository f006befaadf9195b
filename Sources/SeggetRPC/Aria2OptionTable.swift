import Segget
import SeggetQueue

/// Every option aria2 documents, and where segget's answer for it comes from: a real setting of the
/// daemon or of a download (`mapped`), or a fixed value with the reason it cannot change (`fixed`).
///
/// `getGlobalOption` answers every entry; `getOption` the per-download ones. The key set is aria2
/// 1.36.0's answer (`Tests/SeggetRPCTests/Fixtures/aria2-*-options.json`, checked by a test) plus
/// ``addedSince1_36``, as the daemon answers `getVersion` with 1.37.0.
/// Options aria2 answers only once set (`header`, `referer`, `all-proxy`, `out`, `checksum`) are
/// answered by segget the same way: present when the download sets them.
public enum Aria2OptionTable {
    /// Options aria2 1.37.0 answers in `getGlobalOption` that the recorded 1.36.0 answer lacks.
    public static let addedSince1_36: Set<String> = ["no-want-digest-header"]
    /// segget's own global options, beyond aria2's: `speed-schedule` (see `SpeedSchedule`).
    public static let seggetOnly: Set<String> = ["speed-schedule"]

    /// A segget setting an aria2 option stands for.
    public enum Mapping: String, Sendable, CaseIterable {
        /// One of ``OptionSchema``'s per-file options, under its aria2 name: the download's value as
        /// the schema writes it, else the daemon's default (``perFileDefault(_:_:)``; none for `header`,
        /// `referer`, `all-proxy`, `out` and `checksum`, which aria2 answers only once set).
        case perFile
        case maxConcurrentDownloads
        /// The overall limit in force now: the speed schedule's window, else the daemon's own.
        case maxOverallDownloadLimit
        /// segget's time-of-day schedule of the overall limit (canonical text; `none`: no windows).
        case speedSchedule
        /// segget verifies certificates unless a download was started with `-k` on the command line.
        case checkCertificate
        /// The daemon's `--ca-certificate`, else the system's bundle (Debian's path, as aria2c answers).
        case caCertificate
        /// The daemon's `--certificate` and `--private-key`; left out when not given, as aria2c does.
        case certificate, privateKey
        /// The length of the pieces in `bitfield` (``Aria2Status/pieceLength``).
        case pieceLength
        /// The smallest piece of work a connection takes: segget's chunk.
        case minSplitSize
        /// Seconds between journal checkpoints.
        case autoSaveInterval
        case rpcListenPort
        case rpcListenAll
        case rpcMaxRequestSize
    }

    /// Why a fixed option has the value it has.
    public enum Reason: String, Sendable {
        case bitTorrent = "segget has no BitTorrent or DHT; aria2's default is reported."
        case metalink = "segget's Metalink support has no such setting (it reads documents given to it, by aria2.addMetalink or the command line); aria2's default is reported."
        case ftp = "segget downloads HTTP and HTTPS only; aria2's default is reported."
        case console = "the daemon has no console readout; it logs one line per event to stderr."
        case aria2Files = "segget reads no aria2 configuration file; its settings are its flags."
        case noUpload = "segget uploads nothing."
        case resumes = "segget always resumes from its journal."
        case behaviour = "what segget always does; not changeable."
        case aria2Default = "no segget counterpart; aria2's default is reported."
    }

    public enum Source: Sendable, Equatable {
        case mapped(Mapping)
        /// A fixed value; `why` says why it does not change.
        case fixed(String, why: String)
    }

    public struct Entry: Sendable {
        public let name: String
        /// Answered by `getOption` too (aria2's per-download options).
        public let perDownload: Bool
        /// Answered by `getGlobalOption`.
        public let global: Bool
        public let source: Source

        init(_ name: String, perDownload: Bool, _ mapping: Mapping, global: Bool = true) {
            self.name = name
            self.perDownload = perDownload
            self.global = global
            self.source = .mapped(mapping)
        }

        init(_ name: String, perDownload: Bool, fixed value: String, _ reason: Reason) {
            self.init(name, perDownload: perDownload, fixed: value, why: reason.rawValue)
        }

        init(_ name: String, perDownload: Bool, fixed value: String, why: String) {
            self.name = name
            self.perDownload = perDownload
            self.global = true
            self.source = .fixed(value, why: why)
        }
    }

    /// Sorted by name, as aria2 answers: the schema's per-file options, and every other option aria2 has.
    public static let entries: [Entry] = (perFileEntries + otherEntries).sorted { $0.name < $1.name }

    /// Answered by `getGlobalOption` too when the daemon has a default for it.
    static let perFileEntries: [Entry] = OptionSchema.all.map { spec in
        Entry(
            spec.key, perDownload: true, .perFile,
            global: perFileDefault(spec.key, Context(settings: QueueSettings(downloadRoot: "/"))) != nil)
    }

    static let otherEntries: [Entry] = [
        .init("allow-overwrite", perDownload: true, fixed: "false", why: "segget never overwrites an existing file."),
        .init("allow-piece-length-change", perDownload: true, fixed: "false", .aria2Default),
        .init("always-resume", perDownload: true, fixed: "true", .resumes),
        .init("async-dns", perDownload: true, fixed: "true", .aria2Default),
        .init("auto-file-renaming", perDownload: true, fixed: "true", why: "segget numbers a taken name (name.1.ext)."),
        .init("auto-save-interval", perDownload: false, .autoSaveInterval),
        .init("bt-detach-seed-only", perDownload: false, fixed: "false", .bitTorrent),
        .init("bt-enable-hook-after-hash-check", perDownload: true, fixed: "true", .bitTorrent),
        .init("bt-enable-lpd", perDownload: true, fixed: "false", .bitTorrent),
        .init("bt-force-encryption", perDownload: true, fixed: "false", .bitTorrent),
        .init("bt-hash-check-seed", perDownload: true, fixed: "true", .bitTorrent),
        .init("bt-load-saved-metadata", perDownload: true, fixed: "false", .bitTorrent),
        .init("bt-max-open-files", perDownload: false, fixed: "100", .bitTorrent),
        .init("bt-max-peers", perDownload: true, fixed: "55", .bitTorrent),
        .init("bt-metadata-only", perDownload: true, fixed: "false", .bitTorrent),
        .init("bt-min-crypto-level", perDownload: true, fixed: "plain", .bitTorrent),
        .init("bt-remove-unselected-file", perDownload: true, fixed: "false", .bitTorrent),
        .init("bt-request-peer-speed-limit", perDownload: true, fixed: "51200", .bitTorrent),
        .init("bt-require-crypto", perDownload: true, fixed: "false", .bitTorrent),
        .init("bt-save-metadata", perDownload: true, fixed: "false", .bitTorrent),
        .init("bt-seed-unverified", perDownload: true, fixed: "false", .bitTorrent),
        .init("bt-stop-timeout", perDownload: true, fixed: "0", .bitTorrent),
        .init("bt-tracker-connect-timeout", perDownload: true, fixed: "60", .bitTorrent),
        .init("bt-tracker-interval", perDownload: true, fixed: "0", .bitTorrent),
        .init("bt-tracker-timeout", perDownload: true, fixed: "60", .bitTorrent),
        .init("ca-certificate", perDownload: false, .caCertificate),
        .init("certificate", perDownload: false, .certificate),
        .init("check-certificate", perDownload: false, .checkCertificate),
        .init("check-integrity", perDownload: true, fixed: "false", .behaviour),
        .init("conditional-get", perDownload: true, fixed: "false", .behaviour),
        .init("conf-path", perDownload: false, fixed: "~/.config/aria2/aria2.conf", .aria2Files),
        .init("console-log-level", perDownload: false, fixed: "notice", .console),
        .init("content-disposition-default-utf8", perDownload: true, fixed: "false", .aria2Default),
        .init("continue", perDownload: true, fixed: "true", .resumes),
        .init("daemon", perDownload: false, fixed: "false", why: "segget daemon stays in the foreground."),
        .init("deferred-input", perDownload: false, fixed: "false", .aria2Default),
        .init("dht-file-path", perDownload: false, fixed: "~/.cache/aria2/dht.dat", .bitTorrent),
        .init("dht-file-path6", perDownload: false, fixed: "~/.cache/aria2/dht6.dat", .bitTorrent),
        .init("dht-listen-port", perDownload: false, fixed: "6881-6999", .bitTorrent),
        .init("dht-message-timeout", perDownload: false, fixed: "10", .bitTorrent),
        .init("disable-ipv6", perDownload: false, fixed: "false", .aria2Default),
        .init("disk-cache", perDownload: false, fixed: "0", why: "segget keeps no aria2-style disk cache."),
        .init("download-result", perDownload: false, fixed: "default", .console),
        .init("dry-run", perDownload: true, fixed: "false", .aria2Default),
        .init("dscp", perDownload: false, fixed: "0", .aria2Default),
        .init("enable-color", perDownload: false, fixed: "true", .console),
        .init("enable-dht", perDownload: false, fixed: "true", .bitTorrent),
        .init("enable-dht6", perDownload: false, fixed: "false", .bitTorrent),
        .init("enable-http-keep-alive", perDownload: true, fixed: "true", .behaviour),
        .init("enable-http-pipelining", perDownload: true, fixed: "false", .behaviour),
        .init("enable-mmap", perDownload: true, fixed: "false", .aria2Default),
        .init("enable-peer-exchange", perDownload: true, fixed: "true", .bitTorrent),
        .init("enable-rpc", perDownload: false, fixed: "true", why: "segget daemon always serves RPC."),
        .init("event-poll", perDownload: false, fixed: "epoll", why: "SwiftNIO on Linux polls with epoll."),
        .init(
            "file-allocation", perDownload: true, fixed: "falloc",
            why: "segget reserves the whole file with posix_fallocate when the length is known."),
        .init("follow-metalink", perDownload: true, fixed: "true", .metalink),
        .init("follow-torrent", perDownload: true, fixed: "true", .bitTorrent),
        .init("force-save", perDownload: true, fixed: "false", .aria2Default),
        .init("ftp-pasv", perDownload: true, fixed: "true", .ftp),
        .init("ftp-reuse-connection", perDownload: true, fixed: "true", .ftp),
        .init("ftp-type", perDownload: true, fixed: "binary", .ftp),
        .init("hash-check-only", perDownload: true, fixed: "false", .aria2Default),
        .init("help", perDownload: false, fixed: "#basic", .console),
        .init("http-accept-gzip", perDownload: true, fixed: "false", .behaviour),
        .init("http-auth-challenge", perDownload: true, fixed: "false", .aria2Default),
        .init("http-no-cache", perDownload: true, fixed: "false", .aria2Default),
        .init("human-readable", perDownload: false, fixed: "true", .console),
        .init("keep-unfinished-download-result", perDownload: false, fixed: "true", .aria2Default),
        .init("listen-port", perDownload: false, fixed: "6881-6999", .bitTorrent),
        .init("log-level", perDownload: false, fixed: "debug", .console),
        .init(
            "lowest-speed-limit", perDownload: true, fixed: "0",
            why: "segget re-dials slow connections instead of failing on a floor."),
        .init("max-concurrent-downloads", perDownload: false, .maxConcurrentDownloads),
        .init("max-download-result", perDownload: false, fixed: "1000", .aria2Default),
        .init("max-file-not-found", perDownload: true, fixed: "0", .aria2Default),
        .init("max-mmap-limit", perDownload: true, fixed: "9223372036854775807", .aria2Default),
        .init("max-overall-download-limit", perDownload: false, .maxOverallDownloadLimit),
        .init("max-overall-upload-limit", perDownload: false, fixed: "0", .noUpload),
        .init("max-resume-failure-tries", perDownload: true, fixed: "0", .aria2Default),
        .init("max-upload-limit", perDownload: true, fixed: "0", .noUpload),
        .init("metalink-enable-unique-protocol", perDownload: true, fixed: "true", .metalink),
        .init("metalink-preferred-protocol", perDownload: true, fixed: "none", .metalink),
        .init("min-split-size", perDownload: true, .minSplitSize),
        .init("min-tls-version", perDownload: false, fixed: "TLSv1.2", .aria2Default),
        .init("netrc-path", perDownload: false, fixed: "~/.netrc", .aria2Files),
        .init("no-conf", perDownload: false, fixed: "true", .aria2Files),
        .init("no-file-allocation-limit", perDownload: true, fixed: "5242880", .aria2Default),
        .init(
            "no-want-digest-header", perDownload: false, fixed: "true",
            why: "segget sends no Want-Digest header; it checks the digests a server sends unasked."),
        .init("no-netrc", perDownload: true, fixed: "true", why: "the daemon reads no .netrc."),
        .init("optimize-concurrent-downloads", perDownload: false, fixed: "false", .aria2Default),
        .init("parameterized-uri", perDownload: true, fixed: "false", .aria2Default),
        .init("pause-metadata", perDownload: true, fixed: "false", .bitTorrent),
        .init("peer-agent", perDownload: false, fixed: "aria2/1.37.0", .bitTorrent),
        .init("peer-id-prefix", perDownload: false, fixed: "A2-1-37-0-", .bitTorrent),
        .init("piece-length", perDownload: true, .pieceLength),
        .init("private-key", perDownload: false, .privateKey),
        .init("proxy-method", perDownload: true, fixed: "get", .aria2Default),
        .init("quiet", perDownload: false, fixed: "false", .console),
        .init("realtime-chunk-checksum", perDownload: true, fixed: "true", .metalink),
        .init("remote-time", perDownload: true, fixed: "false", .behaviour),
        .init("remove-control-file", perDownload: true, fixed: "false", .aria2Default),
        .init("reuse-uri", perDownload: true, fixed: "true", .aria2Default),
        .init("rlimit-nofile", perDownload: false, fixed: "1024", .aria2Default),
        .init(
            "rpc-allow-origin-all", perDownload: false, fixed: "true",
            why: "segget sends Access-Control-Allow-Origin: * (the token guards every call)."),
        .init("rpc-listen-all", perDownload: false, .rpcListenAll),
        .init("rpc-listen-port", perDownload: false, .rpcListenPort),
        .init("rpc-max-request-size", perDownload: false, .rpcMaxRequestSize),
        .init("rpc-save-upload-metadata", perDownload: true, fixed: "true", .bitTorrent),
        .init(
            "rpc-secure", perDownload: false, fixed: "false",
            why: "segget serves plain HTTP; use a TLS proxy for remote access."),
        .init("save-not-found", perDownload: true, fixed: "true", .aria2Default),
        .init("save-session-interval", perDownload: false, fixed: "0", .aria2Default),
        .init("seed-ratio", perDownload: true, fixed: "1.0", .bitTorrent),
        .init("server-stat-timeout", perDownload: false, fixed: "86400", .aria2Default),
        .init("show-console-readout", perDownload: false, fixed: "false", .console),
        .init("show-files", perDownload: false, fixed: "false", .console),
        .init("socket-recv-buffer-size", perDownload: false, fixed: "0", why: "segget leaves SO_RCVBUF to the kernel."),
        .init("speed-schedule", perDownload: false, .speedSchedule),
        .init("stderr", perDownload: false, fixed: "false", .console),
        .init("stop", perDownload: false, fixed: "0", .aria2Default),
        .init("stream-piece-selector", perDownload: true, fixed: "default", .aria2Default),
        .init("summary-interval", perDownload: false, fixed: "60", .console),
        .init("truncate-console-readout", perDownload: false, fixed: "true", .console),
        .init("uri-selector", perDownload: true, fixed: "feedback", .aria2Default),
        .init("use-head", perDownload: true, fixed: "false", why: "segget probes with a GET, never HEAD."),
    ]

    /// What mapped options are read from.
    public struct Context: Sendable {
        public var settings: QueueSettings
        /// The daemon's listening port and address, and its request size limit.
        public var rpcPort: Int
        public var listenAll: Bool
        public var maxRequestBytes: Int
        /// The overall limit in force now (``DownloadQueue/currentOverallSpeed``); nil: the settings'.
        public var overallSpeedNow: Int64?

        public init(
            settings: QueueSettings, rpcPort: Int = 6800, listenAll: Bool = false, maxRequestBytes: Int = 2 << 20,
            overallSpeedNow: Int64? = nil
        ) {
            self.overallSpeedNow = overallSpeedNow
            self.settings = settings
            self.rpcPort = rpcPort
            self.listenAll = listenAll
            self.maxRequestBytes = maxRequestBytes
        }
    }

    /// A download's options as the mapping reads them: the task's own, and its resolved directory.
    public struct Download: Sendable {
        public var options: TaskOptions
        public var directory: String

        public init(options: TaskOptions, directory: String) {
            self.options = options
            self.directory = directory
        }
    }

    /// `getGlobalOption`'s answer.
    public static func global(_ context: Context) -> JSON {
        render(entries.filter(\.global), context, download: nil)
    }

    /// `getOption`'s answer for one download.
    public static func download(_ download: Download, _ context: Context) -> JSON {
        render(entries.filter(\.perDownload), context, download: download)
    }

    static func render(_ chosen: [Entry], _ context: Context, download: Download?) -> JSON {
        var members: [(String, JSON)] = []
        for entry in chosen {
            switch entry.source {
            case .fixed(let value, _): members.append((entry.name, .string(value)))
            case .mapped(let m):
                if let value = value(of: m, entry.name, context, download) {
                    members.append((entry.name, .string(value)))
                }
            }
        }
        return .object(members)
    }

    /// The daemon's answer for a per-file option a download does not set; nil when aria2 leaves it out.
    public static func perFileDefault(_ key: String, _ context: Context) -> String? {
        let s = context.settings
        switch key {
        case OptionSchema.directory.key: return s.downloadRoot
        case OptionSchema.split.key: return String(s.defaultConnections)
        case OptionSchema.perServer.key: return String(s.maxConnectionsPerServer)
        // segget has no default per-download cap.
        case OptionSchema.maxSpeed.key: return "0"
        case OptionSchema.userAgent.key: return DownloadOptions().transfer.userAgent
        // The queue's, for a task that sets none: segget's defaults (aria2's are 5 tries, 0 s, 60 s
        // and 60 s) until changeGlobalOption changes them.
        case OptionSchema.maxTries.key: return String(s.taskRetries.maxTries)
        case OptionSchema.retryWait.key: return String(s.taskRetries.retryWait)
        case OptionSchema.timeout.key: return String(s.taskRetries.timeout)
        case OptionSchema.connectTimeout.key: return String(s.taskRetries.connectTimeout)
        default: return nil
        }
    }

    /// A download's per-file option as the schema writes it (aria2 answers its cumulative `header` as
    /// one string, a line per header); its resolved directory for `dir`.
    static func perFileValue(_ key: String, _ download: Download) -> String? {
        if key == OptionSchema.directory.key { return download.directory }
        guard let spec = OptionSchema.spec(key) else { return nil }
        let values = spec.values(download.options)
        guard let first = values.first else { return nil }
        return key == OptionSchema.header.key ? values.map { $0 + "\n" }.joined() : first
    }

    /// The value of a mapped option named `name`; nil when aria2 would leave it out (an option not set).
    public static func value(of mapping: Mapping, _ name: String, _ context: Context, _ download: Download?) -> String? {
        let s = context.settings
        let engine = DownloadOptions()
        switch mapping {
        case .perFile: return download.flatMap { perFileValue(name, $0) } ?? perFileDefault(name, context)
        case .maxConcurrentDownloads: return String(s.maxActive)
        case .maxOverallDownloadLimit: return String(context.overallSpeedNow ?? s.maxOverallSpeed ?? 0)
        case .speedSchedule: return s.speedSchedule?.description ?? SpeedSchedule.noneText
        case .checkCertificate: return engine.transfer.insecure ? "false" : "true"
        case .caCertificate: return s.tls.caCertificate ?? "/etc/ssl/certs/ca-certificates.crt"
        case .certificate: return s.tls.clientCertificate
        case .privateKey: return s.tls.privateKey
        case .pieceLength: return String(TaskSnapshot.pieceLength)
        case .minSplitSize: return String(engine.chunkSize)
        case .autoSaveInterval: return String(Int(engine.checkpointInterval.rounded()))
        case .rpcListenPort: return String(context.rpcPort)
        case .rpcListenAll: return context.listenAll ? "true" : "false"
        case .rpcMaxRequestSize: return String(context.maxRequestBytes)
        }
    }
}

import Dispatch
import Segget
import SeggetVerify
import Synchronization
import SeggetSystem

/// What happened to one file of a run.
struct Outcome: Sendable {
    enum Status: Sendable {
        case done(DownloadResult)
        /// Left alone: `--skip-existing` found the output file already there, or an earlier run of
        /// the same URL finished it.
        case skipped(SkipReason)
        case failed(SeggetError)
        /// The run was interrupted before this file started.
        case notStarted
    }
    /// 1-based position in the list.
    var id: Int
    var url: String
    var path: String?
    var status: Status
}

/// A file about to be downloaded, as announced to a reporter.
struct JobStart: Sendable {
    var id: Int
    var url: String
    /// Where the file will be saved; nil when only the download will decide (one URL, human output).
    var path: String?
    var size: Int64?
    var connections: Int
    var autoConnections: Bool
}

/// Why a file of a batch was left alone.
enum SkipReason: String, Sendable {
    /// `--skip-existing` found a file under its name.
    case exists
    /// Its `FinishedMark` shows that an earlier run of the same URL finished it (a list run again).
    case completed

    /// The words after the path in a skip line.
    var sentence: String {
        switch self {
        case .exists: "already exists"
        case .completed: "was completed by an earlier run of this URL"
        }
    }
}

/// Receives everything the user sees. Called from a batch's loop thread and from its steps queue
/// (see `DownloadLoop`), possibly both at once.
protocol Reporter: Sendable {
    func started(_ job: JobStart)
    func progress(id: Int, _ p: DownloadProgress)
    /// Whether ``progress(id:_:)`` shows anything. Where it does not (`-q`), no download builds its
    /// progress at all.
    var wantsProgress: Bool { get }
    func event(id: Int, _ e: DownloadEvent)
    func finished(id: Int, url: String, _ r: DownloadResult)
    func skipped(id: Int, url: String, path: String, reason: SkipReason)
    func failed(id: Int, url: String, path: String?, _ e: SeggetError)
    /// Once, after every file has ended.
    func summary(_ outcomes: [Outcome], seconds: Double)
}

extension Reporter {
    var wantsProgress: Bool { true }
}

/// Downloads a list of files, `jobs` at a time, under one connection budget.
///
/// Rules (documented in `segget --help` and the README):
/// - Budget: all files together use at most `totalConnections` (default: the largest of 16, `-n`
///   and `-j`). At most that many files run at once, and each gets `min(-n, budget / jobs)` connections.
///   Once no file is left to start, the shares of the files that ended are lent to the files
///   still running (`ConnectionLender`), each up to `-n`: the last files of a list do not run on one
///   connection each while the rest of the budget sits unused.
/// - Names: in list mode (and with `--json` or `--skip-existing`) every file's path is decided before it starts, in list order, through
///   `OrderedNames` (`file.bin`, `file.1.bin`, …), from `out=`, else the server's suggestion (one
///   probing request), else the URL.
/// - Exit status: 0 when all succeeded (or were skipped), 130 when interrupted, else the code of
///   the first failed file in list order.
struct Batch: Sendable {
    let entries: [InputFile.Entry]
    let base: DownloadOptions
    let jobs: Int
    let totalConnections: Int?
    /// `--max-connections-per-host`; with or without it, the run's files share one `HostBudget`, so
    /// that a limit learnt from a host's refusals in one file holds for the others.
    var maxConnectionsPerHost: Int? = nil
    /// More than one URL, or `-i`: paths decided up front, a summary table at the end.
    let listMode: Bool
    /// Decide every path before its download starts (lists, `--json`, `--skip-existing`).
    let planPaths: Bool
    let skipExisting: Bool
    /// `--checksum-file`: its path and text.
    let checksumFile: (path: String, text: String)?

    /// `--total-connections`, or by default the largest of 16, `-n` and `-j`: `-j N` runs N files
    /// at once (with `--http2`, N connections) without `--total-connections` raised beside it.
    var budget: Int { totalConnections ?? max(16, base.connections, jobs) }
    var parallelFiles: Int { max(1, min(jobs, budget, entries.count)) }
    var connectionsPerFile: Int { min(base.connections, max(1, budget / parallelFiles)) }

    /// With `--http2` and more than one file at once, the batch multiplexes: a host's files share
    /// its HTTP/2 connections as streams, `-j` counting connections rather than files (see
    /// `http2Sharing`, and `LoopRun`'s `inFlightCap` for how many files are in flight).
    var multiplexes: Bool { base.transfer.http2 && parallelFiles > 1 && !DownloadLoop.benchmarkBatchBefore }
    /// Files in flight where the batch multiplexes, from the start and while every answer came over
    /// HTTP/2 for a file no larger than `largeFileBytes`: `streamsPerConnection` on each connection.
    /// Those beyond the first `parallelFiles` probe for their first `speculativeProbeBytes` only,
    /// and a large one waits for one of `parallelFiles` places to download (`LargeDownloadPlaces`).
    var parallelFilesOverHTTP2: Int {
        multiplexes ? max(parallelFiles, min(multiplexedConnections * Self.streamsPerConnection, entries.count)) : parallelFiles
    }
    /// The connections to one host where the batch multiplexes: `parallelFiles` (`-j`), or fewer
    /// where `--max-connections-per-host` says so. That option caps connections there, not
    /// requests: each connection carries its streams (`http2Sharing`).
    var multiplexedConnections: Int { min(parallelFiles, maxConnectionsPerHost ?? parallelFiles) }
    /// Where the batch multiplexes under `--max-connections-per-host`, the cap on requests in flight
    /// to a host once it answered over HTTP/2: the streams of its capped connections. Until then
    /// the cap is the option's number (one request a connection, as over HTTP/1.1), and again from
    /// the first answer not over HTTP/2 or of a large file (see `LoopRun.learnProtocol`): libcurl is
    /// never handed more requests than its connections to the host carry at once, so none waits in
    /// libcurl for a connection that the batch's held probes keep (files wait for their slots in
    /// list order instead). nil: no cap, or no multiplexing.
    var requestsPerHostOverHTTP2: Int? {
        guard maxConnectionsPerHost != nil, let sharing = http2Sharing(loops: 1) else { return nil }
        return multiplexedConnections * sharing.streams
    }
    /// How a loop of the batch shares HTTP/2 connections (see `DownloadLoop.init`), nil where the
    /// batch does not multiplex: its part of the `parallelFiles` connections (`loops` loops share
    /// them; a batch that multiplexes has one, `loopLimit`), each carrying as many streams as spreads
    /// the files in flight evenly over them, at most `streamsPerConnection`. libcurl gives a request
    /// the first connection with a stream free: at 32 streams, 400 files would fill 12 of 16
    /// connections and leave 4 with one file each.
    func http2Sharing(loops: Int) -> (streams: Int, connections: Int)? {
        guard multiplexes else { return nil }
        let all = multiplexedConnections
        let spread = (parallelFilesOverHTTP2 + all - 1) / all
        return (min(Self.streamsPerConnection, max(1, spread)), max(1, all / max(1, loops)))
    }
    /// 400 files of 64 KiB over HTTPS through WAN link a (80 ms, 0.1 % loss), `-j 16`, 8 connections
    /// a loop, every file in flight from the start: at 25-32 streams each 1.24-1.58 s, at 50-100
    /// 1.49-1.98 s, at 16 (256 files in flight) 1.60-1.85 s (Benchmarks/RESULTS.md, issue 38). On
    /// one loop's 16 connections, 25 each: 1.22-1.45 s; on 24 or 32 connections no faster, on 50 of
    /// 8 streams 1.5-2.7 s (the batch section of issue 38).
    static let streamsPerConnection = 32
    /// What a file's probe asks for when it starts while the batch's `parallelFiles` places are
    /// taken (`probeLimit`): a small file whole, of a large one its head. 512 such probes (`-j 16`,
    /// 32 streams each) keep at most 32 MiB.
    static let speculativeProbeBytes: Int64 = 64 << 10
    /// A file with more than this (a probe's prefix) is large: its download waits for a place, and
    /// an answer that shows one ends the batch's many files at once.
    static let largeFileBytes: Int64 = 1 << 20

    /// Whether a file, as its probe found it, is large: not brought whole, and either larger than
    /// `largeFileBytes` or of a size nobody gave.
    static func isLarge(totalBytes: Int64?, whole: Bool) -> Bool {
        !whole && (totalBytes.map { $0 > largeFileBytes } ?? true)
    }

    /// Whether a file started with `inFlight` files of the batch in flight probes for
    /// `speculativeProbeBytes` only (`DownloadOptions.probeLimit`): where the batch multiplexes and
    /// its `parallelFiles` places are taken.
    func speculative(inFlight: Int) -> Bool {
        multiplexes && inFlight >= parallelFiles
    }

    /// The run's options with the entry's own lines and this file's share of the budget (an entry's
    /// `split=` may ask for fewer connections than its share, never more).
    func options(for entry: InputFile.Entry) -> DownloadOptions {
        var own = entry.options
        own.connections = min(own.connections ?? connectionsPerFile, connectionsPerFile)
        var o = base.applying(own)
        if let m = entry.metalink { o = o.applying(m) }
        if !entry.mirrors.isEmpty { o.mirrors = entry.mirrors }
        o.likelyName = entry.options.outputName
        o.transfer.multiplexed = multiplexes
        o.ofList = listMode
        return o
    }

    /// `options(for:)`, with the loans of `lender`: its share, and up to -n while others are spare
    /// near the end of the list; and the run's budget per host and reading of its directories.
    func options(
        for entry: InputFile.Entry, lender: ConnectionLender?, hostBudget: HostBudget, startingNames: StartingNames?
    ) -> DownloadOptions {
        var opts = options(for: entry)
        opts.hostBudget = hostBudget
        opts.startingNames = startingNames
        if let lender {
            opts.lender = lender
            opts.connectionsWithLoans = base.connections
        }
        return opts
    }

    /// Whether a file is probed before its path is decided: to learn the server's name for it (and
    /// its size for the start message). A checksum file is looked up by the name the file will be
    /// saved under, which may come from the server (Content-Disposition), so then too.
    func probes(_ opts: DownloadOptions) -> Bool {
        planPaths || (checksumFile != nil && opts.outputPath == nil)
    }

    /// Whether the file at `path` is one an earlier run of `url` finished and nobody changed since
    /// (its `FinishedMark`), to be left alone: never with `--force` or `--no-continue`. Where the
    /// file's answer is in (`info`), also only while the server sends its length and the version it
    /// was downloaded as; otherwise the download finds the change and says so.
    func isFinishedEarlier(path: String, url: String, options opts: DownloadOptions, info: RemoteFileInfo? = nil) -> Bool {
        guard !opts.force, opts.resume, opts.startingNames?.mayHaveExisted(path) != false else { return false }
        return FinishedMark.stillServed(
            at: path, url: url, expected: opts.checksums, length: info?.totalBytes, version: info?.serverVersion) != nil
    }

    /// Whether file `k` may go without its probe, which is made to learn the name the server gives
    /// it: the path it takes when no server gives a name (`out=`, or the URL's last part, numbered
    /// after the files before it in `guesses`, which each file of the list passes in turn) holds the
    /// file an earlier run of its URL finished. Its path is still decided in list order and looked
    /// at again in `ready`; where the two differ, its download probes for itself.
    func finishedEarlier(_ k: Int, options opts: DownloadOptions, guesses: inout OutputNames) -> Bool {
        // A new batch into an empty directory, the common case, pays one look at a set per file.
        // (A file of another directory in the list does not need this directory's claims.)
        if opts.outputPath == nil, opts.startingNames?.heldNothing(opts.directory) == true { return false }
        let path: String
        switch wish(k, options: opts, serverName: nil) {
        case .path(let p?): path = p
        case .path(nil): return false
        case .name(let name, let directory): path = guesses.claim(name: name, directory: directory)
        case .outName(let name, let directory): path = guesses.claim(outName: name, directory: directory)
        }
        return isFinishedEarlier(path: path, url: entries[k].url, options: opts)
    }

    /// What file `k` asks of `OrderedNames`, knowing the name its probe's answer gave
    /// (`RemoteFileInfo.suggestedFileName`; nil: no answer of the file's).
    func wish(_ k: Int, options opts: DownloadOptions, serverName: String?) -> OrderedNames.Wish {
        let entry = entries[k]
        if let o = opts.outputPath { return .path(o) }
        if planPaths {
            if let name = entry.options.outputName { return .outName(name, directory: opts.directory) }
            return .name(serverName ?? FileName.fromURLPath(entry.url), directory: opts.directory)
        }
        return .path(nil)
    }

    /// The paths the list's `out=` lines name, kept for them (see `OutputNames`).
    var outNamePaths: [String] {
        entries.compactMap { e in
            e.options.outputName.map { OutputNames.join(options(for: e).directory, $0) }
        }
    }

    /// How file `k` goes on once its path is decided.
    enum Readiness {
        /// Download it with these options.
        case run(DownloadOptions)
        /// It ended here (interrupted, skipped, or failed before its download).
        case ended(Outcome)
    }

    /// What happens to file `k` between the decision of its `path` and its download: its directory
    /// (each looked at once per run, through `knownDirectory` and `noteDirectory`), `--skip-existing`,
    /// its digest in the checksum file, and the start message.
    func ready(
        _ k: Int, path: String?, options: DownloadOptions, info: RemoteFileInfo?, reporter: Reporter, interrupt: InterruptFlag,
        knownDirectory: (String) -> Bool, noteDirectory: (String) -> Void
    ) -> Readiness {
        let entry = entries[k]
        let id = k + 1
        var opts = options
        if interrupt.isSet { return .ended(Outcome(id: id, url: entry.url, path: path, status: .notStarted)) }
        func fail(_ e: SeggetError) -> Readiness {
            reporter.failed(id: id, url: entry.url, path: path, e)
            return .ended(Outcome(id: id, url: entry.url, path: path, status: .failed(e)))
        }

        if planPaths, let path {
            let dir = FileSystem.directoryName(of: path)
            if !knownDirectory(dir) {
                if let problem = makeDirectories(dir) { return fail(SeggetError(.fileSystem, problem)) }
                noteDirectory(dir)
            }
            opts.outputPath = path
            opts.directory = nil
        }
        if skipExisting, let path, isFileOnDisk(path) {
            reporter.skipped(id: id, url: entry.url, path: path, reason: .exists)
            return .ended(Outcome(id: id, url: entry.url, path: path, status: .skipped(.exists)))
        }
        if let (cfPath, text) = checksumFile {
            let name = lastPathComponent(
                path ?? opts.outputPath ?? entry.options.outputName ?? info?.suggestedFileName ?? FileName.fromURLPath(entry.url))
            do {
                let listed = try ChecksumFile.expectedDigest(in: text, forFileName: name)
                if let given = opts.checksums.first(where: { $0.algorithm == listed.algorithm }), given != listed {
                    // No file can match both: refused before anything is fetched.
                    return fail(SeggetError(.usage, "--checksum gives \(given.hex) but \(cfPath) gives \(listed.hex) as the \(listed.algorithm.displayName) of \(ServerText(name)); give the one that is right."))
                }
                if !opts.checksums.contains(listed) { opts.checksums.append(listed) }
            } catch {
                // In a list, the checksum file covers the files it names; alone, it must name this one.
                guard listMode else { return fail(SeggetError(.usage, "\(cfPath): \(error)")) }
                reporter.event(id: id, .notice("\(cfPath) has no digest for \(name); it is checked only against digests the server sends."))
            }
        }

        // A list run again: a file an earlier run of this URL finished, and nobody changed since, is
        // done, without a request (a single download looks after its probe: its name may be the
        // server's). Not with `--force` (it fetches the file again) or `--no-continue`.
        if planPaths, let path, isFinishedEarlier(path: path, url: entry.url, options: opts, info: info) {
            reporter.skipped(id: id, url: entry.url, path: path, reason: .completed)
            return .ended(Outcome(id: id, url: entry.url, path: path, status: .skipped(.completed)))
        }

        reporter.started(
            JobStart(
                // A Metalink's size stands in for an answer not had yet (a URL that serves another
                // length is not used).
                id: id, url: entry.url, path: path, size: info?.totalBytes ?? entry.metalink?.size,
                connections: info.map { $0.acceptsRanges && $0.totalBytes != nil } == false ? 1 : opts.connections,
                autoConnections: opts.autoConnections))
        return .run(opts)
    }

    /// 0 when every file succeeded or was skipped; 130 when the run was interrupted; otherwise the
    /// exit code of the first failed file in list order.
    static func exitCode(_ outcomes: [Outcome]) -> Int32 {
        var first: Int32?
        for o in outcomes {
            switch o.status {
            case .done, .skipped: continue
            case .notStarted: return FailureKind.interrupted.exitCode
            case .failed(let e):
                if e.kind == .interrupted { return e.exitCode }
                if first == nil { first = e.exitCode }
            }
        }
        return first ?? 0
    }
}

/// What `--skip-existing` counts as done: a regular file, or a link to one. A directory, a FIFO or a
/// dangling link under the name is not a download on disk; it is refused as without the option.
func isFileOnDisk(_ path: String) -> Bool {
    FileSystem.status(path)?.kind == .regular
}

/// `mkdir -p`; returns a sentence on failure.
func makeDirectories(_ dir: String) -> String? {
    do {
        try FileSystem.makeDirectories(dir)
    } catch {
        return "\(error)."
    }
    return nil
}

extension Batch {
    /// Runs the files, `parallelFiles` at a time, on a `DownloadLoop` on the calling thread: their
    /// probes and their fetches share its driver and connections (a file's requests reuse those the
    /// files before it left); their blocking steps run one at a time on the loop's steps queue (the
    /// loop thread itself, but with `--fsync`). One file's failure is its own.
    ///
    /// Files of at most a probe's prefix (1 MiB) are mostly per-file work: a request, a name, a file
    /// created, written and linked. Once a probe brings a file whole, loops are added, each on a
    /// thread of its own, up to `loopLimit`; the files in flight are dealt to the loop with the
    /// fewest, and each loop saves its whole files itself. Larger files stay on the first loop with
    /// the writer threads: their time is the network's and the disk's.
    func run(reporter: Reporter, interrupt: InterruptFlag) -> [Outcome] {
        runOnLoops(reporter: reporter, interrupt: interrupt).outcomes
    }
}

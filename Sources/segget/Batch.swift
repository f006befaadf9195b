import Dispatch
import Segget
import SeggetVerify
import Synchronization
import SeggetSystem

/// What happened to one file of a run.
struct Outcome: Sendable {
    enum Status: Sendable {
        case done(DownloadResult)
        /// `--skip-existing` found the output file already there.
        case skipped
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

/// Receives everything the user sees. Called from download threads, possibly several at once.
protocol Reporter: Sendable {
    func started(_ job: JobStart)
    func progress(id: Int, _ p: DownloadProgress)
    func event(id: Int, _ e: DownloadEvent)
    func finished(id: Int, url: String, _ r: DownloadResult)
    func skipped(id: Int, url: String, path: String)
    func failed(id: Int, url: String, path: String?, _ e: SeggetError)
    /// Once, after every file has ended.
    func summary(_ outcomes: [Outcome], seconds: Double)
}

/// Downloads a list of files, `jobs` at a time, under one connection budget.
///
/// Rules (documented in `segget --help` and the README):
/// - Budget: all files together use at most `totalConnections` (default: the larger of 16 and
///   `-n`). At most that many files run at once, and each gets `min(-n, budget / jobs)` connections.
///   Once no file is left to start, the shares of the workers that stopped are lent to the files
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
    /// More than one URL, or `-i`: paths decided up front, a summary table at the end.
    let listMode: Bool
    /// Decide every path before its download starts (lists, `--json`, `--skip-existing`).
    let planPaths: Bool
    let skipExisting: Bool
    /// `--checksum-file`: its path and text.
    let checksumFile: (path: String, text: String)?

    var budget: Int { totalConnections ?? max(16, base.connections) }
    var parallelFiles: Int { max(1, min(jobs, budget, entries.count)) }
    var connectionsPerFile: Int { min(base.connections, max(1, budget / parallelFiles)) }

    private struct Shared {
        var next = 0
        var names: OrderedNames
        var outcomes: [Outcome?]
        /// Directories made (or found) for earlier files: each is looked at once per run.
        var directories: Set<String> = []
    }

    private final class SharedBox: Sendable {
        let state: Mutex<Shared>
        /// `decided[k]` is signalled once file k's path is decided by another file's report (see
        /// `OrderedNames`): file k waits only while an earlier file has not reported its wish.
        let decided: [DispatchSemaphore]
        init(count: Int) {
            state = Mutex(Shared(names: OrderedNames(count: count), outcomes: Array(repeating: nil, count: count)))
            // All start at 0 (libdispatch traps when a semaphore ends below its initial value).
            decided = (0..<count).map { _ in DispatchSemaphore(value: 0) }
        }
        func withLock<T>(_ body: (inout Shared) -> T) -> T { state.withLock { body(&$0) } }
    }

    func run(reporter: Reporter, interrupt: InterruptFlag) -> [Outcome] {
        // Several files at once: all on one loop (see `runOnLoop`).
        if parallelFiles > 1 { return runOnLoop(reporter: reporter, interrupt: interrupt) }
        let started = DispatchTime.now().uptimeNanoseconds
        let shared = SharedBox(count: entries.count)
        let group = DispatchGroup()
        // A worker that finds no file left lends its share of the budget to the files still running.
        let lender = parallelFiles > 1 && !base.autoConnections && base.connections > connectionsPerFile ? ConnectionLender() : nil
        // One thread per file in flight (not Dispatch's global queue, which runs about one per CPU).
        let work: @Sendable () -> Void = {
            // Each worker's files reuse its kept-alive connections.
            let pool = ConnectionPool()
            while true {
                let k: Int = shared.withLock { s in
                    defer { s.next += 1 }
                    return s.next
                }
                guard k < entries.count else {
                    lender?.lend(connectionsPerFile)
                    return
                }
                let outcome = runOne(k, shared: shared, pool: pool, lender: lender, reporter: reporter, interrupt: interrupt)
                shared.withLock { $0.outcomes[k] = outcome }
            }
        }
        var threads = 0
        // One file at a time runs on this thread: no thread to start, and none to hand the end back.
        for _ in 0..<(parallelFiles > 1 ? parallelFiles : 0) {
            group.enter()
            if DownloadThread.start({ work(); group.leave() }) {
                threads += 1
            } else {
                // No thread to be had: this worker's share goes to the ones that started.
                group.leave()
            }
        }
        if threads == 0 { work() }
        group.wait()
        let outcomes = shared.withLock { s in
            s.outcomes.enumerated().map { $0.element ?? Outcome(id: $0.offset + 1, url: entries[$0.offset].url, status: .notStarted) }
        }
        reporter.summary(outcomes, seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
        return outcomes
    }

    /// The run's options with the entry's own lines and this file's share of the budget.
    func options(for entry: InputFile.Entry) -> DownloadOptions {
        var overrides = entry.overrides
        overrides.connections = connectionsPerFile
        return base.applying(overrides)
    }

    /// `options(for:)`, with the loans of `lender`: its share, and up to -n while others are spare
    /// near the end of the list.
    func options(for entry: InputFile.Entry, lender: ConnectionLender?) -> DownloadOptions {
        var opts = options(for: entry)
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

    /// What file `k` asks of `OrderedNames`, knowing what its probe learnt (`info`).
    func wish(_ k: Int, options opts: DownloadOptions, info: RemoteFileInfo?) -> OrderedNames.Wish {
        let entry = entries[k]
        if let o = opts.outputPath { return .path(o) }
        if planPaths {
            return .name(entry.outputName ?? info?.suggestedFileName ?? FileName.fromURLPath(entry.url), directory: opts.directory)
        }
        return .path(nil)
    }

    private func runOne(
        _ k: Int, shared: SharedBox, pool: ConnectionPool, lender: ConnectionLender?, reporter: Reporter, interrupt: InterruptFlag
    ) -> Outcome {
        let entry = entries[k]
        let id = k + 1
        let opts = options(for: entry, lender: lender)
        let download0 = Download(url: entry.url, options: opts)

        // A probe learns the server's name (and size for the start message). Its failure is not
        // reported: the download itself retries and gives the real error.
        // The probe's answer (with the file's first chunk) goes on to the download, which then starts
        // without asking again.
        var prepared: PreparedDownload?
        // A checksum file is looked up by the name the file will be saved under, which may come from
        // the server (Content-Disposition), so probe for it then too.
        if probes(opts) && !interrupt.isSet {
            prepared = try? download0.prepare(pool: pool)
        }
        let info = prepared?.info

        // Paths are decided in list order, so a rerun picks the same names. Whichever report completes
        // the list's prefix decides it and wakes the files it decided; no file waits for another to run.
        let wish = wish(k, options: opts, info: info)
        let decidedNow = shared.withLock { $0.names.wish(wish, for: k) }
        for i in decidedNow where i != k { shared.decided[i].signal() }
        if !decidedNow.contains(k) { shared.decided[k].wait() }
        let path = shared.withLock { $0.names.path(of: k) }

        let ready = ready(
            k, path: path, options: opts, info: info, reporter: reporter, interrupt: interrupt,
            knownDirectory: { dir in shared.withLock { $0.directories.contains(dir) } },
            noteDirectory: { dir in shared.withLock { _ = $0.directories.insert(dir) } })
        guard case .run(let opts) = ready else {
            if case .ended(let outcome) = ready { return outcome }
            preconditionFailure("a file is either ready to run or ended")
        }
        let download = Download(url: entry.url, options: opts)
        do throws(SeggetError) {
            let result = try download.run(
                progress: { reporter.progress(id: id, $0) }, events: { reporter.event(id: id, $0) }, interrupt: interrupt,
                prepared: prepared, pool: pool)
            reporter.finished(id: id, url: entry.url, result)
            return Outcome(id: id, url: entry.url, path: result.path, status: .done(result))
        } catch {
            reporter.failed(id: id, url: entry.url, path: path, error)
            return Outcome(id: id, url: entry.url, path: path, status: .failed(error))
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
            let dir = parentDirectory(path)
            if !knownDirectory(dir) {
                if let problem = makeDirectories(dir) { return fail(SeggetError(.fileSystem, problem)) }
                noteDirectory(dir)
            }
            opts.outputPath = path
            opts.directory = nil
        }
        if skipExisting, let path, fileExists(path) {
            reporter.skipped(id: id, url: entry.url, path: path)
            return .ended(Outcome(id: id, url: entry.url, path: path, status: .skipped))
        }
        if let (cfPath, text) = checksumFile {
            let name = lastPathComponent(
                path ?? opts.outputPath ?? entry.outputName ?? info?.suggestedFileName ?? FileName.fromURLPath(entry.url))
            do {
                opts.checksums.append(try ChecksumFile.expectedDigest(in: text, forFileName: name))
            } catch {
                // In a list, the checksum file covers the files it names; alone, it must name this one.
                guard listMode else { return fail(SeggetError(.usage, "\(cfPath): \(error)")) }
                reporter.event(id: id, .notice("\(cfPath) has no digest for \(name); it is checked only against digests the server sends."))
            }
        }

        reporter.started(
            JobStart(
                id: id, url: entry.url, path: path, size: info?.totalBytes,
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

func parentDirectory(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    let p = String(path[..<slash])
    return p.isEmpty ? "/" : p
}

func fileExists(_ path: String) -> Bool {
    FileSystem.exists(path)
}

/// `mkdir -p`; returns a sentence on failure.
func makeDirectories(_ dir: String) -> String? {
    if dir == "." || dir == "/" || dir.isEmpty { return nil }
    if let status = FileSystem.status(dir) {
        return status.kind == .directory ? nil : "\(dir) exists and is not a directory."
    }
    if let problem = makeDirectories(parentDirectory(dir)) { return problem }
    do {
        try FileSystem.makeDirectory(dir, permissions: 0o755)
    } catch where error != .fileExists {
        return "could not create the directory \(dir): \(error)."
    } catch {}
    return nil
}

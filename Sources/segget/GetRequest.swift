import ArgumentParser
import Segget

/// The download command's settings, however the command line was read: by ArgumentParser (`Get`) or,
/// for the commonest command lines, by ``init(quickParsing:)``.
struct GetRequest: Equatable {
    var urls: [String]
    var inputFile: String?
    var mirrors: [String]
    var checksumFile: String?
    /// The options every file starts from (see `Get.downloadOptions()`).
    var options: DownloadOptions
    var jobs: Int
    var totalConnections: Int?
    /// `--max-connections-per-host`: the cap of the run's `HostBudget`.
    var maxConnectionsPerHost: Int? = nil
    var json: Bool
    var quiet: Bool
    var skipExisting: Bool
    /// With `-o -` (one URL): the reorder window and the first byte of the stream.
    var stream = StreamSettings()
    /// `--metalink` sources (URLs or paths), whose files join the run.
    var metalinks: [String] = []

    func run() throws {
        // Checked here, not in validate(): ArgumentParser reports unknown options only after
        // validate(), and "unknown option --foo" is the better message for `segget --foo URL`.
        if urls.isEmpty && inputFile == nil && metalinks.isEmpty {
            throw SeggetError(.usage, "give a URL to download, -i FILE with a list of URLs, or a Metalink (FILE.meta4 or --metalink URL).")
        }
        for u in urls where !MetalinkInput.names(u) {
            if let problem = InputFile.urlProblem(u) { throw SeggetError(.usage, problem) }
        }
        for u in mirrors {
            if let problem = InputFile.urlProblem(u) { throw SeggetError(.usage, problem) }
        }
        let metalinkGiven = !metalinks.isEmpty || urls.contains(where: MetalinkInput.names)
        if metalinkGiven && !mirrors.isEmpty {
            throw SeggetError(.usage, "--mirror cannot be combined with a Metalink, which lists the file's URLs itself.")
        }
        if options.outputPath == "-" && metalinkGiven {
            throw SeggetError(.usage, "-o - streams one URL; a Metalink's files are downloaded to files (use -d DIR).")
        }
        if options.outputPath == "-" && urls.count == 1 && inputFile == nil {
            try StreamRun(url: urls[0], options: options, settings: stream, quiet: quiet).run()
            return
        }
        var entries = urls.enumerated().map { InputFile.Entry(url: $0.element, line: $0.offset + 1) }
        if let path = inputFile {
            let text = try readTextFile(path, what: "the input file", utf8Only: true)
            do {
                entries += try InputFile(parsing: text).entries
            } catch {
                throw SeggetError(.usage, "\(path == "-" ? "standard input" : path): \(error)")
            }
            if entries.isEmpty { throw SeggetError(.usage, "\(path) lists no URLs.") }
            if let (first, second) = InputFile.sameOutputName(in: entries, directory: options.directory) {
                // The second would have been numbered (x.1.bin) without a word, where a later step
                // reads x.bin; the daemon refuses such a task too.
                let name = second.options.outputName ?? ""
                let shown = second.options.directory.map { "\($0)/\(name)" } ?? name
                throw SeggetError(.usage, "\(path == "-" ? "standard input" : path): lines \(first.line) and \(second.line) both give out=\(ServerText(shown)); give each file a name of its own.")
            }
        }
        let given = entries.count
        entries = try MetalinkInput.expand(entries, sources: metalinks, options: options, verify: options.verifyServerDigests)
        if entries.count > 1 && options.outputPath != nil {
            throw SeggetError(.usage, "-o names one file, but the Metalink describes \(entries.count - given + 1) files; use -d DIR.")
        }
        let checksums = try checksumFile.map { try readTextFile($0, what: "the checksum file") }
        let batch = Batch(
            entries: entries, base: options, jobs: jobs,
            totalConnections: totalConnections, maxConnectionsPerHost: maxConnectionsPerHost,
            listMode: inputFile != nil || entries.count > 1,
            // A name given with the URL (a Metalink's) is the file's name with or without --json.
            planPaths: inputFile != nil || entries.count > 1 || json || skipExisting || entries.contains { $0.options.outputName != nil },
            skipExisting: skipExisting,
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
        SignalTrap.install(interrupt: interrupt)
        let outcomes = batch.run(reporter: reporter, interrupt: interrupt)
        let code = Batch.exitCode(outcomes)
        if code != 0 {
            throw ExitCode(code)
        }
    }
}

extension GetRequest {
    /// Reads `segget [-q] [-f] [-k] [--http2] [--json] [-n N] [-j N] [-i FILE] [-o FILE | -d DIR] URL...` without
    /// ArgumentParser, or returns nil for any other command line (which ArgumentParser then reads,
    /// with its messages for every mistake).
    ///
    /// Why: ArgumentParser reflects over every option of every group, three times, before a download
    /// starts; with the Swift runtime's first-use conformance lookups that took 6–9 ms of CPU per run,
    /// a third of the whole run for a 1 MiB file on loopback, and 9 ms of the 28 ms from exec to the
    /// first connection of a 400-file batch with `-k --json --http2`. Only what ArgumentParser reads the same
    /// way is taken: http(s) URLs, the exact spellings of ten options, each once, and values that
    /// cannot be mistaken for options. A test holds every accepted command line to ArgumentParser's
    /// reading of it.
    init?(quickParsing arguments: [String]) {
        var urls: [String] = []
        var quiet = false, force = false, insecure = false, http2 = false, json = false
        var output: String?, directory: String?
        var connections: Int?
        var inputFile: String?
        var jobs: Int?
        var i = 0
        func value() -> String? {
            guard i + 1 < arguments.count else { return nil }
            let v = arguments[i + 1]
            guard !v.isEmpty, !v.hasPrefix("-") else { return nil }
            i += 1
            return v
        }
        /// The next argument as a plain decimal in `range` ("auto", signs, leading zeros and the
        /// rest go to ArgumentParser).
        func number(in range: ClosedRange<Int>) -> Int? {
            guard let v = value(), v.count <= String(range.upperBound).count, v.first != "0",
                v.allSatisfy(\.isASCIIDigit), let n = Int(v), range.contains(n)
            else { return nil }
            return n
        }
        /// Sets a flag; false when it came before (ArgumentParser then reports or reads the repeat).
        func set(_ flag: inout Bool) -> Bool {
            guard !flag else { return false }
            flag = true
            return true
        }
        /// Reads an option's value into `slot`; false when the option came before or the value is
        /// not one to read here.
        func once<T>(_ slot: inout T?, _ read: () -> T?) -> Bool {
            guard slot == nil, let v = read() else { return false }
            slot = v
            return true
        }
        while i < arguments.count {
            let a = arguments[i]
            switch a {
            case "-q", "--quiet":
                guard set(&quiet) else { return nil }
            case "-f", "--force":
                guard set(&force) else { return nil }
            case "-k", "--insecure":
                guard set(&insecure) else { return nil }
            case "--http2":
                guard set(&http2) else { return nil }
            case "--json":
                guard set(&json) else { return nil }
            case "-o", "--output":
                guard once(&output, value) else { return nil }
            case "-d", "--dir":
                guard once(&directory, value) else { return nil }
            case "-n", "--connections":
                guard once(&connections, { number(in: 1...128) }) else { return nil }
            case "-i", "--input-file":
                // Not "-" (standard input): ArgumentParser reads that.
                guard once(&inputFile, value) else { return nil }
            case "-j", "--jobs":
                guard once(&jobs, { number(in: 1...32) }) else { return nil }
            default:
                guard a.hasPrefix("http://") || a.hasPrefix("https://") else { return nil }
                urls.append(a)
            }
            i += 1
        }
        // What validate() would refuse, ArgumentParser reports.
        guard !urls.isEmpty || inputFile != nil,
            output == nil || (urls.count == 1 && directory == nil && inputFile == nil)
        else { return nil }
        var options = DownloadOptions()
        options.outputPath = output
        options.directory = directory
        options.force = force
        options.transfer.insecure = insecure
        options.transfer.http2 = http2
        if let connections { options.connectionCount = .fixed(connections) }
        self.init(
            urls: urls, inputFile: inputFile, mirrors: [], checksumFile: nil, options: options, jobs: jobs ?? 1,
            totalConnections: nil, json: json, quiet: quiet, skipExisting: false)
    }
}

private extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

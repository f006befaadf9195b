import Dispatch
import SeggetCurl
import SeggetJournal
import SeggetSystem

extension Download {
    /// The most a probe asks for (`Range: bytes=0-…`): the first chunk, at most 1 MiB. A file no larger
    /// is downloaded by the probe alone; a larger one starts with these bytes in place. The cost is the
    /// time the first chunk takes before the other connections start (62 ms at 16 MiB/s).
    static let probePrefixLimit: Int64 = 1 << 20

    /// What the probe asks for: the first chunk (at most `probePrefixLimit`), or one byte where they
    /// would be wasted: a stream, a file already at the likely output path (without `--force`), or a
    /// journal there (a resume, whose first chunk is usually done; a name that only
    /// `Content-Disposition` gives is not foreseen). Also the
    /// side files found absent at that path, if they were looked for (see `ProbeResult.absent`):
    /// the journal, and, where a batch read the directory (`StartingNames`), the part file.
    func probeBytes(fresh: Bool, stream: Bool) -> (bytes: Int, absent: AbsentSideFiles) {
        if stream { return (1, AbsentSideFiles()) }
        let first = Int(min(options.chunkSize, Self.probePrefixLimit, options.probeLimit ?? .max, probeBytesUnderCap ?? .max))
        let names = options.startingNames
        let name = options.outputPath ?? OutputNames.join(options.directory, FileName.sanitize(options.likelyName ?? FileName.fromURLPath(url)))
        // A file already under the name, without --force: one an earlier run finished (its mark
        // vouches for it, unless --no-continue), whose probe only has to show that the server's
        // copy has the same length, or another, which is refused unless the server names the
        // download otherwise. One byte does for both: a whole-file answer held at its head would
        // fill the socket's buffers before it is dropped. Not a file this run made there (nothing
        // was at the name when the batch read its directory): an earlier line of the list took the
        // name, and this file gets a numbered one. Asked for one byte, it cost a request more.
        if !options.force && names?.mayHaveExisted(name) != false && FileSystem.exists(name) {
            return (1, AbsentSideFiles())
        }
        if fresh && names == nil { return (first, AbsentSideFiles()) }
        let part = name + ".segget-part"
        let noPartAt = names?.surelyAbsent(part) == true ? part : nil
        if fresh { return (first, AbsentSideFiles(part: noPartAt)) }
        let journal = name + ".segget-journal"
        if names?.surelyAbsent(journal) != true && PosixFile.fileSize(path: journal) != nil { return (1, AbsentSideFiles()) }
        return (first, AbsentSideFiles(journal: journal, part: noPartAt))
    }

    /// Under a speed cap (`--max-speed`, or the daemon's overall limit), the most the probe reads
    /// before the fetch's budget takes over: the burst the cap allows (`RateBudget.burst`, a tenth
    /// of a second's worth, at least 64 KiB), not the first chunk. The probe reads at the network's
    /// rate, so its 1 MiB came in over a 400 KiB/s cap at once, and the budget then charges it to
    /// the fetch (see `FetchSettings.probePrefixBytes`).
    var probeBytesUnderCap: Int64? {
        let caps = [options.maxSpeed, options.sharedSpeedLimit?.bytesPerSecond, options.ownSpeedLimit?.bytesPerSecond]
            .compactMap { $0 }.filter { $0 > 0 }
        return caps.min().map { RateBudget.burst(bytesPerSecond: $0) }
    }

    /// Whether the probe asks for the whole file and holds its transfer open for the fetch (see
    /// `HeldTransfer`): for a new download of exactly one connection, with no mirrors, which then
    /// makes one request for the whole file. A batch gives each file one connection when 16 run at
    /// once; a probe and a second request per file cost 100 files of 4 MiB a third more time than
    /// wget2 took.
    ///
    /// A download of several connections holds it too, from the first answer's head (see
    /// `Prober.holdsAtHead`): its first connection then runs on from the probe as aria2's does,
    /// instead of being cut after `Prober.prefixSeconds` and dialled again (a TCP and TLS handshake
    /// and a slow start more, several round trips on a WAN).
    ///
    /// Never with a `probeLimit`: such a probe brings a small file whole, and of a larger one only
    /// its first bytes, with no transfer left running.
    func holdsProbeTransfer(firstBytes: Int) -> Bool {
        firstBytes > 1 && !options.autoConnections && options.mirrors.isEmpty && options.probeLimit == nil
    }

    /// The prober for this download's first request, asking for `firstBytes` on `multi`.
    func prober(firstBytes: Int, multi: MultiHandle, deadline: Deadline?) -> Prober {
        var prober = Prober(options: options.transfer, firstBytes: firstBytes, multi: multi, deadline: deadline)
        prober.holdsTransfer = holdsProbeTransfer(firstBytes: firstBytes)
        prober.holdsAtHead = options.connections > 1
        if options.probeLimit != nil { prober.cutAfter = Prober.sharedPrefixSeconds }
        return prober
    }

    /// Whether a failed probe is worth another try: decided from the failure's typed advice (set where
    /// it was classified, never read from the message), its kind and HTTP status.
    static func probeIsRetryable(_ error: SeggetError, attempt: Int) -> Bool {
        switch error.retryAdvice {
        case .never: false
        case .once: attempt == 1
        case .mayChange:
            error.kind == .network
                || (error.kind == .httpStatus && [408, 429, 500, 502, 503, 504].contains(error.httpStatus ?? 0))
        }
    }

    /// Whether `error` is a 429 or 503 that `share`'s host budget takes for the host's connection
    /// limit (other requests to the host were out); it then records it.
    func refusedByHost(_ error: SeggetError, share: HostShare?) -> Bool {
        guard let share, error.kind == .httpStatus, error.httpStatus == 429 || error.httpStatus == 503 else { return false }
        let wait = RetryPolicy.hostWait(asked: error.retryAfter, maxWait: options.maxRetryWait)
        return share.refused(inFlight: 0, wait: wait, now: monotonicSeconds()) != nil
    }

    /// After the probe's `attempt`-th failure, `error`: throws when it is not worth another try, else
    /// reports the retry and returns how long to wait before it.
    func probeRetryDelay(
        after error: SeggetError, attempt: Int, deadline: Deadline?, events: (@Sendable (DownloadEvent) -> Void)?,
        interrupt: InterruptFlag
    ) throws(SeggetError) -> Double {
        guard Self.probeIsRetryable(error, attempt: attempt), attempt <= options.retries, !interrupt.isSet else {
            throw error
        }
        let delay: Double
        var reason = error.message
        switch RetryPolicy.decide(
            attempt: attempt, reason: error.message, base: options.retryWait, retryAfter: error.retryAfter,
            maxWait: options.maxRetryWait, deadline: deadline, now: monotonicSeconds(), jitter: .random(in: 0.5...1.5))
        {
        case .giveUp(let message):
            throw SeggetError(.network, message)
        case .wait(let seconds, let note):
            delay = seconds
            if let note { reason = "\(RetryPolicy.sentence(reason).dropLast()); \(note)" }
        }
        if error.retryAdvice == .once {
            reason = "\(RetryPolicy.sentence(reason).dropLast()); trying once more"
        }
        events?(.retry(connection: 0, attempt: attempt, delay: delay, reason: reason))
        return delay
    }

    /// Probes every mirror at once on `loop`, as requests of its driver beside the other downloads'
    /// (never a thread of their own). `each` hears each mirror that agrees with the main URL on length
    /// and validators as soon as its probe does; `done` hears all of them, in the order given, once
    /// every probe has ended. Loop thread only; both hear on the loop thread.
    func probeMirrors(
        _ mirrors: [String]? = nil, on loop: DownloadLoop, main: ProbeResult, verifiable: Bool = false, deadline: Deadline?,
        events: (@Sendable (DownloadEvent) -> Void)?, interrupt: InterruptFlag, patience: Double? = nil,
        each: ((FetchSource) -> Void)? = nil, spent: ((RequestTally) -> Void)? = nil, done: @escaping ([FetchSource]) -> Void
    ) {
        let mirrors = mirrors ?? options.mirrors
        guard !mirrors.isEmpty else { return done([]) }
        // With `patience`, the probes still out after that long are let go (see `mirrorPatience`).
        let patient = patience.map { seconds in
            let flag = InterruptFlag(following: interrupt)
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { flag.set() }
            return flag
        }
        var kept = [FetchSource?](repeating: nil, count: mirrors.count)
        var left = mirrors.count
        for (i, m) in mirrors.enumerated() {
            // Credentials given for the main URL go to a mirror only on the same host; one byte, no
            // retries and no transfer held, as the mirror's answer only vouches for it.
            var mirrorOptions = options
            mirrorOptions.transfer = transfer(toward: m)
            mirrorOptions.connections = 1
            mirrorOptions.mirrors = []
            mirrorOptions.metalinkHTTP = false
            loop.probe(
                Download(url: m, options: mirrorOptions), firstBytes: 1, deadline: deadline, retrying: false,
                events: nil, interrupt: patient ?? interrupt
            ) { [self] result in
                if case .success(let p) = result { p.held?.release() }
                // Its requests are the download's too, kept or not.
                switch result {
                case .success(let p): spent?(p.spent)
                case .failure(let e): spent?(e.probeSpent ?? RequestTally())
                }
                if case .failure(let e) = result, e.kind == .interrupted, let patience, !interrupt.isSet {
                    events?(.notice("not waiting for mirror \(URLParts.shown(m)): it did not answer within \(Format.seconds(patience)); the download goes on without it."))
                    kept[i] = nil
                } else {
                    kept[i] = keptMirrors(main: main, probed: [(m, result)], verifiable: verifiable, events: events).first
                }
                if let source = kept[i] { each?(source) }
                left -= 1
                if left == 0 { done(kept.compactMap { $0 }) }
            }
        }
    }

    /// The transfer options for a request to `other`, another URL of the file (a mirror, or one
    /// standing in): the main URL's credentials go only to the main URL's host.
    func transfer(toward other: String) -> TransferOptions {
        URLParts(other)?.host == URLParts(url)?.host ? options.transfer : options.transfer.withoutCredentials()
    }

    /// How long a download with piece hashes waits for its mirrors' probes before it starts without
    /// those still out: four times what the main URL's probe took, and at least 2 s. (Without piece
    /// hashes nothing waits: mirrors join as their probes agree.) A dead mirror in a Metalink held
    /// the download up for its probe's timeout, 20 s, for a file the main URL served in 0.1 s.
    static func mirrorPatience(mainProbeSeconds: Double?) -> Double {
        max(2, 4 * (mainProbeSeconds ?? 0))
    }

    /// The mirrors whose probes agree with the main URL's on length and validators, in the order
    /// given; each one dropped is named in a notice, with why. Validators agree where neither answer
    /// names another `ETag` or `Last-Modified` than the other, or where the `ETag`s differ only in
    /// their servers' wording of the same time and size (`sameVersionInOtherWords`). With piece hashes (`verifiable`), the
    /// length must agree and validators need not: mirrors of a file often differ in their `ETag`
    /// (Apache's holds the inode) or `Last-Modified`, and each piece is checked wherever it came from.
    func keptMirrors(
        main: ProbeResult, probed: [(String, Result<ProbeResult, SeggetError>)], verifiable: Bool = false,
        events: (@Sendable (DownloadEvent) -> Void)?
    ) -> [FetchSource] {
        var kept: [FetchSource] = []
        for (m, result) in probed {
            let shown = URLParts.shown(m)
            let p: ProbeResult
            switch result {
            case .success(let probe): p = probe
            case .failure(let error):
                events?(.notice("dropping mirror \(shown): \(error.message)"))
                continue
            }
            if !p.acceptsRanges || p.totalLength != main.totalLength {
                events?(.notice("dropping mirror \(shown): \(p.acceptsRanges ? "its length \(p.totalLength ?? -1) differs from \(main.totalLength ?? -1)" : "it does not serve byte ranges")."))
                continue
            }
            if !verifiable, let a = main.etag, let b = p.etag, a != b, !Self.sameVersionInOtherWords(main, p) {
                events?(.notice("dropping mirror \(shown): its ETag \(ServerText(b)) differs from \(ServerText(a)), so nothing shows it holds the same bytes (mirrors on different servers mix safely through a Metalink with piece hashes)."))
                continue
            }
            if !verifiable, let a = main.lastModified, let b = p.lastModified, a != b {
                events?(.notice("dropping mirror \(shown): its Last-Modified differs (\(ServerText(b)) vs \(ServerText(a))), so nothing shows it holds the same bytes (mirrors on different servers mix safely through a Metalink with piece hashes)."))
                continue
            }
            // Credentials given for the main URL go to a mirror only on the same host.
            let sameHost = URLParts(p.finalURL)?.host == URLParts(url)?.host
            kept.append(FetchSource(
                url: p.finalURL, etag: p.etag, lastModified: p.lastModified, ifRange: p.ifRangeValidator, withoutCredentials: !sameHost,
                firstAnswer: p.firstAnswerSeconds))
        }
        return kept
    }

    /// Whether two answers with differing `ETag`s show one version of the file in other words: both
    /// carry the same `Last-Modified` and a length, and their `ETag`s are of two different wordings
    /// that servers derive from the modification time and size alone (`DerivedETag`: nginx and h2o,
    /// Apache, Caddy), each decoding to that length and time. Two `ETag`s of one wording that differ
    /// (two nginx, or two Apache whose microseconds differ within the second) show two versions.
    static func sameVersionInOtherWords(_ a: ProbeResult, _ b: ProbeResult) -> Bool {
        guard let length = a.totalLength, length == b.totalLength else { return false }
        return sameVersionInOtherWords(a.etag, a.lastModified, b.etag, b.lastModified, length: length)
    }

    /// The same, for two answers' validators and their common length (a journal's against an answer's).
    static func sameVersionInOtherWords(
        _ etagA: String?, _ modifiedA: String?, _ etagB: String?, _ modifiedB: String?, length: Int64
    ) -> Bool {
        guard let ea = etagA, let eb = etagB, let la = modifiedA, la == modifiedB, let modified = parseIMFFixdate(Substring(la)),
            let wa = DerivedETag(ea, length: length, modified: modified), let wb = DerivedETag(eb, length: length, modified: modified)
        else { return false }
        return wa != wb
    }

    /// `probe`, the answer of a `--mirror` standing in for the main URL that failed, with the name
    /// the main URL's path gives (where it gives one): the file is named the same whichever of its
    /// servers answered, so that a rerun with the main URL back finds it.
    func standInNamed(_ probe: ProbeResult, _ plan: AttemptPlan) -> ProbeResult {
        guard isStandIn(plan) else { return probe }
        let name = FileName.fromURLPath(url)
        guard name != FileName.fallback else { return probe }
        var named = probe
        named.suggestedFileName = name
        return named
    }

    /// The final path: `-o` as given, or the server's name for the file in `-d` (created if missing).
    /// What is at the path is looked at later (`checkOutputPath`), where it matters.
    func outputPath(probe: ProbeResult) throws(SeggetError) -> String {
        if let o = options.outputPath {
            guard !o.isEmpty else { throw SeggetError(.usage, "the output path is empty.") }
            return o
        }
        let dir = options.directory ?? "."
        do {
            // Every missing level, as for a batch's directories.
            try FileSystem.makeDirectories(dir)
        } catch {
            throw SeggetError(.fileSystem, "\(error).")
        }
        return OutputNames.join(dir, FileName.sanitize(probe.suggestedFileName))
    }

    /// The size of the file under the final name when an earlier run finished it: a run stopped
    /// between its rename and the removal of its journal (`PartialDownload.finishedEarlier`), or one
    /// whose `FinishedMark` vouches for the file (not with `--no-continue`). A marked file that the
    /// server now sends at another length is an older version of it: refused, saying what to do.
    func finishedByAnEarlierRun(
        paths: PartialDownload.Paths, url: String, probe: ProbeResult, expected: [ExpectedDigest], standIn: String? = nil
    ) throws(SeggetError) -> Int64? {
        if let size = PartialDownload.finishedEarlier(paths: paths, url: url) { return size }
        guard options.resume else { return nil }
        guard let (size, checked, mark) = FinishedMark.vouched(at: paths.final, url: self.url, expected: expected) else { return nil }
        if let total = probe.totalLength, total != size, let standIn {
            // The mirror's other length shows nothing about the main URL's file: --force would replace it.
            throw SeggetError.standInCannot(standIn, "serves \(total) bytes where the file \(paths.final) an earlier run downloaded from the main URL has \(size)", continuing: "it", orElse: .replaceWithMirrors)
        }
        if let total = probe.totalLength, total != size {
            throw SeggetError(.fileSystem, "\(paths.final) was downloaded from this URL by an earlier run, but the server now sends \(total) bytes where that file has \(size): it has changed there. \(NextStep.downloadChangedFileAgain.cli)")
        }
        // The same length, but validators other than those the file was downloaded with: a newer
        // version of the same size (a mirror standing in words its validators its own way).
        if standIn == nil, !mark.sameServerVersion(FinishedMark.version(of: probe, url: self.url)) {
            throw SeggetError(.fileSystem, "\(paths.final) was downloaded from this URL by an earlier run, but the server's ETag or Last-Modified now differs from that file's: it has changed there, at the same length. \(NextStep.downloadChangedFileAgain.cli)")
        }
        // A file the mark vouches for but that was not checked against this run's checksum is
        // checked now (read from disk), rather than refused as a file in the way.
        if !checked { try checkFinishedFile(paths.final, expected: expected) }
        return size
    }

    /// Checks a file an earlier run finished against `expected` (the digests this run was given and
    /// that run was not), reading it from disk; where it matches, its mark records them, so that the
    /// same command run again does not read it again. A mismatch is exit 6, the file kept as it is.
    func checkFinishedFile(_ path: String, expected: [ExpectedDigest]) throws(SeggetError) {
        let verified = try Self.checkFile(
            at: path, expected: expected, unreadable: "cannot read \(path), which an earlier run downloaded, to check it against the checksum",
            afterMismatch: "An earlier run downloaded it from this URL without this checksum; it is kept as it is: pass --force to download it again, or choose another name.")
        if let file = try? PosixFile.open(path: path, mode: .readOnly) {
            FinishedMark.renew(on: file, path: path, verified: verified)
            file.close()
        }
    }

    /// Refuses an output path where something other than a file, a directory or a symbolic link
    /// stands (a device such as `/dev/null`, a FIFO, a socket), `--force` or not: the download is
    /// renamed over its final name in the end, which would put a plain file in its place.
    func refuseSpecialFile(at path: String) throws(SeggetError) {
        guard FileSystem.status(path, followingLinks: false)?.kind == .other else { return }
        throw SeggetError(.fileSystem, "\(path) is a device, FIFO or socket, which segget does not replace (even with --force); to discard the download, stream it: -o - > \(path); to keep it, choose another name with -o.")
    }

    /// Refuses a final path that is a directory (or a link to one) before anything is fetched: no
    /// download can be saved there, `--force` included (the name the URL or the server gives used to
    /// be found only after the whole file had come, its part file left to fail again on every rerun).
    func refuseDirectory(at path: String) throws(SeggetError) {
        let there = FileSystem.status(path, followingLinks: false)
        guard there?.kind == .directory || (there?.kind == .symbolicLink && FileSystem.isDirectory(path)) else { return }
        if options.outputPath != nil {
            let advice = options.ofDaemon
                ? "give the task another name (the out option), or save into that directory with the dir option."
                : "use -d \(path) to save into it, or give a file name with -o."
            throw SeggetError(.fileSystem, "\(path) is a directory; \(advice)")
        }
        let advice = options.ofDaemon
            ? "give the task another name (the out option)."
            : options.ofList ? "give the file another name (out= in an input file)." : "give the file a name with -o, or save it into that directory with -d \(path)."
        throw SeggetError(.fileSystem, "\(path), the name the file would be saved under, is a directory, which segget does not replace (even with --force); \(advice)")
    }

    /// Refuses a final name that is a side file's of another (`X.segget-part`, `-journal`,
    /// `-progress`): a download of X would take such a file for its own unfinished one and start
    /// over on it, and a download saved under it would be that file (one saved as
    /// `big.segget-part` was deleted by the next `-o big`, as a part file without a journal).
    func refuseSideFileName(_ path: String) throws(SeggetError) {
        guard let suffix = PartialDownload.Paths.sideFileSuffix(of: path) else { return }
        let advice = options.ofDaemon ? "give the task another name (the out option)." : options.ofList ? "choose another name (out= in an input file)." : "choose another name with -o."
        throw SeggetError(.fileSystem, "\(path) ends in \(suffix), the name segget gives an unfinished download's side file; \(advice)")
    }

    /// Where the server names the file (`Content-Disposition`, or the path a redirect leads to) and
    /// named it otherwise when an earlier run began, that run's partial download of this URL moved
    /// under the name `paths` now has (see `PartialDownload.adoptRenamed`); returns the old name.
    /// Only for a ranged download that may resume (not `--no-continue`, a stand-in or a renewed
    /// link's attempt), under the server's name as it came (a batch may have had to choose another),
    /// with nothing under the final name.
    func adoptRenamedPartial(paths: PartialDownload.Paths, url: String, probe: ProbeResult, plan: AttemptPlan) -> String? {
        guard probe.nameFromDisposition || probe.redirects > 0, probe.acceptsRanges, probe.totalLength != nil, !plan.stream, !plan.fresh,
            !plan.mustResume, !isStandIn(plan),
            paths.final.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) == probe.suggestedFileName,
            options.force || !FileSystem.exists(paths.final)
        else { return nil }
        return PartialDownload.adoptRenamed(into: paths, url: url, listed: options.startingNames?.names(besides: paths.final))
    }

    /// Whether anything (even a dangling symbolic link) is at `path`, the final path; throws when `-o`
    /// names a directory, or a file in a directory that does not exist.
    func checkOutputPath(_ path: String) throws(SeggetError) -> Bool {
        let there = FileSystem.status(path, followingLinks: false)
        guard options.outputPath != nil else { return there != nil }
        // Something at the path itself shows that its directory exists.
        let dir = FileSystem.directoryName(of: path)
        guard there != nil || FileSystem.isDirectory(dir) else {
            throw SeggetError(.fileSystem, "the directory \(dir) does not exist; create it or choose another output path.")
        }
        return there != nil
    }
}

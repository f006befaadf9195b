import SeggetJournal
import SeggetSystem
import SeggetVerify

extension Download {
    /// Checks a new file that the probe brought whole (at most `probePrefixLimit` bytes), to be saved
    /// by ``WholeSave/save()`` without a part file: the bytes go into an unnamed file in the target's directory (`O_TMPFILE`), which is then
    /// linked in under the final name in one step. Nothing else is created, locked, renamed or removed,
    /// which in a batch of small files in one directory was most of what segget did beyond curl
    /// (every create, rename and unlink takes the directory's lock).
    ///
    /// The guarantees are those of the part file: the name appears only with the whole file behind it,
    /// verified, and a stop before that leaves nothing (the unnamed file is freed with its last
    /// descriptor). With `--fsync` the data is synced before the link and the directory after.
    ///
    /// Returns nil (here, or from `save()`) where the usual path must run: anything an earlier run left beside the target
    /// (a journal or a part file: a resume, a stale file, another segget's lock; a progress file
    /// exists only beside a journal), anything already under the name (the usual path says what it
    /// is, and `--force` replaces a file), a mirror to probe, or a file system without `O_TMPFILE`.
    /// The final name is not looked at before: the link refuses a taken name, atomically.
    func wholeSave(
        probe: ProbeResult, paths: PartialDownload.Paths, expected: [ExpectedDigest],
        deadline: Deadline?, _ context: AttemptContext
    ) throws(SeggetError) -> WholeSave? {
        // Ranged or not (a server that ignores ranges answered the probe with the whole file).
        guard let total = probe.totalLength, total > 0, Int64(probe.prefix.count) == total,
            options.mirrors.isEmpty, !context.interrupt.isSet, deadline.map({ monotonicSeconds() < $0.at }) ?? true,
            probe.absent.journal == paths.journal || PosixFile.fileSize(path: paths.journal) == nil
        else { return nil }
        let started = monotonicSeconds()
        let verified: [String]
        do {
            verified = try Self.verifyInMemory(probe.prefix, expected: expected, name: paths.final, origin: digestOrigin(probe))
            if let pieces = options.pieces { try Self.checkPiecesInMemory(probe.prefix, pieces: pieces, name: paths.final) }
        } catch {
            // A name already taken is reported first, as the usual path does.
            if PosixFile.fileSize(path: paths.final) != nil { return nil }
            // The file's length is known though nothing is kept: a daemon's failed task answers it,
            // as aria2 does (its `totalLength` was 0).
            context.progress?(DownloadProgress(
                completedBytes: 0, totalBytes: total, receivedBytes: 0, bytesPerSecond: 0, elapsed: 0,
                connections: [], finishedRanges: []))
            throw error
        }
        return WholeSave(
            bytes: probe.prefix, paths: paths, source: self.url, verified: verified,
            serverVersion: FinishedMark.version(of: probe, url: self.url), sync: options.syncBeforeRename,
            connections: options.connections, started: started, partAbsent: probe.absent.part == paths.part,
            tally: probe.spent)
    }

    /// `wholeSave` and its `save()` at once: the file saved, or nil where the usual path must run.
    func publishWhole(
        probe: ProbeResult, paths: PartialDownload.Paths, expected: [ExpectedDigest],
        deadline: Deadline?, _ context: AttemptContext
    ) throws(SeggetError) -> DownloadResult? {
        guard let save = try wholeSave(probe: probe, paths: paths, expected: expected, deadline: deadline, context),
            let result = try save.save()
        else { return nil }
        reportProbeBroughtEverything(total: save.total, received: save.total, connections: options.connections, context)
        return result
    }

    /// Checks `bytes`, the whole file, against every expected digest; returns the checks that passed
    /// as "ALGORITHM=hex". Nothing was saved, so a mismatch leaves nothing to discard.
    static func verifyInMemory(
        _ bytes: ProbeBytes, expected: [ExpectedDigest], name: String, origin: DigestOrigin? = nil
    ) throws(SeggetError) -> [String] {
        var digests: [DigestAlgorithm: [UInt8]] = [:]
        for algorithm in Set(expected.map(\.algorithm)) {
            let digester = Digester(algorithm)
            bytes.withUnsafeBytes { digester.update($0) }
            digests[algorithm] = digester.finalize()
        }
        return try checkDigests(
            digests, expected: expected, name: name, afterMismatch: "Nothing was saved; \(NextStep.fetchAfresh.cli).", origin: origin)
    }

    /// Checks each piece of a file the probe brought whole (a Metalink's piece hashes) in memory.
    static func checkPiecesInMemory(_ bytes: ProbeBytes, pieces: PieceHashes, name: String) throws(SeggetError) {
        let size = Int64(bytes.count)
        guard pieces.fits(size: size) else {
            throw SeggetError(.verification, "\(name) is \(size) bytes, which its \(pieces.count) piece hashes do not cover. Nothing was saved.")
        }
        let digester = Digester(pieces.algorithm)
        var bad: [Int] = []
        bytes.withUnsafeBytes { all in
            for p in 0..<pieces.count {
                let r = pieces.byteRange(of: p, size: size)
                digester.update(UnsafeRawBufferPointer(rebasing: all[Int(r.lowerBound)..<Int(r.upperBound)]))
                if !pieces.matches(p, digest: digester.finalize()) { bad.append(p) }
            }
        }
        if let first = bad.first {
            throw SeggetError(.verification, "piece \(first) of \(name)\(bad.count > 1 ? " (and \(bad.count - 1) more)" : "") failed its \(pieces.algorithm.displayName) check, and the file has no other server. Nothing was saved; \(NextStep.fetchAfresh.cli).")
        }
    }

    /// What the engine would report after finding nothing to do: every byte finished, `received`
    /// of them from the network in this run (the probe's: a `progress` object said 0 where the
    /// `finish` said the whole file), every connection idle.
    func reportProbeBroughtEverything(total: Int64, received: Int64, connections: Int, _ context: AttemptContext) {
        context.progress?(DownloadProgress(
            completedBytes: total, totalBytes: total, receivedBytes: received, bytesPerSecond: 0, elapsed: 0,
            connections: (0..<connections).map {
                ConnectionProgress(id: $0, state: .idle, bytesPerSecond: 0, remainingBytes: 0)
            }, finishedRanges: total > 0 ? [0..<total] : []))
    }
}

/// A file the probe brought whole, verified, and the saving of it: an unnamed file in the target's
/// directory, its bytes, then its link under the final name (see `Download.wholeSave`). `save()` is
/// all system calls and touches nothing of the download's, so a batch or the daemon runs it on a
/// writer thread (`StagedWriter.saveWhole`) while the loop goes on with the other files.
struct WholeSave: Sendable {
    let bytes: ProbeBytes
    let paths: PartialDownload.Paths
    /// The URL the download was asked for, for the file's `FinishedMark`.
    let source: String
    let verified: [String]
    /// The version of the server's file, for the mark (see `FinishedMark.serverVersion`).
    let serverVersion: UInt64?
    let sync: Bool
    let connections: Int
    let started: Double
    /// The part file was found absent just before the probe (see `StartingNames`): no look again.
    var partAbsent = false
    /// What the probe cost the server: the file's whole cost.
    var tally = RequestTally()

    var total: Int64 { Int64(bytes.count) }

    /// The file saved under its final name, or nil where the usual path must run (no unnamed files
    /// here, the name taken, no /proc to link through).
    func save() throws(SeggetError) -> DownloadResult? {
        // A part file beside the name (a stale one, or another segget's, locked): the usual path.
        // Looked for here rather than in `wholeSave`, off the loop where a batch saves on a writer.
        guard partAbsent || PosixFile.fileSize(path: paths.part) == nil else { return nil }
        let directory = FileSystem.directoryName(of: paths.final)
        let file: PosixFile
        do {
            file = try PosixFile.createUnnamed(inDirectory: directory, permissions: 0o644)
        } catch {
            // Where no unnamed file can be made, the part file can (or fails with the usual message).
            return nil
        }
        defer { file.close() }
        do {
            try bytes.withUnsafeBytes { (raw) throws(Errno) in try file.write(raw, at: 0) }
            FinishedMark.write(on: file, url: source, verified: verified, serverVersion: serverVersion)
            if sync { try file.sync() }
        } catch {
            throw FetchEngine.writeError(error, resumable: false)
        }
        do {
            try file.link(as: paths.final)
        } catch .fileExists, .noSuchFileOrDirectory {
            // The name is taken (a file, a directory, a link: `--force` replaces a file), or there is
            // no /proc to link through: the usual path looks at what is there and says what to do.
            return nil
        } catch {
            throw SeggetError(.fileSystem, "could not save \(paths.final): \(error).")
        }
        if sync { try? PosixFile.syncDirectory(containing: paths.final) }
        return DownloadResult(
            path: paths.final, bytes: total, resumedBytes: 0, receivedBytes: total, seconds: monotonicSeconds() - started,
            connections: connections, verified: verified, usedRanges: true, tally: tally,
            hashing: verified.isEmpty ? nil : HashStatistics(fromMemory: total))
    }
}

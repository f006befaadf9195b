import SeggetJournal
import SeggetSystem

extension PartialDownload {
    /// Opens the partial download for `probe`: resumes when the journal and the data agree with the
    /// server (and `fresh` is false), else starts over with a new data file, locked, with its space
    /// reserved, and a journal when the download can be resumed (`ranged`, and more to fetch than the
    /// probe brought).
    ///
    /// With `mustResume` (the link was renewed mid-download) nothing is started over: a partial
    /// download that cannot be resumed is an error, and its files are left as they are. With
    /// `standIn` (the URL of a `--mirror` answering for the main URL, which failed), a partial
    /// download of another length or other validators than the mirror's, or one the mirror cannot
    /// continue without ranges, is left as it is, and an error: it may be the main URL's version,
    /// which nothing shows has changed.
    static func open(
        paths: Paths, url: String, probe: ProbeResult, ranged: Bool, fresh: Bool, chunkSize: Int64,
        mustResume: Bool = false, standIn: String? = nil, sameFile: SameFileEvidence = SameFileEvidence(),
        events: (@Sendable (DownloadEvent) -> Void)?
    ) throws(SeggetError) -> PartialDownload {
        try paths.checkSideFileNames()
        guard ranged, let total = probe.totalLength else {
            if mustResume {
                throw SeggetError(.protocolViolation, "the renewed link does not serve byte ranges, so the download cannot continue from \(paths.part); it is kept as it was.")
            }
            if let mirror = standIn, !fresh, PosixFile.fileSize(path: paths.journal) != nil {
                throw SeggetError.standInCannot(mirror, "does not serve byte ranges", continuing: "the partial download \(paths.part)")
            }
            if !fresh, PosixFile.fileSize(path: paths.journal) != nil {
                events?(.notice("the server cannot resume a partial download; starting over."))
            }
            return try create(
                paths: paths, url: url, probe: probe, total: probe.totalLength ?? 0, chunkSize: chunkSize,
                withJournal: false)
        }
        let opened: PartialDownload
        if !fresh, let resumed = try resume(
            paths: paths, url: url, probe: probe, total: total, renewed: mustResume, standIn: standIn, sameFile: sameFile,
            events: events) {
            opened = resumed
        } else if mustResume {
            throw SeggetError(.protocolViolation, "after renewing the link, the partial download \(paths.part) could not be resumed (see the notice above); it is kept as it was.")
        } else {
            // A file the probe brought whole needs no journal: there is nothing to resume. Nor a
            // reservation: the probe's bytes are written at once, all of them (`placeProbePrefix`).
            let broughtWhole = Int64(probe.prefix.count) >= total
            opened = try create(
                paths: paths, url: url, probe: probe, total: total, chunkSize: chunkSize,
                withJournal: !broughtWhole, reserve: !broughtWhole)
        }
        if let journal = opened.journal {
            // Read what an earlier run recorded (trusted only in the same boot), then start afresh.
            if journal.openedInSameBoot, let trusted = opened.trusted {
                let plan = ChunkPlan(totalLength: total, chunkSize: opened.chunkSize)
                let recorded = ProgressSlots.read(path: paths.progress, journal: journal.header, plan: plan)
                    .filter { !trusted[$0.key] }
                let (kept, rejected) = ChunkVoucher.keepMatchingPartials(recorded, data: opened.data, plan: plan)
                if rejected > 0 {
                    events?(.notice("\(rejected) partly written chunk\(rejected == 1 ? "" : "s") in \(paths.part) did not match the recorded checksum; fetching \(rejected == 1 ? "it" : "them") from the start."))
                }
                opened.partial = kept
            }
            opened.progress = try? ProgressSlots.create(path: paths.progress, journal: journal.header)
        }
        return opened
    }

    /// The partial download an earlier run left, if its journal describes this URL and this version
    /// of the file and its data file is whole; nil (with a notice saying why) to start over.
    private static func resume(
        paths: Paths, url: String, probe: ProbeResult, total: Int64, renewed: Bool, standIn: String?,
        sameFile: SameFileEvidence, events: (@Sendable (DownloadEvent) -> Void)?
    ) throws(SeggetError) -> PartialDownload? {
        let opened: (journal: Journal, trusted: ChunkBitmap)
        do {
            opened = try Journal.open(path: paths.journal, currentBootID: Journal.currentBootID())
        } catch .missing {
            if PosixFile.fileSize(path: paths.part) != nil {
                events?(.notice("found \(paths.part) without its journal, so its contents cannot be trusted; starting over."))
            }
            return nil
        } catch .damaged(.unsupportedVersion(let version)) {
            events?(.notice("the journal \(paths.journal) has unsupported version \(version) (another segget wrote it; this one reads journal formats \(JournalCodec.readableVersions.lowerBound)-\(JournalCodec.readableVersions.upperBound)); starting over."))
            return nil
        } catch .damaged(let why) {
            events?(.notice("the journal \(paths.journal) is damaged (\(why.shortDescription)); starting over."))
            return nil
        } catch {
            events?(.notice("the journal \(paths.journal) could not be read (\(error)); starting over."))
            return nil
        }
        let h = opened.journal.header
        func restart(_ why: String) -> PartialDownload? {
            opened.journal.close()
            events?(.notice("\(why); starting over."))
            return nil
        }
        // A stand-in's answer shows what the mirror holds, not that the main URL's file changed.
        func otherVersion(_ why: String, _ standInWhy: String) throws(SeggetError) -> PartialDownload? {
            guard let mirror = standIn else { return restart(why) }
            opened.journal.close()
            throw SeggetError.standInCannot(mirror, standInWhy, continuing: "the partial download \(paths.part)")
        }
        // Another URL's partial download is this one's only where something shows the same file
        // (`OtherURLResume`); otherwise it is not this download's to continue or to delete.
        let otherURL = OtherURLResume.judge(
            journalURL: h.url, url: url, declared: sameFile.urls, bytesChecked: sameFile.bytesChecked, renewed: renewed)
        if otherURL == .unproven {
            opened.journal.close()
            var e = SeggetError(
                .fileSystem,
                "\(paths.part) is a partial download of another URL, \(URLParts.shown(h.url)), and nothing shows that \(URLParts.shown(url)) serves the same file: \(ResourceKey.difference(h.url, url)), and an equal length and ETag do not show equal bytes (many servers make the ETag from the file's time and size alone). It is kept as it was: \(NextStep.otherURLsPartial.cli).",
                retryAdvice: .never)
            e.nameHeldByAnotherDownload = true
            throw e
        }
        if h.totalLength != total {
            return try otherVersion("the file on the server changed size (\(h.totalLength) → \(total) bytes)",
                                    "serves \(total) bytes where the partial download has \(h.totalLength)")
        }
        if probe.etag == nil && probe.lastModified == nil {
            return try otherVersion("the server sends neither ETag nor Last-Modified, so it cannot prove the file is unchanged",
                                    "sends neither ETag nor Last-Modified, so nothing shows that it holds the same version")
        }
        // A mirror that stood in for the main URL may have worded the same version's ETag its way.
        if h.lastModified != probe.lastModified
            || (!AgedETag.sameVersion(kept: h.etag, got: probe.etag, keptModified: h.lastModified, gotModified: probe.lastModified)
                && !Download.sameVersionInOtherWords(h.etag, h.lastModified, probe.etag, probe.lastModified, length: total))
        {
            return try otherVersion("the file changed on the server since the last run (ETag/Last-Modified differ)",
                                    "sends another ETag or Last-Modified than the partial download's")
        }
        if let why = otherURL.reason {
            // Signed links change every time they are made: the same resource (or a URL the user
            // named for the file, or a checksum) with the same length and validators (checked
            // above) continues the partial download.
            events?(.notice("the partial download came from another URL (\(URLParts.shown(h.url))); this one is \(why), and serves the same length and \(probe.etag == nil ? "Last-Modified" : h.etag == probe.etag ? "ETag" : "Last-Modified, and an ETag its server words otherwise"), so it continues from there."))
        }
        guard let size = PosixFile.fileSize(path: paths.part) else {
            return restart("the partial data file \(paths.part) is missing")
        }
        if size != total {
            return restart("the partial data file \(paths.part) has \(size) bytes instead of \(total)")
        }
        let data: PosixFile
        do {
            data = try PosixFile.open(path: paths.part, mode: .openExisting)
        } catch {
            opened.journal.close()
            throw SeggetError(.fileSystem, "could not open \(paths.part) to resume: \(error).")
        }
        do {
            try lockExclusively(data, path: paths.part)
        } catch {
            opened.journal.close()
            throw error
        }
        return PartialDownload(
            paths: paths, data: data, journal: opened.journal, trusted: opened.trusted, chunkSize: h.chunkSize,
            isNew: false)
    }

    /// A new, locked data file of `total` bytes (reserved on disk) in place of whatever was there.
    private static func create(
        paths: Paths, url: String, probe: ProbeResult, total: Int64, chunkSize: Int64, withJournal: Bool,
        reserve: Bool = true
    ) throws(SeggetError) -> PartialDownload {
        // Refuse to clobber the partial file of a download that is running right now.
        var partExists = true
        do {
            let existing = try PosixFile.open(path: paths.part, mode: .openExisting)
            try lockExclusively(existing, path: paths.part)
            existing.close()
        } catch let e as Errno where e == .noSuchFileOrDirectory {
            // Nothing to remove (and if one appears now, the exclusive create below refuses it).
            partExists = false
        } catch let e as SeggetError {
            throw e
        } catch {}
        do {
            // Every side file an earlier run left goes now, the non-ranged path's included.
            try? PosixFile.remove(path: paths.progress)
            try PosixFile.remove(path: paths.journal)
            if partExists { try PosixFile.remove(path: paths.part) }
        } catch {
            throw SeggetError(.fileSystem, "could not remove the old partial download \(paths.part): \(error).")
        }
        let directory = FileSystem.directoryName(of: paths.part)
        let data: PosixFile
        do {
            data = try PosixFile.open(path: paths.part, mode: .createExclusive(permissions: 0o644))
        } catch {
            throw SeggetError(.fileSystem, createMessage(paths, error))
        }
        // Space is judged once the file could be made: a directory where nothing can be written (a
        // read-only file system, no permission) says so, rather than "free some space".
        if total > 0, let free = try? PosixFile.freeSpace(directoryOf: paths.part), free < total {
            data.close()
            try? PosixFile.remove(path: paths.part)
            throw SeggetError(.fileSystem, "not enough space: the file needs \(Format.bytes(total)) but only \(Format.bytes(free)) is free in \(directory); \(NextStep.freeSpace.cli).")
        }
        try lockExclusively(data, path: paths.part)
        if total > 0 && reserve {
            do {
                try data.preallocate(length: total)
            } catch {
                data.close()
                try? PosixFile.remove(path: paths.part)
                if error == .noSpace {
                    throw SeggetError(.fileSystem, "not enough space for \(Format.bytes(total)) in \(directory); \(NextStep.freeSpace.cli).")
                }
                if error == .fileTooLarge {
                    throw SeggetError(.fileSystem, "could not make room for the file in \(directory): \(FileTooLarge.reason(directory: directory, size: total)).")
                }
                throw SeggetError(.fileSystem, "could not reserve \(Format.bytes(total)) for \(paths.part): \(error).")
            }
        }
        guard withJournal else {
            return PartialDownload(paths: paths, data: data, journal: nil, trusted: nil, chunkSize: chunkSize, isNew: true)
        }
        let header = JournalHeader(
            url: url, finalURL: probe.finalURL, totalLength: total, chunkSize: chunkSize, etag: probe.etag,
            lastModified: probe.lastModified, bootID: Journal.currentBootID(), createdAt: WallClock.secondsSinceEpoch())
        do {
            let journal = try Journal.create(path: paths.journal, header: header)
            return PartialDownload(paths: paths, data: data, journal: journal, trusted: nil, chunkSize: chunkSize, isNew: true)
        } catch {
            // The data file holds nothing yet: it goes, rather than fill the disk without a journal
            // (a rerun would throw it away as untrustworthy anyway).
            data.close()
            try? PosixFile.remove(path: paths.part)
            try? PosixFile.remove(path: paths.journal)
            if error == .noSpace, PosixFile.outOfInodes(directoryOf: paths.journal) {
                throw SeggetError(.fileSystem, "the file system of \(directory) has no free inode left for the journal beside the file (it can hold no more files, whatever space is free); delete files there, or choose another directory with -d or -o.")
            }
            if error == .noSpace {
                throw SeggetError(.fileSystem, "not enough space in \(directory) for the journal beside the file's \(Format.bytes(total)) (a few KiB more); \(NextStep.freeSpace.cli).")
            }
            throw SeggetError(.fileSystem, "could not create the journal \(paths.journal): \(error); nothing was kept.")
        }
    }

    /// The message for the data file of `paths` that could not be created. A permission denied names
    /// the directory and the final name: a small file is saved without a part file (`O_TMPFILE`), so
    /// the part file's name was one the user never sees.
    static func createMessage(_ paths: Paths, _ error: Errno) -> String {
        let path = paths.part
        return switch error {
        case .fileExists, .tooManySymbolicLinkLevels: "\(path) appeared while segget was creating it (a symbolic link?); refusing to write through it."
        case .permissionDenied, .notPermitted:
            "permission denied creating files in \(FileSystem.directoryName(of: path)) (to save \(paths.final)); choose another directory with -d or -o."
        case .readOnlyFileSystem: "\(FileSystem.directoryName(of: path)) is on a read-only file system; choose another directory with -d or -o."
        case .noSuchFileOrDirectory: "the directory of \(path) does not exist."
        case .invalidArgument:
            "the file system of \(FileSystem.directoryName(of: path)) refuses the name of \(paths.final) (FAT refuses : ? * \" < > | among others); give the file another name with -o."
        case .noSpace where PosixFile.outOfInodes(directoryOf: path):
            "the file system of \(FileSystem.directoryName(of: path)) has no free inodes left (it can hold no more files, whatever space is free); delete files there, or choose another directory with -d or -o."
        case .noSpace: "the disk is full; \(NextStep.freeSpace.cli)."
        default: "could not create \(path): \(error)."
        }
    }

    /// Takes the data file's lock, or closes it and says that another segget holds it.
    private static func lockExclusively(_ file: PosixFile, path: String) throws(SeggetError) {
        do {
            try file.tryLockExclusively()
        } catch {
            file.close()
            throw SeggetError(.fileSystem, "another segget is already downloading into \(path); wait for it or stop it first.")
        }
    }
}

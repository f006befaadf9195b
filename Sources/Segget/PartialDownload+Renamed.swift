import SeggetJournal
import SeggetSystem

/// A partial download that an earlier run of the same URL left in the same directory under another
/// name: the server named the file otherwise then (a `Content-Disposition` that carries a date, a
/// build number or a request id). Without this, a rerun started over under the new name and the
/// old name's side files stayed behind for good.
extension PartialDownload {
    /// The name (without the journal's suffix) of the journal among `journals` (the side files'
    /// common stem, and the journal's header) that an earlier run of `url` left, other than `own`;
    /// the newest, where several runs left one. Credentials in `url` are compared redacted, as
    /// journals record it.
    static func renamedStem(own: String, url: String, journals: [(stem: String, header: JournalHeader)]) -> String? {
        let recorded = URLParts.redactingCredentials(url)
        return journals
            .filter { $0.stem != own && !$0.stem.isEmpty && $0.header.url == recorded }
            .max { ($0.header.createdAt, $0.stem) < ($1.header.createdAt, $1.stem) }?
            .stem
    }

    /// Moves an earlier run's partial download of `url` from its old name in `paths`' directory to
    /// `paths` (data file, progress slots, then the journal), so that opening `paths` resumes it:
    /// the journal's checks (length, validators, the data file's size) then decide, as for any
    /// rerun, and a version that changed is started over in the same files. Returns the old final
    /// path when it moved one. Nothing moves where `paths` has a journal of its own, where its data
    /// file is of another download, or where another segget holds the old data file.
    ///
    /// `listed`: the directory's names where a batch read them once (`StartingNames`); else the
    /// directory is read here. A run stopped between the renames is finished by the next: the data
    /// file may already be under the new name.
    static func adoptRenamed(into paths: Paths, url: String, listed: [String]?) -> String? {
        guard !FileSystem.exists(paths.journal) else { return nil }
        let directory = FileSystem.directoryName(of: paths.final)
        guard let names = listed ?? FileSystem.names(inDirectory: directory, limit: 1 << 16) else { return nil }
        let suffix = Paths.journalSuffix
        var journals: [(stem: String, header: JournalHeader)] = []
        for name in names where name.hasSuffix(suffix) {
            let stem = String(name.dropLast(suffix.count))
            // A name that is itself a side file's (`x.segget-part.segget-journal`) is no download's.
            guard Paths.sideFileSuffix(of: stem) == nil,
                let header = Journal.header(at: OutputNames.join(directory, name))
            else { continue }
            journals.append((stem, header))
        }
        let own = String(paths.final.split(separator: "/", omittingEmptySubsequences: false).last ?? "")
        guard let stem = renamedStem(own: own, url: url, journals: journals) else { return nil }
        let old = Paths(final: OutputNames.join(directory, stem))

        let oldData = FileSystem.exists(old.part)
        let newData = FileSystem.exists(paths.part)
        // Both: the new name's data file belongs to something else. Neither: nothing to continue.
        guard oldData != newData else { return nil }
        let data: PosixFile
        do {
            data = try PosixFile.open(path: oldData ? old.part : paths.part, mode: .openExisting)
        } catch {
            return nil
        }
        defer { data.close() }
        // Held until the journal is moved: a segget running on the old name keeps its files.
        guard (try? data.tryLockExclusively()) != nil else { return nil }
        do throws(Errno) {
            if oldData { try PosixFile.rename(from: old.part, to: paths.part) }
            if FileSystem.exists(old.progress) { try PosixFile.rename(from: old.progress, to: paths.progress) }
            try PosixFile.rename(from: old.journal, to: paths.journal)
        } catch {
            return nil
        }
        return old.final
    }
}

import SeggetSystem
import Synchronization

/// What earlier runs left in a batch's output directories (journals and part files), read once per
/// directory instead of looked up file by file. A new file of a batch looks for two names that are
/// almost never there, its journal before the probe and its part file before a whole save, and in a
/// directory that the batch fills, each of those look-ups scans the directory's blocks: two of them
/// per file were about a tenth of segget's time in a batch of 500 files of 64 KiB (curl's files get
/// one look-up each, their creation).
///
/// A directory is read the first time one of its paths is asked about, with its names kept (the side
/// files, and the files earlier runs finished: see `mayHaveExisted`). The answer "surely absent" is
/// given at most once per path, for a file's first attempt, before that file could have made anything
/// under the name (the batch gives each file a name of its own); a second question about the same
/// path (a later attempt, another file whose first guess was the same name) is answered "look". A name that another process makes after the reading is not
/// seen, as it would not be seen a moment after a look-up either.
public final class StartingNames: Sendable, Equatable {
    private struct State {
        /// A directory's names when it was read; nil where it could not be read, or held more
        /// entries than `entryLimit` (reading it would cost more than the look-ups it saves).
        var directories: [String: Set<String>?] = [:]
        var answered: Set<String> = []
    }

    private let state = Mutex(State())
    private let entryLimit: Int

    /// For a batch of `files` files: a directory of more than eight entries per file, or 4,096, is
    /// not read.
    public convenience init(files: Int) {
        self.init(entryLimit: max(4096, 8 * files))
    }

    init(entryLimit: Int) {
        self.entryLimit = entryLimit
    }

    /// True only where nothing was at `path` when its directory was read, and only the first time
    /// `path` is asked about; false means "look".
    public func surelyAbsent(_ path: String) -> Bool {
        let name = Self.lastComponent(of: path)
        return state.withLock { s in
            guard s.answered.insert(path).inserted else { return false }
            guard let known = Self.listing(of: FileSystem.directoryName(of: path), in: &s, limit: entryLimit) else { return false }
            return !known.contains(String(name))
        }
    }

    /// False only where nothing was at `path` when its directory was read, however often asked: a file
    /// an earlier run finished there was seen (see `FinishedMark`); true means "look".
    public func mayHaveExisted(_ path: String) -> Bool {
        let name = Self.lastComponent(of: path)
        return state.withLock { s in
            guard let known = Self.listing(of: FileSystem.directoryName(of: path), in: &s, limit: entryLimit) else { return true }
            return known.contains(String(name))
        }
    }

    /// True where `directory` was read and held nothing: no file there can be one an earlier run left.
    /// (`directory` as a batch's `-d` gives it: nil for the current directory.)
    public func heldNothing(_ directory: String?) -> Bool {
        // The key its files' paths give (`dl/` and `dl` are one directory).
        let key = FileSystem.directoryName(of: OutputNames.join(directory, "x"))
        return state.withLock { s in Self.listing(of: key, in: &s, limit: entryLimit)?.isEmpty == true }
    }

    /// Every name in the directory of `path` when it was first read (reading it now if it was
    /// not); nil where it cannot be read or holds too many entries.
    func names(besides path: String) -> [String]? {
        state.withLock { s in Self.listing(of: FileSystem.directoryName(of: path), in: &s, limit: entryLimit).map(Array.init) }
    }

    /// The names in `directory` when it was first read (every name: the side files, and the finished
    /// files an earlier run left), reading it now if it was not; nil where it cannot be read or
    /// holds more than `limit` entries.
    private static func listing(of directory: String, in s: inout State, limit: Int) -> Set<String>? {
        if let listed = s.directories[directory] { return listed }
        let known = FileSystem.names(inDirectory: directory, limit: limit).map(Set.init)
        s.directories[directory] = .some(known)
        return known
    }

    private static func lastComponent(of path: String) -> Substring {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path[...] }
        return path[path.utf8.index(after: slash)...]
    }

    /// The same instance (a batch's), not an equal state.
    public static func == (a: StartingNames, b: StartingNames) -> Bool { a === b }
}

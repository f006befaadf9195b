import SeggetSystem

/// What to say when a write or a reservation fails with `EFBIG`: past this process's file size limit
/// (`ulimit -f`; segget ignores SIGXFSZ, so the write fails rather than the process ending without a
/// word), or past what the file system can hold in one file (FAT: 4 GiB less a byte).
enum FileTooLarge {
    /// This process's file size limit (`ulimit -f`) where it is the likely cause for a file of
    /// `size` (nil: not known): a limit below it, or any limit where the size is not known.
    static func processLimit(for size: Int64?) -> Int64? {
        guard let limit = PosixFile.processFileSizeLimit, size.map({ $0 > limit }) ?? true else { return nil }
        return limit
    }

    /// The reason and the way out, for a file of `size` bytes (nil: not known) in `directory` (nil:
    /// not known), or for the file standard output goes to (`stream`). No trailing period.
    static func reason(directory: String?, size: Int64?, stream: Bool = false) -> String {
        let sized = size.map { " of \(Format.bytes($0))" } ?? " this large"
        if let limit = processLimit(for: size) {
            return "this process may write no file larger than \(Format.bytes(limit)) (its file size limit, ulimit -f), too little for a file\(sized); \(NextStep.raiseFileSizeLimit.cli)"
        }
        if stream {
            return "the file standard output goes to cannot grow larger (its file system's limit; FAT's is 4 GiB less a byte); send it to a file on another file system"
        }
        let place = directory.map { "the file system of \($0)" } ?? "the file system"
        return "\(place) cannot hold a file\(sized) (FAT's limit is 4 GiB less a byte); \(NextStep.otherFileSystem.cli)"
    }
}

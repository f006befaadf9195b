import Segget
import SeggetQueue

/// Renders task snapshots as aria2 status objects, with aria2's types and presence rules for an
/// HTTP download (checked against aria2c 1.36.0): every value a string; upload figures "0";
/// `numSeeders` and `seeder` absent (BitTorrent only); `bitfield` only once the length is known;
/// `errorCode` and `errorMessage` only once the download has stopped.
public enum Aria2Status {
    /// The keys of a full status object, in the order they are written.
    public static let allKeys: [String] = [
        "gid", "status", "totalLength", "completedLength", "uploadLength", "downloadSpeed", "uploadSpeed",
        "connections", "pieceLength", "numPieces", "dir", "files", "errorCode", "errorMessage", "bitfield",
    ]

    /// aria2's error code for a download removed by the user (`error_code::REMOVED`).
    public static let removedErrorCode = 31

    /// `keys`: the filter of tellStatus/tellActive/…; nil or empty means all keys.
    public static func render(_ task: TaskSnapshot, keys: [String]? = nil) -> JSON {
        let wanted: Set<String>? = keys.flatMap { $0.isEmpty ? nil : Set($0) }
        var members: [(String, JSON)] = []
        for key in allKeys where wanted?.contains(key) ?? true {
            if let value = value(of: key, in: task) { members.append((key, value)) }
        }
        return .object(members)
    }

    static func value(of key: String, in task: TaskSnapshot) -> JSON? {
        switch key {
        case "gid": return .string(task.id.gid)
        case "status": return .string(task.status.rawValue)
        case "totalLength": return .string(String(task.totalLength))
        case "completedLength": return .string(String(task.completedLength))
        case "uploadLength", "uploadSpeed": return .string("0")
        case "downloadSpeed": return .string(String(task.status == .active ? task.downloadSpeed : 0))
        case "connections": return .string(String(task.status == .active ? task.connections : 0))
        case "pieceLength": return .string(String(task.pieceLength))
        case "numPieces": return .string(String(task.numPieces))
        case "dir": return .string(task.directory)
        case "files": return files(task)
        case "errorCode":
            // aria2 reports an error code only once a download has stopped.
            switch task.status {
            case .error: return .string(String(task.errorCode ?? 1))
            case .removed: return .string(String(removedErrorCode))
            case .complete: return .string("0")
            default: return nil
            }
        case "errorMessage":
            // Present once stopped, as the code; aria2 leaves it empty for a completed or removed download.
            guard task.status.isStopped else { return nil }
            // Escaped when the error was made (`SeggetError`); again here for a message stored by an older segget.
            let message = task.status == .error ? task.errorMessage ?? "" : ""
            return .string(DisplayText.escaping(message, keepingLineBreaks: false))
        case "bitfield": return task.numPieces > 0 ? task.bitfield.map(JSON.string) : nil
        default: return nil
        }
    }

    /// One file per task; its path is empty until segget knows the name (as aria2 before the first response).
    public static func files(_ task: TaskSnapshot) -> JSON {
        return .array([
            .object([
                ("index", .string("1")),
                ("path", .string(task.path ?? task.options.outputName.map { task.directory + "/" + $0 } ?? "")),
                ("length", .string(String(task.totalLength))),
                ("completedLength", .string(String(task.completedLength))),
                ("selected", .string("true")),
                ("uris", uris(task)),
            ])
        ])
    }

    /// `getUris`: the task's URLs and whether each is in use. As in aria2, the first URL is "used"
    /// from the download's first start on (and stays so once paused, removed, failed or complete);
    /// segget spreads ranges over the other URLs too, so they count as used while it runs.
    public static func uris(_ task: TaskSnapshot) -> JSON {
        let started =
            task.status == .active || task.status == .complete || task.status == .error
            || task.completedLength > 0
        return .array(
            task.urls.enumerated().map { i, url in
                let used = started && (i == 0 || task.status == .active)
                return .object([("uri", .string(url)), ("status", .string(used ? "used" : "waiting"))])
            })
    }

    /// The indices of a list of `size` items that aria2's tellWaiting/tellStopped return for
    /// (offset, num): a negative offset counts from the end and walks backwards (newest first).
    public static func page(size: Int, offset: Int, num: Int) -> [Int] {
        guard num > 0, size > 0 else { return [] }
        if offset >= 0 {
            guard offset < size else { return [] }
            return Array(offset..<min(size, offset + num))
        }
        let start = size + offset  // the first item returned; the walk goes down from there
        guard start >= 0 else { return [] }
        let end = max(0, start - num + 1)
        return Array((end...start).reversed())
    }
}

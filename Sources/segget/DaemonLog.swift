import Segget
import SeggetQueue

/// The daemon's log (its stderr) beyond starting and stopping: one line for each task that failed,
/// with its message. Through `writeStderr`, so a server's text in it is shown escaped.
enum DaemonLog {
    static func record(_ event: QueueEvent, of queue: DownloadQueue) {
        guard case .failed(let id) = event, let task = queue.snapshot(id) else { return }
        let url = task.urls.first.map { " \(URLParts.shown($0))" } ?? ""
        writeStderr("segget daemon: task \(id.gid)\(url) failed: \(task.errorMessage ?? "no reason given")\n")
    }
}

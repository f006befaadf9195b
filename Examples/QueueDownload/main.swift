// A small program using SeggetQueue (docs/queue.md): queues URLs in a durable queue and runs it
// until nothing is left to do. Kill it at any moment and run it again with the same database (and
// no URLs): every task is still there and the active ones resume from their journals.
//
//     segget-queue-example [--max-active N] [--budget N] DATABASE DOWNLOAD_ROOT [URL...]
import Glibc
import SeggetQueue

/// Writes a line to standard error (fd 2; the C `stderr` global is not concurrency-safe).
func warn(_ line: String) {
    let text = line + "\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
}

var args = Array(CommandLine.arguments.dropFirst())
var maxActive = 2
var budget = 16
while let flag = args.first, flag.hasPrefix("--") {
    guard args.count >= 2, let n = Int(args[1]) else {
        warn("\(flag) needs a number")
        exit(2)
    }
    switch flag {
    case "--max-active": maxActive = n
    case "--budget": budget = n
    default:
        warn("unknown option \(flag)")
        exit(2)
    }
    args.removeFirst(2)
}
guard args.count >= 2 else {
    warn("usage: segget-queue-example [--max-active N] [--budget N] DATABASE DOWNLOAD_ROOT [URL...]")
    exit(2)
}

var settings = QueueSettings(downloadRoot: args[1])
settings.maxActive = maxActive
settings.connectionBudget = budget
settings.progressSaveInterval = 1
do {
    let queue = try DownloadQueue(databasePath: args[0], settings: settings)
    for url in args.dropFirst(2) {
        let id = try queue.add(urls: [url], options: TaskOptions())
        print("added \(id.gid) \(url)")
    }
    let events = queue.events
    queue.start()
    print("started")
    let watcher = Task {
        for await e in events { print("event \(e)") }
    }
    // Report once a second until no task is active or waiting.
    while true {
        let stat = queue.globalStat()
        let waiting = queue.waiting(offset: 0, count: 1000).filter { $0.status == .waiting }
        if stat.numActive == 0 && waiting.isEmpty { break }
        for t in queue.active() {
            print(
                "\(t.id.gid) \(t.completedLength)/\(t.totalLength) \(t.downloadSpeed) B/s, \(t.connections) of \(t.grantedConnections) connections"
            )
        }
        try await Task.sleep(for: .seconds(1))
    }
    for t in queue.stopped(offset: 0, count: 1000) {
        print("\(t.id.gid) \(t.status.rawValue) \(t.path ?? "-") \(t.errorMessage ?? "")")
    }
    await queue.shutdown()
    watcher.cancel()
} catch {
    warn("\(error)")
    exit(1)
}

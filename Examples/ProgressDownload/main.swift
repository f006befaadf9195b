// A small program that uses the Segget library: download one URL with a progress line.
//
//   swift run segget-example URL [FILE]
//
// Ctrl-C cancels the Swift task; the download stops and leaves FILE.segget-part and its journal,
// so running the same command again resumes where it stopped.
import Dispatch
import Glibc
import Segget

/// Writes to standard error (file descriptor 2; the C `stderr` global is not concurrency-safe).
func say(_ text: String) {
    var t = text
    t.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
guard arguments.count == 2 || arguments.count == 3 else {
    say("usage: segget-example URL [FILE]\n")
    exit(2)
}

var options = DownloadOptions()
options.connections = 4
options.outputPath = arguments.count == 3 ? arguments[2] : nil
let download = Download(url: arguments[1], options: options)

// The download runs on its own thread; this task just awaits it. Cancelling the task stops it.
let handle = download.start()
let transfer = Task { () async throws(SeggetError) -> DownloadResult in
    try await handle.result()
}

// Ctrl-C → cancel the task (a second Ctrl-C while stopping is ignored).
signal(SIGINT, SIG_IGN)
let interrupts = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
interrupts.setEventHandler { @Sendable in transfer.cancel() }
interrupts.resume()

// Print a progress line a few times a second until the stream ends with the download.
let display = Task {
    for await p in handle.progress {
        var line = "\r\(Format.bytes(p.completedBytes))"
        if let total = p.totalBytes, total > 0 {
            line += " of \(Format.bytes(total)) (\(Int(Double(p.completedBytes) * 100 / Double(total)))%)"
        }
        line += ", \(Format.rate(p.bytesPerSecond))"
        if let eta = p.eta { line += ", \(Format.seconds(eta)) left" }
        say(line + "\u{1B}[K")
    }
}
let events = Task {
    for await e in handle.events {
        if case .notice(let text) = e { say("\r\u{1B}[K\(text)\n") }
    }
}

do {
    let result = try await transfer.value
    await display.value
    await events.value
    print("\rsaved \(result.path): \(Format.bytes(result.bytes)) in \(Format.seconds(result.seconds))\u{1B}[K")
    exit(0)
} catch {
    await display.value
    await events.value
    let failure = error as? SeggetError ?? SeggetError(.internalError, "\(error)")
    say("\r\u{1B}[K\(failure.message)\n")
    exit(failure.exitCode)
}

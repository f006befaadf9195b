import Dispatch
import Glibc
import Segget
import SeggetSystem

/// Whether stderr gets a live line redrawn in place, and how wide it may be.
enum StderrBar {
    /// A terminal that takes `\r` and ESC[2K: not a file or pipe, nor `TERM=dumb` (an editor's shell
    /// buffer), which get a plain line every few seconds instead.
    static let drawn: Bool = isatty(2) == 1 && getenv("TERM").map { String(cString: $0) != "dumb" } ?? true

    /// The terminal's width now, read at each redraw (a window resized or a tmux pane split mid-download
    /// takes effect at the next one); 80 where it cannot be read. Any width is taken: a line one
    /// column too wide wraps, and the clearing of the last row leaves the rows above behind.
    static var columns: Int { max(2, Terminal.columns(fd: 2).flatMap { $0 > 0 ? $0 : nil } ?? 80) }
}

/// Progress and messages on stderr: a live bar on a terminal, a plain line every few seconds
/// otherwise, nothing but errors with `-q`. Called on the download thread only.
final class TerminalUI: @unchecked Sendable {
    private let quiet: Bool
    private let isTTY = StderrBar.drawn
    private var lastDraw = 0.0
    private var lastPlain = 0.0
    private var drawn = false
    private var columns: Int { StderrBar.columns }

    init(quiet: Bool) {
        self.quiet = quiet
    }

    func progress(_ p: DownloadProgress) {
        guard !quiet else { return }
        let now = p.elapsed
        if isTTY {
            guard now - lastDraw >= 0.2 || lastDraw == 0 else { return }
            lastDraw = now
            draw(bar(p))
        } else {
            guard now - lastPlain >= 5 else { return }
            lastPlain = now
            write(line: "segget: \(summaryText(p))")
        }
    }

    func event(_ e: DownloadEvent) {
        guard !quiet else { return }
        switch e {
        case .notice(let text):
            write(line: "segget: \(text)")
        case .retry(let c, let attempt, let delay, let reason):
            write(line: "segget: connection \(c + 1): \(Format.retry(reason: reason, attempt: attempt, delay: delay))")
        case .redial(let c, let reason):
            write(line: "segget: connection \(c + 1) is slow (\(reason)); reconnecting.")
        }
    }

    func finished(_ r: DownloadResult) {
        guard !quiet else { return }
        clearLine()
        // An earlier run finished it (its notice said so): nothing was saved now.
        if r.finishedEarlier { return }
        let rate = r.seconds > 0 ? Double(r.bytes - r.resumedBytes) / r.seconds : 0
        // Connections asked for, or fewer: the most answers that came at once (a host that refused
        // the rest), else the requests that went out (an origin worth one request).
        let used = if let served = r.servedAtOnce, served > 0 {
            min(r.connections, served)
        } else {
            r.tally.requests > 0 ? min(r.connections, r.tally.requests) : r.connections
        }
        var text = "segget: saved \(r.path) (\(Format.bytes(r.bytes))) in \(Format.seconds(r.seconds)), \(Format.rate(rate)) average, \(used) connection\(used == 1 ? "" : "s")"
        if used < r.connections { text += " of \(r.connections)" }
        if r.resumedBytes > 0 { text += ", \(Format.bytes(r.resumedBytes)) resumed" }
        if !r.verified.isEmpty { text += ", verified \(r.verified.map { $0.split(separator: "=").first.map(String.init) ?? $0 }.joined(separator: " + "))" }
        if let p = r.pieces { text += ", " + p.summary }
        writeStderr(text + "\n")
    }

    func clearLine() {
        if drawn {
            writeStderr("", after: .clearLine)
            drawn = false
        }
    }

    private func write(line: String) {
        clearLine()
        writeStderr(line + "\n")
    }

    private func draw(_ text: String) {
        writeStderr(text, after: .clearLine)

        drawn = true
    }

    private func summaryText(_ p: DownloadProgress) -> String {
        var s = ""
        if let total = p.totalBytes, total > 0 {
            s += "\(percent(p.completedBytes, total)) \(Format.bytes(p.completedBytes)) of \(Format.bytes(total))"
        } else {
            s += Format.bytes(p.completedBytes)
        }
        s += ", \(Format.rate(p.bytesPerSecond))"
        if let eta = p.eta { s += ", ETA \(Format.seconds(eta))" }
        let active = p.connections.filter { $0.state != .idle }.count
        s += ", \(active) connection\(active == 1 ? "" : "s")"
        return s
    }

    private func bar(_ p: DownloadProgress) -> String {
        var bytes = Format.bytes(p.completedBytes)
        if let total = p.totalBytes { bytes += "/\(Format.bytes(total))" }
        var line = ProgressLine(
            percent: "  ?%", bytes: bytes, rate: Format.rate(p.bytesPerSecond), eta: p.eta.map(Format.seconds),
            connections: connectionView(p.connections))
        if let total = p.totalBytes, total > 0 {
            line.fraction = min(1, Double(p.completedBytes) / Double(total))
            line.percent = percent(p.completedBytes, total).leftPadded(4)
        }
        return line.text(columns: columns)
    }

    /// One character per connection: its speed relative to the fastest, `·` idle or not started yet,
    /// `w` waiting to retry, `r` racing for the last chunks. At most 32 shown.
    private func connectionView(_ cs: [ConnectionProgress]) -> String {
        let levels: [Character] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"]
        let top = cs.map(\.bytesPerSecond).max() ?? 0
        var out = ""
        for c in cs.prefix(32) {
            switch c.state {
            // A connection waiting for its first start is not yet a connection: `w` read as a retry
            // (exploratory run 9: `▁wwwwwww` at 0 % of every download, nothing failed).
            case .idle: out.append("·")
            case .waiting: out.append(c.starting ? "·" : "w")
            case .racing: out.append("r")
            case .receiving:
                let i = top > 0 ? Int((c.bytesPerSecond / top) * Double(levels.count - 1)) : 0
                out.append(levels[max(0, min(levels.count - 1, i))])
            }
        }
        if cs.count > 32 { out += "+" }
        return out
    }

    private func percent(_ a: Int64, _ b: Int64) -> String {
        "\(min(100, Int(Double(a) * 100 / Double(max(b, 1)))))%"
    }
}

/// The live line of one download: percent, bar, bytes, rate, ETA and a character per connection, in
/// that order, fitted to the terminal's width. Where they do not all fit, the connections go first,
/// then the bar (never under 10 wide), then the bytes, then the ETA; no field is shown in part. The
/// bar was kept at 10 and the line cut at the edge, so on a 40-column terminal the rate and ETA were
/// what went.
struct ProgressLine: Equatable {
    var percent: String
    var fraction = 0.0
    var bytes: String
    var rate: String
    var eta: String?
    var connections: String

    func text(columns: Int) -> String {
        let limit = max(1, columns - 1)  // the last column left free: a full row wraps on some terminals
        var info = " \(bytes) \(rate)"
        if let eta { info += " ETA \(eta)" }
        let conns = connections.isEmpty ? "" : " " + connections
        for right in [info + conns, info] {
            let width = limit - DisplayText.columns(percent) - 3 - DisplayText.columns(right)
            if width >= 10 {
                let filled = min(width, Int(fraction * Double(width)))
                let bar = String(repeating: "=", count: filled) + (filled < width ? ">" : "")
                    + String(repeating: " ", count: max(0, width - filled - 1))
                return "\(percent) [\(bar)]\(right)"
            }
        }
        // No room for a bar: the bytes go before the rate and ETA, and no field is shown in part.
        let etaText = eta.map { " ETA \($0)" } ?? ""
        if DisplayText.columns(percent + info) <= limit { return percent + info }
        for shorter in [" \(rate)\(etaText)", " \(rate)"] where DisplayText.columns(percent + shorter) <= limit {
            return percent + shorter
        }
        return DisplayText.fitted(percent, columns: limit)
    }
}

extension String {
    func leftPadded(_ n: Int) -> String { count >= n ? self : String(repeating: " ", count: n - count) + self }
}

/// Turns SIGINT, SIGTERM and SIGHUP into a request to stop cleanly; a second signal exits at once (the
/// journal is already exact on disk, so even that loses nothing but chunks in flight).
///
/// A plain signal handler, not a Dispatch signal source: a source starts libdispatch's manager
/// thread (signalfd, epoll and a thread in every run, a 1 MiB download included). The handler does
/// only what is safe in one: an atomic store, or a `write` of prepared bytes and `_exit`.
enum SignalTrap {
    /// Installs the handler for the rest of the process: a signal sets `interrupt`, a second exits.
    /// `stream`: the process writes a stream (`-o -`), which keeps no journal, so the second
    /// signal's message says how to continue one instead of "run the same command to resume". It
    /// cannot give the byte reached: a write may be under way on another thread as it exits.
    static func install(interrupt: InterruptFlag, stream: Bool = false) {
        SignalTrapState.flag = interrupt
        if stream { SignalTrapState.stoppedAtOnce = SignalTrapState.streamStoppedAtOnce }
        _ = SignalTrapState.stoppedAtOnce.count  // made now, never inside the handler
        var set = sigset_t()
        sigemptyset(&set)
        // SIGHUP (the terminal closed, an ssh session dropped) stops cleanly as well, where before it
        // killed the process with no word of what was saved. A signal the process was started to
        // ignore stays ignored, as any program leaves it: SIGHUP under nohup, SIGINT for a
        // background job of a script (`segget URL &`: the shell ignores it there, so that a Ctrl-C
        // meant for the script's foreground leaves its background work alone), either under
        // `trap '' INT TERM`. segget took SIGINT and SIGTERM back.
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            var current = sigaction()
            sigaction(sig, nil, &current)
            guard unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) != unsafeBitCast(SIG_IGN, to: Int.self)
            else { continue }
            signal(sig, signalTrapHandler)
            sigaddset(&set, sig)
        }
        // A parent may have started us with them blocked (a test runner does); the threads made after
        // this inherit the mask.
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// True once a first signal has arrived (false before `install`).
    static var isInterrupted: Bool { SignalTrapState.flag?.isSet ?? false }
}

private enum SignalTrapState {
    /// Set before the handler is installed; the handler only reads it.
    nonisolated(unsafe) static var flag: InterruptFlag?
    nonisolated(unsafe) static var stoppedAtOnce: [UInt8] = Array("\nsegget: stopped at once; run the same command to resume.\n".utf8)
    static let streamStoppedAtOnce: [UInt8] = Array(
        "\nsegget: stopped at once; a stream keeps no journal: N being the bytes its reader kept, --stream-from N continues it.\n".utf8)
}

private func signalTrapHandler(_ signal: Int32) {
    guard let flag = SignalTrapState.flag else { return }
    if flag.isSet {
        SignalTrapState.stoppedAtOnce.withUnsafeBytes { try? FileDescriptor.standardError.writeAll($0) }
        _exit(FailureKind.interrupted.exitCode)
    }
    flag.set()
}

import Glibc
import Segget
import SeggetSystem
import Synchronization

/// One URL, human output: the live bar of `TerminalUI` and one line at the end.
final class SingleUI: Reporter {
    private let ui: TerminalUI
    private let quiet: Bool

    init(quiet: Bool) {
        self.quiet = quiet
        ui = TerminalUI(quiet: quiet)
    }

    func started(_ job: JobStart) {}
    func progress(id: Int, _ p: DownloadProgress) { ui.progress(p) }
    var wantsProgress: Bool { !quiet }
    func event(id: Int, _ e: DownloadEvent) { ui.event(e) }
    func finished(id: Int, url: String, _ r: DownloadResult) { ui.finished(r) }

    func skipped(id: Int, url: String, path: String, reason: SkipReason) {
        if !quiet { writeStderr("segget: \(path) \(reason.sentence); skipped.\n") }
    }

    func failed(id: Int, url: String, path: String?, _ e: SeggetError) {
        ui.clearLine()
        writeStderr("segget: \(e.message)\n")
    }

    func summary(_ outcomes: [Outcome], seconds: Double) {}
}

/// Several files, human output on stderr: a line when each starts and ends, one combined status
/// line (a live line on a terminal, a plain line every 5 s otherwise), and a table at the end.
final class BatchUI: Reporter {
    private struct Running {
        var name: String
        var completed: Int64 = 0
        var total: Int64?
        var rate: Double = 0
    }
    private struct State {
        var running: [Int: Running] = [:]
        var ended = 0
        var lastDraw = 0.0
        var drawn = false
    }

    private let quiet: Bool
    private let count: Int
    private let isTTY = StderrBar.drawn
    private var columns: Int { StderrBar.columns }
    private let state = Mutex(State())

    init(quiet: Bool, count: Int) {
        self.quiet = quiet
        self.count = count
        // A log (not a terminal) gets its first status line after 5 s, not at once.
        state.withLock { $0.lastDraw = monotonicNow() }
    }

    private func tag(_ id: Int) -> String { "[\(id)/\(count)]" }

    func started(_ job: JobStart) {
        let name = lastPathComponent(job.path ?? FileName.fromURLPath(job.url))
        state.withLock { s in
            s.running[job.id] = Running(name: name, total: job.size)
            guard !quiet else { return }
            var size = ""
            if let b = job.size { size = ", \(Format.bytes(b))" }
            let conns = job.autoConnections ? "up to \(job.connections) connections" : "\(job.connections) connection\(job.connections == 1 ? "" : "s")"
            line(&s, "segget: \(tag(job.id)) \(URLParts.redactingCredentials(job.url)) → \(job.path ?? name)\(size), \(conns)")
        }
    }

    var wantsProgress: Bool { !quiet }

    func progress(id: Int, _ p: DownloadProgress) {
        guard !quiet else { return }
        state.withLock { s in
            s.running[id]?.completed = p.completedBytes
            s.running[id]?.total = p.totalBytes
            s.running[id]?.rate = p.bytesPerSecond
            let now = monotonicNow()
            guard now - s.lastDraw >= (isTTY ? 0.2 : 5) else { return }
            s.lastDraw = now
            let text = statusText(s)
            if isTTY {
                writeStderr(DisplayText.fitted(text, columns: columns - 1), after: .clearLine)
                s.drawn = true
            } else {
                writeStderr(text + "\n")
            }
        }
    }

    func event(id: Int, _ e: DownloadEvent) {
        guard !quiet else { return }
        state.withLock { s in
            let name = s.running[id]?.name ?? "#\(id)"
            switch e {
            case .notice(let text): line(&s, "segget: \(name): \(text)")
            case .retry(let c, let attempt, let delay, let reason):
                line(&s, "segget: \(name): connection \(c + 1): \(Format.retry(reason: reason, attempt: attempt, delay: delay))")
            case .redial(let c, let reason):
                line(&s, "segget: \(name): connection \(c + 1) is slow (\(reason)); reconnecting.")
            }
        }
    }

    func finished(id: Int, url: String, _ r: DownloadResult) {
        state.withLock { s in
            s.running[id] = nil
            s.ended += 1
            guard !quiet else { return }
            let rate = r.seconds > 0 ? Double(r.bytes - r.resumedBytes) / r.seconds : 0
            var text = "segget: \(tag(id)) saved \(r.path) (\(Format.bytes(r.bytes))) in \(Format.seconds(r.seconds)), \(Format.rate(rate))"
            if r.resumedBytes > 0 { text += ", \(Format.bytes(r.resumedBytes)) resumed" }
            if !r.verified.isEmpty { text += ", verified" }
            if let p = r.pieces { text += ", " + p.summary }
            line(&s, text)
        }
    }

    func skipped(id: Int, url: String, path: String, reason: SkipReason) {
        state.withLock { s in
            s.ended += 1
            if !quiet { line(&s, "segget: \(tag(id)) \(path) \(reason.sentence); skipped.") }
        }
    }

    func failed(id: Int, url: String, path: String?, _ e: SeggetError) {
        state.withLock { s in
            s.running[id] = nil
            s.ended += 1
            line(&s, "segget: \(tag(id)) \(URLParts.redactingCredentials(url)): \(e.message)")
        }
    }

    func summary(_ outcomes: [Outcome], seconds: Double) {
        guard !quiet else { return }
        var rows: [[String]] = [["NAME", "SIZE", "TIME", "SPEED", "STATUS"]]
        var ok = 0
        for o in outcomes {
            let name = o.path ?? FileName.fromURLPath(o.url)
            switch o.status {
            case .done(let r):
                ok += 1
                let rate = r.seconds > 0 ? Double(r.bytes - r.resumedBytes) / r.seconds : 0
                var status = "ok"
                if r.resumedBytes > 0 { status += ", resumed" }
                if !r.verified.isEmpty { status += ", verified" }
                rows.append([name, Format.bytes(r.bytes), Format.seconds(r.seconds), Format.rate(rate), status])
            case .skipped(let reason):
                rows.append([name, "-", "-", "-", reason == .exists ? "skipped (exists)" : "done earlier"])
            case .failed(let e):
                rows.append([name, "-", "-", "-", "failed (exit \(e.exitCode), \(e.kind.rawValue))"])
            case .notStarted:
                rows.append([name, "-", "-", "-", "not started"])
            }
        }
        // Padded by the columns each cell takes as shown: escaped (as writeStderr will), wide
        // characters two.
        rows = rows.map { $0.map { DisplayText.escaping($0, keepingLineBreaks: false) } }
        let widths = (0..<5).map { c in rows.map { DisplayText.columns($0[c]) }.max() ?? 0 }
        var text = ""
        for r in rows {
            var cells: [String] = []
            for c in 0..<5 {
                // Sizes, times and speeds right-aligned; names and status left-aligned.
                let pad = String(repeating: " ", count: widths[c] - DisplayText.columns(r[c]))
                cells.append((1...3).contains(c) ? pad + r[c] : (c == 4 ? r[c] : r[c] + pad))
            }
            text += cells.joined(separator: "  ") + "\n"
        }
        text += Self.summaryLine(outcomes.map(\.status), seconds: seconds) + "\n"
        state.withLock { s in
            clear(&s)
            writeStderr(text)
        }
    }

    private func statusText(_ s: State) -> String {
        let files = s.running.sorted { $0.key < $1.key }.map { _, r in
            r.total.map { "\(r.name) \(min(100, Int(Double(r.completed) * 100 / Double(max($0, 1)))))%" } ?? "\(r.name) \(Format.bytes(r.completed))"
        }
        let rate = s.running.values.reduce(0) { $0 + $1.rate }
        return "segget: \(s.ended)/\(count) done, \(Format.rate(rate)) · " + files.joined(separator: " · ")
    }

    /// The list's last line: how many files were downloaded, and what became of the others ("0 of 2
    /// files downloaded" alone read as a failure where an earlier run had done both).
    static func summaryLine(_ statuses: [Outcome.Status], seconds: Double) -> String {
        var downloaded = 0, earlier = 0, existing = 0, failed = 0, notStarted = 0
        for s in statuses {
            switch s {
            case .done: downloaded += 1
            case .skipped(let reason): if reason == .exists { existing += 1 } else { earlier += 1 }
            case .failed: failed += 1
            case .notStarted: notStarted += 1
            }
        }
        var parts: [String] = []
        if earlier > 0 { parts.append("\(earlier) done by an earlier run") }
        if existing > 0 { parts.append("\(existing) skipped as already there") }
        if failed > 0 { parts.append("\(failed) failed") }
        if notStarted > 0 { parts.append("\(notStarted) not started") }
        let rest = parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")"
        return "\(downloaded) of \(statuses.count) file\(statuses.count == 1 ? "" : "s") downloaded\(rest) in \(Format.seconds(seconds))."
    }

    private func clear(_ s: inout State) {
        if s.drawn {
            writeStderr("", after: .clearLine)
            s.drawn = false
        }
    }

    private func line(_ s: inout State, _ text: String) {
        clear(&s)
        writeStderr(text + "\n")
    }
}

func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
}

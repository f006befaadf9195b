import Segget
import Synchronization
import SeggetSystem

/// One JSON object, built field by field and written as one line (see docs/json.md).
struct JSONObject {
    private var text = "{"

    init(type: String) { add("type", type) }

    mutating func add(_ key: String, _ value: String?) {
        field(key, value.map(JSONObject.quoteShown) ?? "null")
    }
    mutating func add(_ key: String, _ value: Int64?) { field(key, value.map { String($0) } ?? "null") }
    mutating func add(_ key: String, _ value: Int?) { field(key, value.map { String($0) } ?? "null") }
    mutating func add(_ key: String, _ value: Int32) { field(key, String(value)) }
    mutating func add(_ key: String, _ value: Bool) { field(key, value ? "true" : "false") }
    /// Non-finite numbers become null; others get at most three decimals.
    mutating func add(_ key: String, _ value: Double?) {
        guard let v = value, v.isFinite else { return field(key, "null") }
        let r = (v * 1000).rounded() / 1000
        field(key, r == r.rounded() && abs(r) < 1e15 ? String(Int64(r)) : "\(r)")
    }
    mutating func add(_ key: String, objects: [JSONObject]) {
        field(key, "[" + objects.map(\.body).joined(separator: ",") + "]")
    }
    mutating func add(_ key: String, ints: [Int]) {
        field(key, "[" + ints.map(String.init).joined(separator: ",") + "]")
    }
    /// A nested object, or null.
    mutating func add(_ key: String, object: JSONObject?) { field(key, object?.body ?? "null") }
    mutating func add(_ key: String, strings: [String]) {
        field(key, "[" + strings.map(JSONObject.quoteShown).joined(separator: ",") + "]")
    }

    /// A nested object without a `type` field.
    static func nested() -> JSONObject {
        var o = JSONObject(type: "")
        o.text = "{"
        return o
    }

    var body: String { text + "}" }

    private mutating func field(_ key: String, _ raw: String) {
        if text.count > 1 { text += "," }
        text += JSONObject.quote(key) + ":" + raw
    }

    /// A value as a JSON string with its control characters, C1 controls and bidi controls shown as
    /// visible escapes (`DisplayText`), so that a consumer that prints it prints no server's control
    /// sequence; server text (`ServerText`) is already escaped that way where it is received.
    static func quoteShown(_ s: String) -> String { quote(DisplayText.escaping(s, keepingLineBreaks: false)) }

    /// A JSON string literal: quotes, backslashes and control characters escaped; everything else
    /// (including non-ASCII) as UTF-8.
    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if u.value < 0x20 || u.value == 0x7F || u.value == 0x2028 || u.value == 0x2029 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}

/// Writes whole lines to standard output with one `write` each, under a lock, so lines from
/// concurrent downloads never interleave.
///
/// A reader that stops reading never holds segget up for good: `lossy` lines (progress) are dropped
/// while the pipe is full, and the others wait for room only until a Ctrl-C or SIGTERM has been
/// pending for `patienceAfterStop` seconds (`PatientOutput`). A reader that went away (EPIPE) loses
/// the lines; the download goes on.
enum StdoutLines {
    /// Guards the writes; holds when, after a stop was asked for, a line first waited for the
    /// reader: one deadline for the whole run, not one for each line (the `error` objects of the
    /// files still in flight and the `summary` each waited a second of their own: 2.3-4.6 s).
    private static let lock = Mutex<ContinuousClock.Instant?>(nil)
    private static let output = PatientOutput(.standardOutput)
    /// How long the lines wait, together, for a stalled reader once a stop was asked for.
    static let patienceAfterStop = 1.0

    static func write(_ line: String, lossy: Bool = false) {
        lock.withLock { stalledSince in
            if lossy && !output.isWritableNow { return }
            _ = output.write(line + "\n") {
                guard SignalTrap.isInterrupted else { return false }
                let since = stalledSince ?? .now
                stalledSince = since
                return (ContinuousClock.now - since).inSeconds >= patienceAfterStop
            }
        }
    }
}

/// `--json`: one object per line on stdout, nothing on stderr.
final class JSONReporter: Reporter {
    /// Seconds between `progress` objects for one file.
    static let progressInterval = 0.25
    private let lastProgress = Mutex([Int: Double]())

    func started(_ job: JobStart) {
        var o = JSONObject(type: "start")
        o.add("id", job.id)
        o.add("url", URLParts.redactingCredentials(job.url))
        o.add("path", job.path)
        o.add("size", job.size)
        o.add("connections", job.connections)
        o.add("autoConnections", job.autoConnections)
        StdoutLines.write(o.body)
    }

    func progress(id: Int, _ p: DownloadProgress) {
        let due = lastProgress.withLock { last in
            if let t = last[id], p.elapsed - t < Self.progressInterval { return false }
            last[id] = p.elapsed
            return true
        }
        guard due else { return }
        var o = JSONObject(type: "progress")
        o.add("id", id)
        o.add("completed", p.completedBytes)
        o.add("total", p.totalBytes)
        o.add("received", p.receivedBytes)
        o.add("rate", p.bytesPerSecond)
        o.add("eta", p.eta)
        o.add("elapsed", p.elapsed)
        o.add(
            "connections",
            objects: p.connections.map { c in
                var j = JSONObject.nested()
                j.add("id", c.id)
                j.add("state", c.state.rawValue)
                j.add("rate", c.bytesPerSecond)
                j.add("remaining", c.remainingBytes)
                return j
            })
        StdoutLines.write(o.body, lossy: true)
    }

    func event(id: Int, _ e: DownloadEvent) {
        var o: JSONObject
        switch e {
        case .notice(let text):
            o = JSONObject(type: "notice")
            o.add("id", id)
            o.add("message", text)
        case .retry(let c, let attempt, let delay, let reason):
            o = JSONObject(type: "retry")
            o.add("id", id)
            o.add("connection", c)
            o.add("attempt", attempt)
            o.add("delay", delay)
            o.add("reason", reason)
        case .redial(let c, let reason):
            o = JSONObject(type: "redial")
            o.add("id", id)
            o.add("connection", c)
            o.add("reason", reason)
        }
        StdoutLines.write(o.body)
    }

    func finished(id: Int, url: String, _ r: DownloadResult) {
        var o = JSONObject(type: "finish")
        o.add("id", id)
        o.add("url", URLParts.redactingCredentials(url))
        o.add("path", r.path)
        o.add("bytes", r.bytes)
        o.add("resumed", r.resumedBytes)
        o.add("received", r.receivedBytes)
        o.add("seconds", r.seconds)
        o.add("connections", r.connections)
        o.add("servedAtOnce", r.servedAtOnce)
        o.add("ranged", r.usedRanges)
        o.add("requests", r.tally.requests)
        o.add("connectionsOpened", r.tally.connections)
        o.add("refusals", r.tally.refusals)
        o.add("refetched", r.tally.refetchedBytes)
        if let p = r.pieces {
            var j = JSONObject.nested()
            j.add("algorithm", p.algorithm.displayName)
            j.add("count", p.pieceCount)
            j.add("verified", p.verifiedPieces)
            j.add("recorded", p.recordedPieces)
            j.add("failed", ints: p.failedPieces)
            j.add("badSources", strings: p.badSources.map { URLParts.redactingCredentials($0) })
            o.add("pieces", object: j)
        }
        o.add(
            "verified",
            objects: r.verified.map { v in
                var j = JSONObject.nested()
                let parts = v.split(separator: "=", maxSplits: 1).map(String.init)
                j.add("algorithm", parts.first)
                j.add("hex", parts.count > 1 ? parts[1] : nil)
                return j
            })
        o.add(
            "hashing",
            object: r.hashing.map { h in
                var j = JSONObject.nested()
                j.add("fromMemory", h.fromMemory)
                j.add("readBack", h.readBack)
                return j
            })
        StdoutLines.write(o.body)
    }

    func skipped(id: Int, url: String, path: String, reason: SkipReason) {
        var o = JSONObject(type: "skip")
        o.add("id", id)
        o.add("url", URLParts.redactingCredentials(url))
        o.add("path", path)
        o.add("reason", reason.rawValue)
        StdoutLines.write(o.body)
    }

    func failed(id: Int, url: String, path: String?, _ e: SeggetError) {
        StdoutLines.write(Self.error(id: id, url: url, path: path, e).body)
    }

    static func error(id: Int?, url: String?, path: String?, _ e: SeggetError) -> JSONObject {
        var o = JSONObject(type: "error")
        o.add("id", id)
        o.add("url", url.map(URLParts.redactingCredentials))
        o.add("path", path)
        o.add("kind", e.kind.rawValue)
        o.add("exitCode", e.exitCode)
        if let s = e.httpStatus { o.add("httpStatus", s) }
        if let spent = e.spent {
            o.add("requests", spent.requests)
            o.add("connectionsOpened", spent.connections)
        }
        o.add("message", e.message)
        return o
    }

    func summary(_ outcomes: [Outcome], seconds: Double) {
        var o = JSONObject(type: "summary")
        var counts = (done: 0, skipped: 0, failed: 0, notStarted: 0)
        var bytes: Int64 = 0
        var spent = RequestTally()
        for x in outcomes {
            switch x.status {
            case .done(let r):
                counts.done += 1
                bytes += r.bytes
                spent = spent + r.tally
            case .skipped: counts.skipped += 1
            case .failed(let e):
                counts.failed += 1
                spent = spent + (e.spent ?? RequestTally())
            case .notStarted: counts.notStarted += 1
            }
        }
        o.add("files", outcomes.count)
        o.add("succeeded", counts.done)
        o.add("skipped", counts.skipped)
        o.add("failed", counts.failed)
        o.add("notStarted", counts.notStarted)
        o.add("bytes", bytes)
        o.add("requests", spent.requests)
        o.add("connectionsOpened", spent.connections)
        o.add("refusals", spent.refusals)
        o.add("refetched", spent.refetchedBytes)
        o.add("seconds", seconds)
        o.add("exitCode", Batch.exitCode(outcomes))
        StdoutLines.write(o.body)
    }
}

import Segget

/// Time-of-day limits for the daemon's overall download rate: `08:00-18:00=2M,18:00-08:00=0`.
///
/// Each window is `HH:MM-HH:MM=RATE`: from its start (included) to its end (excluded), in the
/// daemon's local time, the overall limit is RATE (bytes per second with an optional k, M or G, as
/// `max-overall-download-limit`; 0 means no limit). A window whose end is before its start wraps
/// past midnight; `00:00-24:00` is the whole day. Windows must not overlap. Outside every window
/// the daemon's own `max-overall-download-limit` applies. Times are minutes of the day, so the
/// schedule follows the local clock across daylight saving time changes: on the night the clock
/// jumps forward, a boundary in the skipped hour takes effect at the jump (a window wholly inside it
/// is skipped); on the night it goes back, the repeated hour is that hour's window both times.
///
/// Pure: parsing, checking and reading it take no clock; the daemon passes the minute of the day.
public struct SpeedSchedule: Sendable, Equatable, CustomStringConvertible {
    public struct Window: Sendable, Equatable {
        /// Minutes since midnight, 0…1439; `end` is 1…1440 and may be at or before `start` (wraps).
        public var start: Int
        public var end: Int
        /// Bytes per second; 0: no limit.
        public var bytesPerSecond: Int64

        /// Whether minute `m` (0…1439) falls in the window.
        func contains(_ m: Int) -> Bool {
            start < end ? (m >= start && m < end) : (m >= start || m < end % 1440)
        }
    }

    public let windows: [Window]

    public static let minutesPerDay = 1440

    /// The text of a schedule without windows.
    public static let noneText = "none"

    /// Parses `text`; an empty text or `none` is a schedule without windows. The error is a sentence
    /// that names the part at fault and what is accepted.
    public init(parsing text: String) throws(ScheduleError) {
        var windows: [Window] = []
        let trimmed = text.filter { !$0.isWhitespace }
        if !trimmed.isEmpty && trimmed.lowercased() != Self.noneText {
            for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
                windows.append(try Self.window(String(part)))
            }
        }
        for (i, a) in windows.enumerated() {
            for b in windows[(i + 1)...] where Self.overlap(a, b) {
                throw ScheduleError(
                    "the windows \(Self.text(a)) and \(Self.text(b)) overlap; each minute of the day may be in one window at most.")
            }
        }
        self.windows = windows.sorted { $0.start < $1.start }
    }

    /// The window that minute `minute` of the day (taken modulo a day) is in, if any.
    public func window(atMinute minute: Int) -> Window? {
        let m = ((minute % Self.minutesPerDay) + Self.minutesPerDay) % Self.minutesPerDay
        return windows.first { $0.contains(m) }
    }

    /// The overall limit at minute `minute`: the window's (nil for a window of 0, no limit), else
    /// `otherwise` (the daemon's own limit).
    public func limit(atMinute minute: Int, otherwise: Int64?) -> Int64? {
        guard let w = window(atMinute: minute) else { return otherwise }
        return w.bytesPerSecond > 0 ? w.bytesPerSecond : nil
    }

    /// The first minute after `minute` at which the window in force changes (a start or an end), as
    /// minutes from `minute` (1…1440); nil without windows.
    public func minutesUntilNextChange(after minute: Int) -> Int? {
        guard !windows.isEmpty else { return nil }
        let m = ((minute % Self.minutesPerDay) + Self.minutesPerDay) % Self.minutesPerDay
        let current = window(atMinute: m)
        for step in 1...Self.minutesPerDay where window(atMinute: m + step) != current {
            return step
        }
        return nil
    }

    /// The canonical text, which ``init(parsing:)`` reads back to an equal schedule.
    public var description: String { windows.isEmpty ? Self.noneText : windows.map(Self.text).joined(separator: ",") }

    // MARK: Parsing

    private static func window(_ part: String) throws(ScheduleError) -> Window {
        let accepted = "each window is HH:MM-HH:MM=RATE, such as 08:00-18:00=2M (RATE 0: no limit)"
        guard let eq = part.firstIndex(of: "="), let dash = part[..<eq].firstIndex(of: "-") else {
            throw ScheduleError("'\(part)' is not a window; \(accepted).")
        }
        let rateText = String(part[part.index(after: eq)...])
        guard let start = minute(part[..<dash], allowMidnightEnd: false),
            let end = minute(part[part.index(after: dash)..<eq], allowMidnightEnd: true)
        else {
            throw ScheduleError("'\(part)' has a time that is not HH:MM from 00:00 to 23:59 (24:00 as an end); \(accepted).")
        }
        guard start != end % 1440 || end == 1440 && start == 0 else {
            throw ScheduleError("'\(part)' starts where it ends; write 00:00-24:00 for the whole day.")
        }
        let rate: ByteRate
        do {
            rate = try ByteRate(parsing: rateText)
        } catch {
            throw ScheduleError("'\(part)': \(error)")
        }
        return Window(start: start, end: end, bytesPerSecond: rate.bytesPerSecond)
    }

    private static func minute(_ text: Substring, allowMidnightEnd: Bool) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2,
            let h = Int(parts[0]), let m = Int(parts[1]), parts.allSatisfy({ $0.allSatisfy { ("0"..."9").contains($0) } }),
            (0...59).contains(m)
        else { return nil }
        if h == 24 && m == 0 && allowMidnightEnd { return 1440 }
        guard (0...23).contains(h) else { return nil }
        return h * 60 + m
    }

    private static func overlap(_ a: Window, _ b: Window) -> Bool {
        // Windows are at most a day long: they overlap if either contains the other's start.
        a.contains(b.start) || b.contains(a.start)
    }

    private static func clock(_ m: Int) -> String {
        let h = m / 60, mm = m % 60
        return (h < 10 ? "0" : "") + "\(h):" + (mm < 10 ? "0" : "") + "\(mm)"
    }

    private static func text(_ w: Window) -> String {
        "\(clock(w.start))-\(clock(w.end))=\(ByteRate(bytesPerSecond: w.bytesPerSecond))"
    }
}

/// Why a schedule's text was refused: a full sentence.
public struct ScheduleError: Error, Equatable, CustomStringConvertible, Sendable {
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}

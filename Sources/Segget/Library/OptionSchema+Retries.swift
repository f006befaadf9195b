/// aria2's options for a download's retries and time limits, which front-ends (AriaNg, webui-aria2)
/// set per task: before, the daemon took them and kept its own (5 retries, 20 s), so a task meant to
/// give up after two tries of 2 s each ran for minutes. The download command has its own flags for
/// the whole run (`--retries`, `--retry-wait`, `--stall-timeout`, `--connect-timeout`); `segget add`
/// takes `--max-tries` and the download command's names for the others (aria2's `timeout` as
/// `--stall-timeout`: the download command's `--timeout` is a limit on the whole file) and sends them
/// by aria2's names with the task.
extension OptionSchema {
    static let retriesCommandLine = "the download command's --retries, --retry-wait, --stall-timeout and --connect-timeout set them for the whole run."

    /// The largest `max-tries` taken (a bound, not a wish: 0 is aria2's "no limit").
    static let mostTries = 1_000_000
    /// Retries where `max-tries` is 0: as good as no limit, and finite for the engine's counts.
    public static let unlimitedRetries = 1_000_000

    public static let maxTries = OptionSpec(
        key: "max-tries", long: "max-tries", short: nil, valueName: "n",
        help: "Tries of each range before the download fails: the first and its retries (0: no limit, and at least 1 s before a retry), as in aria2.",
        repeatable: false, absent: [.commandLine: retriesCommandLine],
        apply: { v, o throws(OptionError) in
            guard let n = Int(v), (0...mostTries).contains(n) else {
                throw OptionError(
                    key: "max-tries", value: shown(v),
                    reason: "not a number of tries; give a whole number from 1 to \(mostTries), or 0 for no limit.")
            }
            o.maxTries = n
        }, values: { $0.maxTries.map { [String($0)] } ?? [] }, clear: { $0.maxTries = nil })

    public static let retryWait = seconds(
        "retry-wait", long: "retry-wait", \.retryWait, range: 0...600,
        help: "Seconds before a range's first retry, 0 to 600; later ones double it (segget's default 1).")
    public static let timeout = seconds(
        "timeout", long: "stall-timeout", \.stallTimeout, range: 1...600,
        help: "Seconds a connection may deliver nothing before it is dropped and retried, 1 to 600 (segget's default 20), counted once it is made.")
    public static let connectTimeout = seconds(
        "connect-timeout", long: "connect-timeout", \.connectTimeout, range: 1...600,
        help: "Seconds to wait for a connection, 1 to 600 (segget's default 15).")

    /// A number of seconds within `range`, written back without a fraction where it has none.
    static func seconds(
        _ key: String, long: String, _ path: WritableKeyPath<FileOptions, Double?> & Sendable, range: ClosedRange<Double>,
        help: String
    ) -> OptionSpec {
        OptionSpec(
            key: key, long: long, short: nil, valueName: "seconds", help: help, repeatable: false,
            absent: [.commandLine: retriesCommandLine],
            apply: { v, o throws(OptionError) in
                guard let s = Double(v), s.isFinite, range.contains(s) else {
                    throw OptionError(
                        key: key, value: shown(v),
                        reason: "not a number of seconds from \(secondsText(range.lowerBound)) to \(secondsText(range.upperBound)).")
                }
                o[keyPath: path] = s
            }, values: { $0[keyPath: path].map { [secondsText($0)] } ?? [] }, clear: { $0[keyPath: path] = nil })
    }

    /// `20` for 20 s, `2.5` for 2.5 s.
    public static func secondsText(_ s: Double) -> String {
        s == s.rounded() && abs(s) < 1e15 ? String(Int(s)) : String(s)
    }
}

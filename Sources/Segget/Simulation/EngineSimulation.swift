/// Runs the engine's policy, and the baselines it is compared with, over seeded scenarios of every
/// family (see `SimulationFamily`) and summarises finish time ÷ ideal (see `SimulationIdeal`). The
/// test suite and `segget-sim` call it; `docs/simulator.md` says what the model keeps.
public enum EngineSimulation {
    /// One family under one policy.
    public struct Row: Sendable {
        public var family: String
        public var policy: String
        public var scenarios = 0
        public var p50 = 0.0
        public var p99 = 0.0
        public var max = 0.0
        /// Scenarios that did not finish within their time limit, or that failed.
        public var hangs = 0
        public var failures = 0
        /// Scenarios (finished or not) above the family's bound.
        public var overBound = 0
        public var bound = 0.0
        public var meanRequests = 0.0
        public var meanConnections = 0.0
        public var meanRedials = 0.0
        public var meanRejected = 0.0
        public var maxRejected = 0
        /// The most requests any scenario made, and scenarios over the family's request bound.
        public var maxRequests = 0
        public var overRequestBound = 0
        /// Requests sent before a refusal's wait was over, summed over the scenarios (must be 0).
        public var earlyRequests = 0
        /// Mean bytes fetched twice (cut answers, lost races), in MiB.
        public var meanMiBTwice = 0.0
        /// The worst scenario, described, with its ratio and what ended it.
        public var worst = ""
    }

    public static var familyNames: [String] { SimulationFamily.all.map(\.name) }

    public static var policyNames: [String] { SimulatedDownload.Policy.allCases.map(\.rawValue) }

    /// Runs `seeds` of each named family (nil: all) under each named policy.
    public static func run(families: [String]? = nil, policies: [String] = ["segget"], seeds: Range<UInt64>) -> [Row] {
        let fams = families.map { $0.compactMap(SimulationFamily.named) } ?? SimulationFamily.all
        let pols = policies.compactMap(SimulatedDownload.Policy.init(rawValue:))
        var rows: [Row] = []
        for f in fams {
            for p in pols { rows.append(run(f, policy: p, seeds: seeds)) }
        }
        return rows
    }

    /// One scenario under one policy, described (for a test's message or a tuning session).
    public static func describe(family: String, seed: UInt64, policy: String = "segget", tracing: Bool = false) -> String? {
        guard let f = SimulationFamily.named(family), let p = SimulatedDownload.Policy(rawValue: policy) else { return nil }
        let s = f.scenario(seed: seed)
        let ideal = SimulationIdeal.seconds(s)
        let o = SimulatedDownload.run(s, policy: p, timeLimit: timeLimit(f, ideal: ideal), tracing: tracing)
        return "\(s): \(summary(o, ideal: ideal))"
    }

    static func timeLimit(_ f: SimulationFamily, ideal: Double) -> Double { f.bound * ideal + 30 }

    static func summary(_ o: SimulatedDownload.Outcome, ideal: Double) -> String {
        let end = o.finished ? "finished" : o.failure.map { "failed: \($0)" } ?? "did not finish"
        return "\(end) in \(Format.fixed(o.seconds, 2)) s (\(Format.fixed(o.seconds / ideal, 2)) x the ideal \(Format.fixed(ideal, 2)) s), "
            + "\(o.requests) requests, \(o.connectionsOpened) connections, \(o.redials) re-dials, \(o.rejected) refused, "
            + "\(o.earlyRequests) early, \(Format.fixed(Double(o.bytesTwice) / 1_048_576, 1)) MiB twice"
            + (o.finished ? "" : ", \(Format.fixed(Double(o.unfinishedElsewhere) / 1_048_576, 1)) MiB not received (a failing tail's chunks aside)")
    }

    static func run(_ f: SimulationFamily, policy: SimulatedDownload.Policy, seeds: Range<UInt64>) -> Row {
        var row = Row(family: f.name, policy: policy.rawValue, bound: f.bound)
        var ratios: [Double] = []
        var worst = -1.0
        for seed in seeds {
            let s = f.scenario(seed: seed)
            let ideal = SimulationIdeal.seconds(s)
            let o = SimulatedDownload.run(s, policy: policy, timeLimit: timeLimit(f, ideal: ideal))
            let ratio = o.seconds / ideal
            // A family that must fail (`expectsFailure`) ends as it should when it fails with every
            // chunk it could get received.
            let endedWell = f.expectsFailure ? o.failure != nil && o.unfinishedElsewhere == 0 : o.finished
            ratios.append(endedWell ? ratio : .infinity)
            if !o.finished { if o.failure != nil { row.failures += 1 } else { row.hangs += 1 } }
            let tooMany = o.requests > f.requestBound(s)
            if tooMany { row.overRequestBound += 1 }
            if !endedWell || ratio > f.bound || tooMany || o.earlyRequests > 0 { row.overBound += 1 }
            row.maxRequests = Swift.max(row.maxRequests, o.requests)
            row.earlyRequests += o.earlyRequests
            row.meanMiBTwice += Double(o.bytesTwice) / 1_048_576
            row.meanRequests += Double(o.requests)
            row.meanConnections += Double(o.connectionsOpened)
            row.meanRedials += Double(o.redials)
            row.meanRejected += Double(o.rejected)
            row.maxRejected = Swift.max(row.maxRejected, o.rejected)
            let rank = (endedWell ? ratio : 1e9 + ratio) + (tooMany || o.earlyRequests > 0 ? 1e6 : 0)
            if rank > worst {
                worst = rank
                row.worst = "seed \(seed): \(s): \(summary(o, ideal: ideal))"
            }
        }
        let n = Double(Swift.max(1, ratios.count))
        row.scenarios = ratios.count
        ratios.sort()
        row.p50 = percentile(ratios, 0.5)
        row.p99 = percentile(ratios, 0.99)
        row.max = ratios.last ?? 0
        row.meanRequests /= n
        row.meanConnections /= n
        row.meanRedials /= n
        row.meanRejected /= n
        row.meanMiBTwice /= n
        return row
    }

    static func percentile(_ sorted: [Double], _ q: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return sorted[Swift.min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded()))]
    }

    /// The rows as a Markdown table.
    public static func markdown(_ rows: [Row]) -> String {
        func r(_ x: Double) -> String { x.isFinite ? Format.fixed(x, 2) : "∞" }
        var out = "| family | policy | scenarios | p50 | p99 | max | bound | over bound | hung | failed | requests (max; over) | connections | re-dials | refused (max) | early | MiB twice |\n"
        out += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        for x in rows {
            out += "| \(x.family) | \(x.policy) | \(x.scenarios) | \(r(x.p50)) | \(r(x.p99)) | \(r(x.max)) | \(r(x.bound)) | \(x.overBound) | \(x.hangs) | \(x.failures) | "
                + "\(Format.fixed(x.meanRequests, 1)) (\(x.maxRequests); \(x.overRequestBound)) | \(Format.fixed(x.meanConnections, 1)) | \(Format.fixed(x.meanRedials, 1)) | \(Format.fixed(x.meanRejected, 1)) (\(x.maxRejected)) | \(x.earlyRequests) | \(Format.fixed(x.meanMiBTwice, 1)) |\n"
        }
        return out
    }
}

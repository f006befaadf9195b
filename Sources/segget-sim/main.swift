// Runs the engine's policy over seeded simulated networks (see docs/simulator.md) and prints a
// Markdown table of finish time ÷ ideal per scenario family. Exits 1 when any scenario of segget's
// policy hangs, fails or exceeds its family's bound.
//
// Usage: segget-sim [--seeds N] [--first SEED] [--family NAME]... [--policy NAME|all]... [--worst]
//        segget-sim --describe FAMILY SEED [POLICY] [--trace]
import Glibc
import Segget

var seeds: UInt64 = 1000
var first: UInt64 = 1
var families: [String] = []
var policies: [String] = []
var showWorst = false
var args = Array(CommandLine.arguments.dropFirst())

func usage(_ message: String) -> Never {
    print("segget-sim: \(message)\nfamilies: \(EngineSimulation.familyNames.joined(separator: ", "))\npolicies: \(EngineSimulation.policyNames.joined(separator: ", "))")
    exit(2)
}

if args.first == "--describe" {
    guard args.count >= 3, let seed = UInt64(args[2]) else { usage("--describe FAMILY SEED [POLICY]") }
    let trace = args.contains("--trace")
    args.removeAll { $0 == "--trace" }
    guard let text = EngineSimulation.describe(family: args[1], seed: seed, policy: args.count > 3 ? args[3] : "segget", tracing: trace) else {
        usage("no such family or policy")
    }
    print(text)
    exit(0)
}
while !args.isEmpty {
    let a = args.removeFirst()
    func value() -> String {
        guard !args.isEmpty else { usage("\(a) needs a value") }
        return args.removeFirst()
    }
    switch a {
    case "--seeds": seeds = UInt64(value()) ?? { usage("--seeds takes a count") }()
    case "--first": first = UInt64(value()) ?? { usage("--first takes a seed") }()
    case "--family": families.append(value())
    case "--policy":
        let p = value()
        policies += p == "all" ? EngineSimulation.policyNames : [p]
    case "--worst": showWorst = true
    default: usage("unknown argument \(a)")
    }
}
for f in families where !EngineSimulation.familyNames.contains(f) { usage("no family \(f)") }
for p in policies where !EngineSimulation.policyNames.contains(p) { usage("no policy \(p)") }
if policies.isEmpty { policies = ["segget"] }

let started = ContinuousClock.now
let rows = EngineSimulation.run(families: families.isEmpty ? nil : families, policies: policies, seeds: first..<(first + seeds))
let elapsed = ContinuousClock.now - started
print(EngineSimulation.markdown(rows))
let total = rows.reduce(0) { $0 + $1.scenarios }
print("\(total) scenarios in \(elapsed)")
if showWorst {
    for r in rows { print("worst \(r.family) / \(r.policy): \(r.worst)") }
}
let bad = rows.filter { $0.policy == "segget" && $0.overBound > 0 }
for r in bad { print("OVER BOUND: \(r.family): \(r.overBound) of \(r.scenarios) scenarios above \(r.bound) x ideal or unfinished; worst \(r.worst)") }
exit(bad.isEmpty ? 0 : 1)

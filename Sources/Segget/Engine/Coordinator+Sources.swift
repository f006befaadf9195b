/// A source (the main URL or a mirror) that must get no more work: it served pieces that failed their
/// hashes, or it failed in a way its retries cannot mend while other sources serve the file. Its
/// connections move to the good sources (the one with the fewest connections first); a transfer
/// still running from it is removed and continues at once from where it got, on its new source.
/// Added for Metalink (issue 40) beside the policy, which it does not change: which work a
/// connection takes, and when, is decided as before.
extension Coordinator {
    /// The sources that still get work.
    var goodSources: [Int] { config.sources.indices.filter { !demotedSources.contains($0) } }

    /// Gives source `s` no more work. Returns nil, changing nothing, when no other source is left.
    mutating func dropSource(_ s: Int, now: Double) -> [Command]? {
        let good = goodSources.filter { $0 != s }
        guard !good.isEmpty else { return nil }
        demotedSources.insert(s)
        var commands: [Command] = []
        for id in connections.indices where connections[id].source == s {
            let counts = good.map { g in connections.filter { $0.source == g }.count }
            connections[id].source = good[counts.indices.min { counts[$0] < counts[$1] } ?? 0]
            guard connections[id].machine.isTransferring else { continue }
            commands.append(.remove(id))
            _ = connections[id].machine.transferEnded(now: now)
            connections[id].leftLinkOpen = false
            if isRacing(id) {
                abandonRace(id)
            } else if scheduler.run(of: id) != nil {
                // Continues from its position on the new source, as a retry does, with no attempt counted.
                connections[id].machine.wait(until: now, .retry)
            }
        }
        if tracing { commands.append(.trace("source \(s) demoted; good sources \(good)")) }
        return commands
    }

    /// Connection `id`'s source failed for good (`why`): dropped when others are left (with a
    /// notice), so that the download goes on from them. Nil when it is the last source.
    mutating func sourceFailed(of id: Int, why: String, now: Double) -> [Command]? {
        let s = connections[id].source
        guard config.sources.count > 1, let commands = dropSource(s, now: now) else { return nil }
        if isRacing(id) { abandonRace(id) }
        connections[id].attempts = 0
        if scheduler.run(of: id) != nil, connections[id].machine.isIdle {
            connections[id].machine.wait(until: now, .retry)
        }
        let shown = URLParts.shown(config.sources[s].url)
        return commands + [.event(.notice("\(shown) gets no more work: \(RetryPolicy.sentence(why).dropLast()); the other servers go on."))]
    }
}

/// The connections warmed beside the probe (see `ConnectionWarmUp`), as the coordinator weighs them.
///
/// At `begin`, a connection finds a warm one in libcurl's cache for each warm-up answered by then;
/// one more for each still out is waited for (at most `warmUpGrace`) rather than dialled, since a
/// new connection's handshakes take longer than the wait, and each warm-up that ends meanwhile lets
/// one waiting connection start. Warm-ups refused with 429 or 503 teach the host's limit as a
/// refused request does.
extension Coordinator {
    /// How long a connection waits at most for a warm-up still out at `begin`: the warm-ups' lag
    /// behind the probe's request (they answer about that much after the probe), and half the
    /// probe's first answer, which took a handshake or two (TCP, TLS) and a request, where a new
    /// connection would take those handshakes again; so one that lost a packet is not waited for long.
    var warmUpGrace: Double {
        warmUp.lag + max(0.02, 0.5 * (config.probeFirstAnswer ?? 0.1))
    }

    /// Connections waiting for a warm-up still out (see `awaitingWarmUp`).
    var waitingForWarmUp: Int {
        warmUp.stillOut == 0 ? 0 : awaitingWarmUp.count { connections[$0].machine.isWaiting }
    }

    /// How the warm-ups stand now (`outcome`; the first time before `begin`): the limit that refusals
    /// taught (`WarmUpOutcome.hostLimit`: the probe and the warm-ups not refused, which were in flight
    /// together), said once as for any refusal, and the connections waiting for a warm-up that ended.
    mutating func learn(warmUp outcome: WarmUpOutcome, now: Double) -> [Command] {
        let before = warmUp
        warmUp = outcome
        var commands: [Command] = []
        if tracing, outcome.sent > 0 {
            commands.append(.trace("warm-ups beside the probe: \(outcome.sent) sent, \(outcome.accepted) answered, \(outcome.refused) refused, \(outcome.failed) failed, \(outcome.stillOut) still out\(outcome.probeResent ? "; the probe was sent again on a warm connection" : "")"))
        }
        // Each warm-up that ended frees one waiting connection: to a warm connection, or (refused,
        // failed) to dial its own.
        for _ in 0..<max(0, before.stillOut - outcome.stillOut) where !awaitingWarmUp.isEmpty {
            connections[awaitingWarmUp.removeFirst()].machine.hasten(to: now)
        }
        guard outcome.refused > before.refused, let limit = outcome.hostLimit else { return commands }
        warmUpLimit = min(warmUpLimit ?? Int.max, limit)
        let announce: Int?
        if let share = config.hostShare {
            announce = share.refused(inFlight: limit, wait: outcome.wait, now: now)?.announce
        } else {
            host.refused(inFlight: limit, wait: outcome.wait, now: now)
            announce = host.announce()
        }
        if let l = announce {
            commands.append(.event(.notice("the server refuses more than \(l) request\(l == 1 ? "" : "s") at once (HTTP 429 or 503 to \(outcome.refused) of \(outcome.sent) connections opened early); continuing with \(l) connection\(l == 1 ? "" : "s").")))
        }
        return commands
    }
}

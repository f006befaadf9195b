/// The rates `SlowConnectionRule` compares (the typical one, the download's total), and the paths where a re-dial costs most.
extension SlowConnectionRule {
    /// The upper quartile of `rates` (0 for none).
    static func upperQuartile(_ rates: [Double]) -> Double {
        let sorted = rates.sorted()
        return sorted.isEmpty ? 0 : sorted[Int(Double(sorted.count - 1) * 0.75 + 0.5)]
    }

    /// Whether the others absorbed a slow connection's `deficit` (the typical rate less its own): the
    /// total is within `absorbedFraction` of it of the usual total. Behind a server's cap per answer the
    /// others cannot take more, and the total falls by the whole deficit.
    static func absorbs(_ pipe: (current: Double, usual: Double), deficit: Double) -> Bool {
        pipe.usual > 0 && deficit > 0 && pipe.current >= pipe.usual - absorbedFraction * deficit
    }

    /// See `absorbs`: half way between a total that kept all of the deficit and one that lost it all.
    static let absorbedFraction = 0.5

    /// Whether a new connection's start takes `lossRecoveryRampSeconds` on a path of round trip `rtt`:
    /// its handshakes, its request's round trip and its slow start to `rate`. There a re-dial is costly,
    /// and the rule judges more slowly (see `judge`).
    func isLongPath(handshakeSeconds: Double, rtt: Double?, rate: Double) -> Bool {
        handshakeSeconds + (rtt ?? 0) + Self.rampSeconds(rate: rate, rtt: rtt) >= lossRecoveryRampSeconds
    }
}

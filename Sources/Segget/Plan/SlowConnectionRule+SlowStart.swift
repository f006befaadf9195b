/// Slow start in `SlowConnectionRule`'s exploring (see `explore`).
extension SlowConnectionRule {
    /// Whether a request `age` seconds past its first byte is no candidate for exploring on a path
    /// whose slow start, at round trip `rtt`, needs longer than `settled` to reach `floor`, plus a
    /// round trip (`rampSeconds`): younger than that, it received over its observation's seconds (the
    /// latest ones of its age) at least `slowFraction` of what slow start from TCP's initial window
    /// delivers over the same seconds of its age, at most `floor` a second; older, at least
    /// `slowFraction` of `floor`. False on a shorter path, or with no round trip known.
    static func keepsUpWithSlowStart(_ o: Observation, age: Double, settled: Double, rtt: Double?, slowFraction: Double, floor: Double) -> Bool {
        guard let rtt, rtt > 0 else { return false }
        let wait = rampSeconds(rate: floor, rtt: rtt) + rtt
        guard wait > settled else { return false }
        let seconds = max(min(o.freeSeconds, age), 1e-3)
        guard age < wait else { return Double(o.bytes) / seconds >= slowFraction * floor }
        let expected = (slowStartBytes(seconds: age, rtt: rtt) - slowStartBytes(seconds: age - seconds, rtt: rtt)) / seconds
        return Double(o.bytes) / seconds >= slowFraction * min(floor, expected)
    }
}

extension Double {
    /// log2 of the value, 0 for values of at most 1 (the standard library has no logarithm).
    var log2OrZero: Double {
        guard self > 1, isFinite else { return 0 }
        // The exponent, plus the significand's log2 (1..<2) by the series of ln(x)/ln(2) around 1.5.
        let e = Double(exponent)
        let m = significand
        let y = (m - 1.5) / (m + 1.5)
        let y2 = y * y
        let ln = 2 * y * (1 + y2 / 3 + y2 * y2 / 5 + y2 * y2 * y2 / 7) + 0.4054651081081644
        return e + ln / 0.6931471805599453
    }
}

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

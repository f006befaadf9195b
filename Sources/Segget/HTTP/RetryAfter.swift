import Glibc

/// Parses a `Retry-After` value: delay-seconds, or an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`)
/// turned into seconds from `now` (Unix time). Nil when malformed; never negative.
func parseRetryAfter(_ value: String, now: Int64 = Int64(time(nil))) -> Double? {
    let v = Substring(value).trimmingASCIIWhitespace()
    if let n = parseDelaySeconds(v) { return n }
    guard let t = parseIMFFixdate(v) else { return nil }
    return Double(max(0, t - now))
}

/// Delay-seconds (a non-empty run of ASCII digits) of any length. A number past what an Int64 holds
/// is still a wait the server asked for, a very long one, not a missing field: read as none, it
/// made segget retry after a second's backoff instead of waiting out its `--max-retry-wait` cap.
/// At most `longestDelay`, so that every sum and conversion made with it stays finite.
func parseDelaySeconds(_ s: Substring) -> Double? {
    guard !s.isEmpty, s.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
    if let n = parseDecimal(s) { return min(Double(n), longestDelay) }
    return longestDelay
}

/// The longest wait a server's field is taken to ask for: about 31.7 years, far past any cap.
let longestDelay = 1e9

/// Unix time of an IMF-fixdate, or nil.
func parseIMFFixdate(_ s: Substring) -> Int64? {
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    let parts = s.split(separator: " ")
    guard parts.count == 6, parts[5] == "GMT", parts[0].hasSuffix(","),
        let day = parseDecimal(parts[1]), let year = parseDecimal(parts[3])
    else { return nil }
    let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    guard let m = months.firstIndex(of: parts[2].lowercased()) else { return nil }
    let hms = parts[4].split(separator: ":")
    guard hms.count == 3, let hh = parseDecimal(hms[0]), let mm = parseDecimal(hms[1]), let ss = parseDecimal(hms[2]),
        (1...31).contains(day), hh < 24, mm < 60, ss < 61, (1970...9999).contains(year)
    else { return nil }
    return daysFromCivil(year: year, month: Int64(m + 1), day: day) * 86400 + hh * 3600 + mm * 60 + ss
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146097 + doe - 719468
}

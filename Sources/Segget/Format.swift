/// Human-readable sizes, rates and durations for messages and progress.
public enum Format {
    /// `1.5 GiB`, `512 KiB`, `17 B`.
    public static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var v = Double(n)
        var i = 0
        while v >= 1024 && i < units.count - 1 {
            v /= 1024
            i += 1
        }
        if i == 0 { return "\(n) B" }
        return v >= 100 ? "\(Int(v.rounded())) \(units[i])" : "\(fixed(v, 1)) \(units[i])"
    }

    public static func rate(_ bytesPerSecond: Double) -> String { bytes(Int64(bytesPerSecond)) + "/s" }

    /// `1 ms`, `0.8 s`, `42 s`, `3m05s`, `2h01m`. Any finite value, however large (a server's `Retry-After`
    /// of 2^63 seconds once trapped converting to Int); from 10^9 s (31.7 years, the longest a
    /// server's field is read as asking) it says so rather than count.
    public static func seconds(_ s: Double) -> String {
        guard s.isFinite else { return "?" }
        // Under a tenth of a second in milliseconds: a timeout of 0.001 s was shown as "0.0 s".
        if s > 0 && s < 0.0995 {
            let ms = (s * 1000).rounded()
            return ms < 1 ? "under 1 ms" : "\(Int(ms)) ms"
        }
        if s < 10 { return "\(fixed(s, 1)) s" }
        guard s < 1e9 else { return "more than 31 years" }
        let t = Int(s.rounded())
        if t < 60 { return "\(t) s" }
        if t < 3600 { return "\(t / 60)m\(pad2(t % 60))s" }
        return "\(t / 3600)h\(pad2(t / 60 % 60))m"
    }

    static func fixed(_ v: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let r = (v * scale).rounded() / scale
        var s = "\(r)"
        if let dot = s.firstIndex(of: ".") {
            let decimals = s.distance(from: dot, to: s.endIndex) - 1
            if decimals < digits { s += String(repeating: "0", count: digits - decimals) }
        } else if digits > 0 {
            s += "." + String(repeating: "0", count: digits)
        }
        return s
    }

    private static func pad2(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
}

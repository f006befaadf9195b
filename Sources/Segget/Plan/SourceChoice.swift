/// Where a connection of a slow source (a mirror, or the main URL among mirrors) should go: the
/// choice behind moving connections between the sources of one file. Pure; the coordinator measures
/// and carries it out (`Coordinator.moveFromSlowSources`).
///
/// Connections start spread over the sources in turn, so a source half as fast per connection as
/// another keeps its share of connections, each at half the speed, for the whole download: with
/// four mirrors paced at 24, 16, 16 and 8 MiB/s per answer (`Benchmarks/metalink.py`), the 8 MiB/s
/// one kept 2 of 8 connections and served 36-39 MiB of 256. A move costs a new connection (a dial
/// and a request), so it must save more than that: the bytes the connection still has to fetch,
/// at the difference of the two rates.
struct SourceChoice {
    /// What the coordinator sees of one good source: the rate of each of its connections now
    /// receiving whose rate is known.
    struct Source: Equatable {
        var index: Int
        var rates: [Double]
        /// The median rate per connection; nil without a measured connection.
        var perConnection: Double? {
            guard !rates.isEmpty else { return nil }
            let sorted = rates.sorted()
            return sorted[sorted.count / 2]
        }
    }

    /// A source must be at least this many times faster per connection than another before a
    /// connection moves to it: rates of one source differ by less between connections and
    /// windows; a pair of equal mirrors never trades connections back and forth.
    static let factor = 1.5

    /// A move: the connection's source is slow against `to`, which is `gain` times faster per
    /// connection.
    struct Move: Equatable {
        var to: Int
        var gain: Double
    }

    /// The source a connection of `from` should move to, when `sources` (the good ones, measured)
    /// has one at least `factor` times faster per connection; the fastest such.
    static func move(from: Int, among sources: [Source]) -> Move? {
        guard let mine = sources.first(where: { $0.index == from })?.perConnection, mine > 0 else { return nil }
        let best = sources.filter { $0.index != from }.compactMap { s in s.perConnection.map { (s.index, $0) } }
            .max { $0.1 < $1.1 }
        guard let (to, rate) = best, rate >= factor * mine else { return nil }
        return Move(to: to, gain: rate / mine)
    }

    /// Whether moving is worth its price: `bytesLeft` at `rate` take longer than at `gain` times
    /// that rate plus `priceSeconds` (the new connection's dial and request).
    static func worth(bytesLeft: Int64, rate: Double, gain: Double, priceSeconds: Double) -> Bool {
        guard rate > 0, gain > 1 else { return false }
        let now = Double(bytesLeft) / rate
        return now - now / gain > priceSeconds
    }
}

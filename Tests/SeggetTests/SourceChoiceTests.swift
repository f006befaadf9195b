import Testing

@testable import Segget

@Suite struct SourceChoiceTests {
    typealias S = SourceChoice.Source

    @Test func aSourceFarSlowerPerConnectionMovesToTheFastest() {
        let sources = [S(index: 0, rates: [16e6, 15e6, 17e6]), S(index: 1, rates: [8e6, 7.5e6]), S(index: 2, rates: [24e6])]
        #expect(SourceChoice.move(from: 1, among: sources) == .init(to: 2, gain: 24e6 / 8e6))
        // The fastest only moves when another is at least 1.5 x faster: 24 against 16 is exactly that.
        #expect(SourceChoice.move(from: 0, among: sources)?.to == 2)
        #expect(SourceChoice.move(from: 2, among: sources) == nil)
    }

    @Test func nearlyEqualSourcesNeverTrade() {
        // Every pair within the factor, in both directions: no move either way.
        for a in stride(from: 1e6, through: 64e6, by: 3e6) {
            for ratio in [1.0, 1.1, 1.3, 1.49] {
                let sources = [S(index: 0, rates: [a]), S(index: 1, rates: [a * ratio])]
                #expect(SourceChoice.move(from: 0, among: sources) == nil)
                #expect(SourceChoice.move(from: 1, among: sources) == nil)
            }
        }
    }

    @Test func theMedianPerConnectionDecidesNotOneOutlier() {
        // One stalled connection does not make a source slow; one burst does not make it fast.
        let sources = [S(index: 0, rates: [16e6, 0.1e6, 16e6]), S(index: 1, rates: [12e6, 90e6, 12e6])]
        #expect(S(index: 0, rates: [16e6, 0.1e6, 16e6]).perConnection == 16e6)
        #expect(SourceChoice.move(from: 0, among: sources) == nil)
        #expect(SourceChoice.move(from: 1, among: sources) == nil)
    }

    @Test func unmeasuredSourcesNeitherMoveNorAttract() {
        let sources = [S(index: 0, rates: []), S(index: 1, rates: [8e6]), S(index: 2, rates: [])]
        #expect(SourceChoice.move(from: 0, among: sources) == nil)
        #expect(SourceChoice.move(from: 1, among: sources) == nil)
        #expect(SourceChoice.move(from: 3, among: sources) == nil)
        #expect(SourceChoice.move(from: 1, among: [S(index: 1, rates: [0]), S(index: 2, rates: [1e6])]) == nil)
    }

    @Test func aMoveMustSaveMoreThanItsPrice() {
        // 4 MiB left at 8 MB/s (0.52 s), twice as fast elsewhere: saves 0.26 s.
        #expect(SourceChoice.worth(bytesLeft: 4 << 20, rate: 8e6, gain: 2, priceSeconds: 0.1))
        #expect(!SourceChoice.worth(bytesLeft: 4 << 20, rate: 8e6, gain: 2, priceSeconds: 0.3))
        #expect(!SourceChoice.worth(bytesLeft: 0, rate: 8e6, gain: 4, priceSeconds: 0))
        #expect(!SourceChoice.worth(bytesLeft: 4 << 20, rate: 8e6, gain: 1, priceSeconds: 0))
        // Property: worth exactly when the time saved exceeds the price.
        for left in stride(from: Int64(1) << 16, through: 64 << 20, by: 3 << 20) {
            for gain in [1.5, 2.0, 3.0, 8.0] {
                for price in [0.0, 0.05, 0.4, 2.0] {
                    let saved = Double(left) / 8e6 * (1 - 1 / gain)
                    #expect(SourceChoice.worth(bytesLeft: left, rate: 8e6, gain: gain, priceSeconds: price) == (saved > price))
                }
            }
        }
    }
}

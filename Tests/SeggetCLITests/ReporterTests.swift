import Segget
import Testing

@testable import segget

/// A quiet run shows no progress, so its downloads build none (see `Reporter.wantsProgress`).
@Suite struct ReporterTests {
    @Test func onlyAReporterThatShowsProgressAsksForIt() {
        #expect(!SingleUI(quiet: true).wantsProgress)
        #expect(SingleUI(quiet: false).wantsProgress)
        #expect(!BatchUI(quiet: true, count: 3).wantsProgress)
        #expect(BatchUI(quiet: false, count: 3).wantsProgress)
        // --json writes progress objects, quiet or not.
        #expect(JSONReporter().wantsProgress)
    }
}

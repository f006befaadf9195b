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

/// A download's live line fits the terminal whatever its width, and what goes first where it does not
/// all fit is the least useful (exploratory run 5: on 40 columns the bar kept 10 and the rate and ETA
/// were cut off).
@Suite struct ProgressLineTests {
    let line = ProgressLine(
        percent: " 42%", fraction: 0.42, bytes: "107.5 MiB/256.0 MiB", rate: "5.2 MiB/s", eta: "28s",
        connections: "▇▇▇▆▇▇█▇")

    @Test func wideTerminalsShowEverythingWithABarThatFills() {
        let text = line.text(columns: 100)
        #expect(DisplayText.columns(text) == 99)
        #expect(text.hasPrefix(" 42% [====="))
        #expect(text.hasSuffix("] 107.5 MiB/256.0 MiB 5.2 MiB/s ETA 28s ▇▇▇▆▇▇█▇"))
        let bar = text.split(separator: "[")[1].split(separator: "]")[0]
        #expect(bar.filter { $0 == "=" }.count == Int(0.42 * Double(bar.count)))
    }

    @Test func theConnectionsGoFirstThenTheBar() {
        // 4 + 2 + 10 + 1 + 19 + 1 + 9 + 8 = the line without connections and a bar of 10: 54 + "]"
        let noConnections = line.text(columns: 58)
        #expect(noConnections.hasSuffix("] 107.5 MiB/256.0 MiB 5.2 MiB/s ETA 28s"))
        #expect(!noConnections.contains("▇"))
        let noBar = line.text(columns: 45)
        #expect(noBar == " 42% 107.5 MiB/256.0 MiB 5.2 MiB/s ETA 28s")
        #expect(line.text(columns: 43) == " 42% 107.5 MiB/256.0 MiB 5.2 MiB/s ETA 28s")
        // Then the bytes, then the ETA: no field is shown in part.
        #expect(line.text(columns: 40) == " 42% 5.2 MiB/s ETA 28s")
        #expect(line.text(columns: 20) == " 42% 5.2 MiB/s")
        #expect(line.text(columns: 6) == " 42%")
    }

    @Test func everyWidthFitsAndKeepsTheRateWhereItCan() {
        for width in 1...140 {
            for l in [line, ProgressLine(percent: "  ?%", bytes: "3.0 GiB", rate: "112.0 MiB/s", eta: nil, connections: "")] {
                let text = l.text(columns: width)
                #expect(DisplayText.columns(text) <= max(1, width - 1), "width \(width): \(text)")
                let essentials = " \(l.bytes) \(l.rate)" + (l.eta.map { " ETA \($0)" } ?? "")
                if width - 1 >= DisplayText.columns(l.percent + essentials) {
                    #expect(text.contains(essentials), "width \(width): \(text)")
                }
                if width - 1 >= DisplayText.columns(l.percent + " " + l.rate) {
                    #expect(text.contains(" \(l.rate)"), "width \(width): \(text)")
                }
            }
        }
    }
}

/// A client command's words for the daemon's refusals: an unknown or ambiguous GID is said as such
/// (from segget's daemon and from aria2c), anything else keeps the method's name.
@Suite struct ClientRefusalTests {
    @Test func gidsTheDaemonDoesNotKnowAreSaidAsSuch() {
        let cases: [(method: String, said: String, shown: String)] = [
            ("aria2.tellStatus", "GID 0123456789abcdef is not found", "The daemon has no task with GID 0123456789abcdef; 'segget ls' lists its tasks."),
            ("aria2.tellStatus", "No such download for GID#2089b05ecca3d829", "The daemon has no task with GID 2089b05ecca3d829; 'segget ls' lists its tasks."),
            ("aria2.forcePause", "GID 20 is ambiguous: 2 tasks' GIDs start with it", "20 is the start of more than one GID (2 tasks' GIDs start with it); give more of it. 'segget ls' lists its tasks."),
            ("aria2.unpause", "Cannot unpause a task that is active", "The daemon refused aria2.unpause: Cannot unpause a task that is active"),
        ]
        for c in cases { #expect(DaemonAddress.refusal(c.method, c.said) == c.shown) }
        for said in ["GID x is not found", "No such download for GID#x", "GID x is ambiguous: 2 tasks' GIDs start with it"] {
            #expect(!DaemonAddress.refusal("aria2.tellStatus", said).contains("aria2."))
        }
    }
}

/// A list's last line says what became of the files it did not download.
@Suite struct BatchSummaryLineTests {
    @Test func filesNotDownloadedAreAccountedFor() {
        #expect(BatchUI.summaryLine([.skipped(.completed), .skipped(.completed)], seconds: 0.003)
            == "0 of 2 files downloaded (2 done by an earlier run) in 3 ms.")
        #expect(BatchUI.summaryLine([.notStarted], seconds: 1) == "0 of 1 file downloaded (1 not started) in 1.0 s.")
        let mixed: [Outcome.Status] = [
            .skipped(.exists), .failed(SeggetError(.httpStatus, "404")), .notStarted, .skipped(.completed),
        ]
        #expect(BatchUI.summaryLine(mixed, seconds: 2)
            == "0 of 4 files downloaded (1 done by an earlier run, 1 skipped as already there, 1 failed, 1 not started) in 2.0 s.")
        #expect(BatchUI.summaryLine([], seconds: 0) == "0 of 0 files downloaded in 0.0 s.")
    }
}

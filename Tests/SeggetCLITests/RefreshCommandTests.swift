import Segget
import Testing

@testable import segget

/// `--refresh-command`: its options, the environment it gets, and how its output becomes a URL.
@Suite struct RefreshCommandTests {
    @Test func theOptionsBuildARenewer() throws {
        let get = try Get.parse(["--refresh-command", "echo x", "--refresh-timeout", "5", "https://example.com/f"])
        #expect(get.retry.refreshCommand == "echo x")
        #expect(get.retry.refreshTimeout == 5)
        #expect(try get.downloadOptions().linkRenewer != nil)
        #expect(try Get.parse(["https://example.com/f"]).downloadOptions().linkRenewer == nil)
    }

    @Test func badOptionsAreRefused() {
        #expect(parseFailure(["--refresh-command", "  ", "https://example.com/f"])?.contains("--refresh-command is empty") == true)
        #expect(parseFailure(["--refresh-command", "x", "--refresh-timeout", "0", "https://example.com/f"])?.contains("--refresh-timeout") == true)
    }

    @Test func theEnvironmentNamesWhatExpired() {
        let env = RefreshCommand.environment(for: LinkRenewalRequest(
            url: "https://b.example/f?sig=1", status: 410, bytesDone: 5, totalLength: 9, renewal: 2, outputPath: "/d/f"))
        #expect(env == [
            "SEGGET_URL": "https://b.example/f?sig=1", "SEGGET_STATUS": "410", "SEGGET_BYTES_DONE": "5",
            "SEGGET_TOTAL_BYTES": "9", "SEGGET_RENEWAL": "2", "SEGGET_OUTPUT": "/d/f",
        ])
    }

    @Test func theOneNonEmptyLineIsTheURL() throws {
        #expect(try RefreshCommand.url(fromOutput: Array("\n  https://a.example/f?x=1 \r\n\n".utf8)) == "https://a.example/f?x=1")
        #expect(throws: SeggetError.self) { try RefreshCommand.url(fromOutput: []) }
        #expect(throws: SeggetError.self) { try RefreshCommand.url(fromOutput: Array("a\nb\n".utf8)) }
        // Not a URL, another scheme, a blank inside (once dropped, fetching another path): exit 4
        // with the reason, as for every renewer that fails, not 2 (a usage error).
        for printed in ["hello\n", "ftp://a.example/f\n", "http://\n", "http://a.example/f 64\n", "see https://a.example/f\n", "http://a.example/\u{1B}[31m\n"] {
            #expect {
                try RefreshCommand.url(fromOutput: Array(printed.utf8))
            } throws: { error in
                guard let e = error as? SeggetError else { return false }
                return e.exitCode == 4 && e.message.contains("printed no usable URL")
            }
        }
    }

    @Test func theCommandRunsAndItsURLComesBack() throws {
        let renewer = RefreshCommand(command: "printf '%s\\n' \"$SEGGET_URL-new\"", timeout: 10).renewer
        let url = try renewer.renew(LinkRenewalRequest(
            url: "https://a.example/f", status: 403, bytesDone: 1, totalLength: 2, renewal: 1, outputPath: "f"))
        #expect(url == "https://a.example/f-new")
    }

    @Test func aFailingOrSlowCommandIsAnHTTPStatusError() throws {
        let request = LinkRenewalRequest(url: "u", status: 403, bytesDone: 1, totalLength: 2, renewal: 1, outputPath: "f")
        do {
            _ = try RefreshCommand(command: "exit 3", timeout: 10).renewer.renew(request)
            Issue.record("exit 3 gave a URL")
        } catch let e as SeggetError {
            #expect(e.kind == .httpStatus && e.message.contains("exited with status 3"))
        }
        let started = ContinuousClock.now
        do {
            _ = try RefreshCommand(command: "sleep 20", timeout: 0.5).renewer.renew(request)
            Issue.record("a command past its timeout gave a URL")
        } catch let e as SeggetError {
            #expect(e.message.contains("did not finish within"))
        }
        #expect(ContinuousClock.now - started < .seconds(10))
    }
}

import Glibc
import Synchronization
import Testing
@testable import SeggetSystem

/// `ChildProcess.runShell`: what a `--refresh-command` relies on.
@Suite struct ChildProcessTests {
    @Test func outputsEnvironmentAndExitStatusComeBack() throws {
        let r = try ChildProcess.runShell(
            "printf '%s' \"$SEGGET_TEST_VALUE\"; printf 'to stderr' >&2; exit 7",
            environment: ["SEGGET_TEST_VALUE": "a b;c"], timeout: 10)
        #expect(String(decoding: r.standardOutput, as: UTF8.self) == "a b;c")
        #expect(String(decoding: r.standardError, as: UTF8.self) == "to stderr")
        #expect(r.exitStatus == 7 && r.signal == nil && !r.timedOut && !r.cancelled)
    }

    @Test func theEnvironmentIsInheritedAndStandardInputIsEmpty() throws {
        let r = try ChildProcess.runShell("printf '%s' \"${PATH:+set}\"; cat", timeout: 10)
        #expect(String(decoding: r.standardOutput, as: UTF8.self) == "set")
        #expect(r.exitStatus == 0)
    }

    /// segget ignores SIGPIPE and SIGXFSZ; an ignored signal would stay ignored across exec, and a
    /// command's pipeline (`yes | head -1`) or its writes past `ulimit -f` would not end as from a shell.
    @Test func theCommandGetsTheSignalsSeggetIgnoresBackAtTheirDefaults() throws {
        // SIGPIPE stays ignored after (test servers in this process rely on that); SIGXFSZ is put back.
        signal(SIGPIPE, SIG_IGN)
        let size = signal(SIGXFSZ, SIG_IGN)
        defer { signal(SIGXFSZ, size) }
        let r = try ChildProcess.runShell("grep '^SigIgn:' /proc/self/status", timeout: 10)
        let line = String(decoding: r.standardOutput, as: UTF8.self)
        let mask = UInt64(String(line.dropFirst("SigIgn:".count).filter(\.isHexDigit)), radix: 16)
        #expect(r.exitStatus == 0)
        #expect(mask.map { $0 & (1 << (SIGPIPE - 1)) } == 0, "SIGPIPE still ignored: \(line)")
        #expect(mask.map { $0 & (1 << (SIGXFSZ - 1)) } == 0, "SIGXFSZ still ignored: \(line)")
    }

    @Test func aCommandPastItsTimeIsKilledWithItsChildren() throws {
        let started = ContinuousClock.now
        let r = try ChildProcess.runShell("sleep 30 & sleep 30; echo never", timeout: 0.3)
        #expect(r.timedOut && r.exitStatus == nil && r.signal == 9)
        #expect(r.standardOutput.isEmpty)
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test func cancellingStopsIt() throws {
        let asked = Mutex(0)
        let r = try ChildProcess.runShell("sleep 30", timeout: 60, cancelled: {
            asked.withLock { $0 += 1; return $0 > 2 }
        })
        #expect(r.cancelled && !r.timedOut && r.exitStatus == nil)
    }

    @Test func outputIsCutAtTheLimit() throws {
        let r = try ChildProcess.runShell("head -c 100000 /dev/zero", timeout: 10, outputLimit: 1000)
        #expect(r.standardOutput.count == 1000 && r.exitStatus == 0)
    }
}

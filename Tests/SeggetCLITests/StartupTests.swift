import CStartup
import Testing

/// The command line that `CStartup` keeps for Swift's `CommandLine` (see Sources/CStartup/argv.c).
@Suite struct StartupTests {
    /// Its constructor ran with the C library's `argc`: the count Swift's `CommandLine` reports (in a
    /// release build of segget, from these very values; here, with the shared runtime, from its own).
    @Test func theConstructorKeptTheCommandLine() {
        #expect(Int(segget_startup_argc()) == CommandLine.arguments.count)
        #expect(segget_startup_argc() >= 1)
    }
}

import ArgumentParser
import Glibc
import Segget

// Parse and run by hand so that every failure maps to segget's documented exit codes
// (ArgumentParser alone would use 64 for usage errors).
do {
    var command = try SeggetCommand.parseAsRoot()
    try command.run()
    exit(0)
} catch let error as SeggetError {
    writeStderr("segget: \(error.message)\n")
    exit(error.exitCode)
} catch {
    let code = SeggetCommand.exitCode(for: error)
    if code == .success {
        SeggetCommand.exit(withError: error)  // --help, --version
    }
    let message = SeggetCommand.message(for: error)
    writeStderr("segget: \(message)\n")
    if !(error is ValidationError) || true {
        writeStderr("Run 'segget --help' for the options.\n")
    }
    exit(FailureKind.usage.exitCode)
}

import ArgumentParser
import Glibc
import Segget
import SeggetSystem

// Before anything opens a descriptor that could take the place of a closed standard one.
_ = FileDescriptor.closedAtStart

/// With --json, usage errors are also reported as a JSON `error` object on stdout.
let jsonRequested = CommandLine.arguments.dropFirst().prefix { $0 != "--" }.contains("--json")

/// `message` up to the usage hints ArgumentParser puts on lines of their own after the problem.
func usageProblem(_ message: String) -> String {
    let hints = ["\nHelp:", "\nUsage:", "\n  See '", "\nSee '"]
    // The first kind of hint there is, at its last occurrence: a value that itself holds
    // "\nUsage:" (-H $'X: a\nUsage: b') is not where the hints begin.
    let cut = hints.lazy.compactMap { message.ranges(of: $0).last?.lowerBound }.first ?? message.endIndex
    var problem = message[..<cut]
    while problem.last?.isNewline == true { problem.removeLast() }
    return String(problem)
}

/// Prints a usage problem as one line and exits 2.
func failUsage(_ message: String, pointingToHelp: Bool = true) -> Never {
    // ArgumentParser's messages end in usage hints on lines of their own; what is wrong comes
    // before them, and may quote a value given with a line break (-H $'a\nb'), which is shown
    // escaped so that the message stays one line (cut at the first line break, it lost its reason).
    var first = DisplayText.escaping(usageProblem(message), keepingLineBreaks: false)
    if first.hasPrefix("Error: ") { first.removeFirst(7) }
    // One sentence, then the pointer: ArgumentParser's own messages end without a period.
    if let last = first.last, !".?!".contains(last) { first += "." }
    writeStderr(pointingToHelp ? "segget: \(first) See 'segget --help'.\n" : "segget: \(first)\n")
    if jsonRequested {
        StdoutLines.write(JSONReporter.error(id: nil, url: nil, path: nil, SeggetError(.usage, first)).body)
    }
    exit(FailureKind.usage.exitCode)
}

// A reader of standard output or standard error that goes away (`segget --json URL | head -1`)
// shows as EPIPE from write(2), which the event and progress writers let pass: the download goes on
// and ends with its own exit code. SIGPIPE's default ended the process at once, exit 141 and not a
// word, the download unfinished. (`-o -` reports its reader gone with exit 5, see StreamCommand.)
signal(SIGPIPE, SIG_IGN)
// Past the process's file size limit (`ulimit -f`) a write raises SIGXFSZ, whose default ends the
// process at once: exit 153, no word, the part file left as it was. Ignored, the write fails with
// EFBIG, which segget words (FileTooLarge) and ends with exit 5. A `--refresh-command` gets both
// signals' defaults back (Syscalls+ChildProcess).
signal(SIGXFSZ, SIG_IGN)

if let bad = RawArguments.firstNotUTF8(RawArguments.current) {
    failUsage("argument \(bad.position) is not UTF-8 ('\(bad.shown)'); segget reads names, paths and URLs as UTF-8 and would have used another name. Give it in UTF-8 (rename the file or directory if need be).")
}
// The RPC token given on the command line, out of the process list (Swift's copy of the arguments,
// read above for `jsonRequested`, keeps it for the parsing).
_ = CommandLine.arguments
RawArguments.hideSecrets()

// Parse and run by hand so that every failure maps to segget's documented exit codes
// (ArgumentParser alone would use 64 for usage errors).
// The commonest command lines (`segget [-q] [-f] [-o FILE | -d DIR] URL...`) are read without
// ArgumentParser, whose reflection costs more CPU than a small download (see GetRequest).
do {
    if let request = GetRequest(quickParsing: Array(CommandLine.arguments.dropFirst())) {
        try request.run()
    } else {
        var command = try SeggetCommand.parseAsRoot()
        try command.run()
    }
    exit(0)
} catch let error as ExitCode {
    exit(error.rawValue)
} catch let error as SeggetError {
    if error.kind == .usage { failUsage(error.message, pointingToHelp: error.pointsToHelp) }
    writeStderr("segget: \(error.message)\n")
    if jsonRequested {
        StdoutLines.write(JSONReporter.error(id: nil, url: nil, path: nil, error).body)
    }
    exit(error.exitCode)
} catch {
    if SeggetCommand.exitCode(for: error) == .success {
        SeggetCommand.exit(withError: error)  // --help, --version, completion scripts
    }
    failUsage(SeggetCommand.message(for: error))
}

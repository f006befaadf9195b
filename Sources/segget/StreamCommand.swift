import ArgumentParser
import Glibc
import Segget
import SeggetSystem

/// `-o -`: the download's bytes go to standard output, in order (see `Download.stream`).
struct StreamOptions: ParsableArguments {
    /// 4 MiB up to 16 GiB: below, connections would wait for each other; above, it is no bound.
    static let windows = ByteSize(StreamSettings.minimumWindow)...ByteSize.gibibytes(16)

    @Option(
        name: .customLong("stream-window"), parsing: .unconditional,
        help: ArgumentHelp(
            "With -o -, the most bytes held in memory waiting for earlier ones, e.g. 64M (the default); connections further ahead pause.",
            valueName: "size"),
        transform: ArgumentValue.size(in: windows))
    var window: ByteSize?

    @Option(
        name: .customLong("stream-from"), parsing: .unconditional,
        help: ArgumentHelp(
            "With -o -, start the stream at this byte of the file: continues a stream that stopped after that many bytes.",
            valueName: "offset"))
    var from: Int64?

    func validate() throws {
        if let from, from < 0 { throw ValidationError("--stream-from takes a byte offset of 0 or more (got \(from)).") }
    }

    /// Either option was given.
    var isGiven: Bool { window != nil || from != nil }

    var settings: StreamSettings {
        StreamSettings(window: window?.bytes ?? StreamSettings.defaultWindow, from: from ?? 0)
    }
}

/// Runs `segget -o - URL`: progress and messages on stderr only, the file's bytes on stdout.
struct StreamRun {
    let url: String
    let options: DownloadOptions
    let settings: StreamSettings
    let quiet: Bool

    /// Refuses a terminal as the stream's reader unless `force`: a file's bytes would garble it.
    static func checkOutput(force: Bool) throws(SeggetError) {
        if FileDescriptor.closedAtStart.contains(.standardOutput) {
            throw SeggetError(.fileSystem, "standard output is closed, so -o - has nowhere to write the file; run it with standard output open (| program, > FILE), or save it with -o FILE.")
        }
        if isatty(1) == 1 && !force {
            throw SeggetError(.usage, "standard output is a terminal; -o - writes the file's raw bytes there. Pipe it into a program (| tar x) or redirect it (> FILE), or pass --force to write to the terminal anyway.")
        }
    }

    func run() throws {
        try Self.checkOutput(force: options.force)
        // A reader that went away shows as EPIPE from write(2), reported with its own message,
        // instead of a silent death by SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let interrupt = InterruptFlag()
        SignalTrap.install(interrupt: interrupt, stream: true)
        let ui = TerminalUI(quiet: quiet)
        // A reader that stops reading cannot hold a Ctrl-C up: the write gives up once a stop is asked
        // for and nothing goes out for PatientOutput.step ms.
        let out = PatientOutput(.standardOutput)
        do throws(SeggetError) {
            let r = try Download(url: url, options: options).stream(
                to: { bytes in
                    let p = out.write(bytes, giveUp: { interrupt.isSet })
                    if let e = p.error { throw StreamOutputFailure(written: p.written, error: e) }
                }, settings: settings,
                progress: { ui.progress($0) }, events: { ui.event($0) }, interrupt: interrupt)
            ui.clearLine()
            if !quiet {
                let rate = r.seconds > 0 ? Double(r.bytes) / r.seconds : 0
                var text = "segget: streamed \(Format.bytes(r.bytes))"
                if r.from > 0 { text += " from byte \(r.from)" }
                text += " to standard output in \(Format.seconds(r.seconds)), \(Format.rate(rate)) average, \(r.connections) connection\(r.connections == 1 ? "" : "s")"
                text += ", reorder window peak \(Format.bytes(r.peakWindowBytes)) of \(Format.bytes(settings.window))"
                if !r.verified.isEmpty { text += ", verified \(r.verified.map { $0.split(separator: "=").first.map(String.init) ?? $0 }.joined(separator: " + "))" }
                writeStderr(text + "\n")
            }
        } catch {
            ui.clearLine()
            writeStderr("segget: \(error.message)\n")
            throw ExitCode(error.exitCode)
        }
    }
}

import Segget
import SeggetSystem

/// `--refresh-command CMD`: how the command line renews a link that expired mid-download.
///
/// CMD runs through `/bin/sh -c`, with standard input from `/dev/null` and these variables set:
/// `SEGGET_URL` (the link that expired), `SEGGET_STATUS` (401, 403 or 410), `SEGGET_BYTES_DONE`,
/// `SEGGET_TOTAL_BYTES`, `SEGGET_RENEWAL` (1 for the first renewal of this file) and `SEGGET_OUTPUT`
/// (the file's final name). It must exit 0 within the refresh timeout and print the new URL as its
/// one non-empty line on standard output. Its standard error is shown, escaped, one line at a time.
struct RefreshCommand: Sendable {
    var command: String
    var timeout: Double

    /// The environment CMD gets on top of segget's own.
    static func environment(for request: LinkRenewalRequest) -> [String: String] {
        [
            "SEGGET_URL": request.url,
            "SEGGET_STATUS": String(request.status),
            "SEGGET_BYTES_DONE": String(request.bytesDone),
            "SEGGET_TOTAL_BYTES": String(request.totalLength),
            "SEGGET_RENEWAL": String(request.renewal),
            "SEGGET_OUTPUT": request.outputPath,
        ]
    }

    /// The URL in CMD's standard output: its one non-empty line, blanks at its ends dropped; an
    /// error (exit 4, as for every renewer that fails) for none, several, or a line that is not an
    /// absolute http(s) URL. (Blanks inside the line were once dropped too, which fetched another
    /// path than the one printed.)
    static func url(fromOutput output: [UInt8]) throws(SeggetError) -> String {
        let lines = String(decoding: output, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
            .map { String($0.trimmingSpacesAndTabs()) }
            .filter { !$0.isEmpty }
        guard lines.count == 1 else {
            throw SeggetError(.httpStatus, lines.isEmpty
                ? "the refresh command printed no URL on its standard output."
                : "the refresh command printed \(lines.count) lines; it must print one URL.")
        }
        if let problem = InputFile.urlProblem(lines[0]) {
            throw SeggetError(.httpStatus, "the refresh command printed no usable URL: \(problem)")
        }
        return lines[0]
    }

    var renewer: LinkRenewer {
        let command = command
        let timeout = timeout
        return LinkRenewer { request in
            let result: ChildProcessResult
            do {
                result = try ChildProcess.runShell(
                    command, environment: Self.environment(for: request), timeout: timeout,
                    cancelled: { request.interrupt.isSet })
            } catch {
                throw SeggetError(.internalError, "could not start the refresh command: \(error)")
            }
            for line in String(decoding: result.standardError, as: UTF8.self).split(separator: "\n") {
                // The command's words, which may quote a server: escaped like server text.
                writeStderr("segget: refresh command: \(ServerText(String(line)))\n")
            }
            if result.cancelled {
                throw SeggetError(.interrupted, "the refresh command was stopped.")
            }
            if result.timedOut {
                throw SeggetError(.httpStatus, "the refresh command did not finish within \(Format.seconds(timeout)) and was stopped (--refresh-timeout).")
            }
            if let signal = result.signal {
                throw SeggetError(.httpStatus, "the refresh command was ended by signal \(signal).")
            }
            if let status = result.exitStatus, status != 0 {
                throw SeggetError(.httpStatus, "the refresh command exited with status \(status).")
            }
            return try Self.url(fromOutput: result.standardOutput)
        }
    }
}

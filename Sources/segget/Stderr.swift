import Segget
import SeggetSystem

/// The terminal control sequences segget writes itself: the only control characters that reach stderr
/// unescaped.
enum TerminalControl: String {
    /// Back to the start of the line, and clear it (the live progress line).
    case clearLine = "\r\u{1B}[2K"
}

/// Writes text to standard error, unbuffered (no shared `FILE *`, so no concurrency hazard). Control
/// characters in `text` other than newlines and tabs are shown escaped (`DisplayText`): server text
/// is already escaped where it is received (`ServerText`), and this is the last line of defence.
func writeStderr(_ text: String, after control: TerminalControl? = nil) {
    try? FileDescriptor.standardError.writeAll((control?.rawValue ?? "") + DisplayText.escaping(text))
}

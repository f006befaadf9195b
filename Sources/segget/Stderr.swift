import SeggetSystem

/// Writes text to standard error, unbuffered (no shared `FILE *`, so no concurrency hazard).
func writeStderr(_ text: String) {
    try? FileDescriptor.standardError.writeAll(text)
}

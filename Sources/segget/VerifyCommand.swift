import ArgumentParser
import Segget
import SeggetSystem
import SeggetVerify

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a file already on disk against a digest, or a Metalink's piece hashes (and repair it).",
        discussion: """
            With --metalink, every piece of FILE is hashed and the pieces that do not match are named; \
            with --repair as well, only those pieces are fetched from the Metalink's URLs and written \
            over the bad bytes in place, then checked again (and the file's whole digest, when the \
            Metalink gives one). Exit 0 when the file matches (or was repaired), 6 when it does not, \
            2 for bad input, 3 or 4 when the servers could not supply the pieces, 5 when the file \
            cannot be read or written.
            """
    )

    @Argument(help: "The file to check.")
    var file: String

    @Option(help: "Expected digest ALGO=HEX, with ALGO sha256 or md5 (repeatable).")
    var checksum: [String] = []

    @Option(name: .customLong("checksum-file"), help: "A sha256sum/md5sum style file holding the expected digest.")
    var checksumFile: String?

    @Option(
        name: .customLong("metalink"),
        help: ArgumentHelp("A Metalink 4 document (a path or an http(s) URL) with the file's piece hashes and URLs.", valueName: "source"))
    var metalink: String?

    @Flag(help: "With --metalink: fetch the pieces that do not match from the Metalink's URLs and write them in place.")
    var repair = false

    @Option(
        name: [.customShort("n"), .customLong("connections")], parsing: .unconditional,
        help: ArgumentHelp("With --repair: connections, 1 to 128 (default 8).", valueName: "n"),
        transform: ArgumentValue.wholeNumber)
    var connections: Int = 8

    @Option(name: .customLong("metalink-location"), help: ArgumentHelp("Prefer the Metalink's mirrors in this country (ISO 3166 code).", valueName: "code"))
    var location: String?

    @Flag(name: .shortAndLong, help: "Print nothing but errors.")
    var quiet = false

    func validate() throws {
        if checksum.isEmpty && checksumFile == nil && metalink == nil {
            throw ValidationError("give --checksum ALGO=HEX, --checksum-file FILE or --metalink SOURCE.")
        }
        if repair && metalink == nil { throw ValidationError("--repair needs --metalink SOURCE: the pieces to fetch and where from.") }
        guard (1...128).contains(connections) else { throw ValidationError("-n takes a number from 1 to 128 (got \(connections)).") }
        for c in checksum {
            do { _ = try ExpectedDigest(parsing: c) } catch { throw ValidationError("\(error)") }
        }
    }

    func run() throws {
        // A FIFO or a device would be read until its writer stops (forever, for a FIFO nobody writes).
        if let kind = FileSystem.status(file)?.kind, kind != .regular {
            throw SeggetError(.fileSystem, "\(file) is not a regular file; segget verify checks the contents of a file.")
        }
        if let metalink { try checkPieces(metalink) }
        guard !checksum.isEmpty || checksumFile != nil else { return }
        var expected = try checksum.map { try ExpectedDigest(parsing: $0) }
        if let cf = checksumFile { expected.append(try loadChecksumFile(cf, outputName: lastPathComponent(file))) }
        // An unreadable file's error is a sentence that names the file and says what failed.
        _ = try Download.checkFile(at: file, expected: expected, unreadable: "", afterMismatch: "")
        if !quiet {
            for e in expected { writeStderr("segget: \(file): \(e.algorithm.displayName) OK (\(e.hex))\n") }
        }
    }

    /// The Metalink's pieces of the file: checked, and with `--repair` the bad ones fetched again.
    private func checkPieces(_ source: String) throws {
        let document = try MetalinkSource.load(source)
        let name = lastPathComponent(file)
        guard let described = document.file(for: file) else {
            throw SeggetError(
                .usage,
                "\(source) describes \(document.files.count) files and none of them is \(name) alone (by its name, with the directories the document gives it); rename the file, run verify from the directory the document's names start in, or give a Metalink of it.")
        }
        var options = DownloadOptions()
        options.connections = connections
        options.metalinkLocation = location?.lowercased()
        let interrupt = InterruptFlag()
        SignalTrap.install(interrupt: interrupt)
        let quiet = self.quiet
        let report = try FileRepair.run(
            path: file, file: described.download(preferring: location), repair: repair, options: options,
            events: { e in if !quiet, case .notice(let text) = e { writeStderr("segget: \(text)\n") } }, interrupt: interrupt)
        let badCount = report.badPieces.count
        let list = zip(report.badPieces, report.badRanges).prefix(20).map { "\($0) (bytes \($1.lowerBound)-\($1.upperBound - 1))" }
            .joined(separator: ", ") + (badCount > 20 ? " and \(badCount - 20) more" : "")
        if badCount == 0 {
            if !quiet {
                let whole = report.verified.isEmpty ? "" : ", and so does its \(report.verified.map { $0.split(separator: "=").first.map(String.init) ?? $0 }.joined(separator: " and "))"
                writeStderr("segget: \(file): all \(report.pieceCount) \(report.algorithm.displayName) pieces match\(whole).\n")
            }
            return
        }
        guard report.repaired else {
            throw SeggetError(.verification, "\(file): \(badCount) of \(report.pieceCount) \(report.algorithm.displayName) pieces do not match: \(list). Run again with --repair to fetch only those.")
        }
        if !quiet {
            var text = "segget: \(file): repaired \(badCount) of \(report.pieceCount) pieces (\(list)), fetching \(Format.bytes(report.fetchedBytes))"
            if !report.badSources.isEmpty { text += "; \(report.badSources.map { URLParts.shown($0).description }.joined(separator: ", ")) sent bad pieces and got no more work" }
            text += report.verified.isEmpty ? "; every piece matches now.\n" : "; the file matches its \(report.verified.map { $0.split(separator: "=").first.map(String.init) ?? $0 }.joined(separator: " and ")) now.\n"
            writeStderr(text)
        }
    }
}

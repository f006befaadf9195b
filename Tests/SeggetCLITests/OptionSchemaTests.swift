import ArgumentParser
import Foundation
import Segget
import SeggetRPC
import Testing

@testable import segget

/// Every per-file option of ``OptionSchema`` reaches every entry point it claims (the command line,
/// `segget add`, an input file's lines, aria2's RPC options and `getOption`), with the same value and
/// the same refusal sentence, and README's table is the schema's. A new option added to the schema
/// fails here until each entry point takes it or says why not.
@Suite struct OptionSchemaTests {
    static let url = "http://127.0.0.1:9/x"
    static let sha = "sha256=" + String(repeating: "ab", count: 32)

    /// A good value and a bad one per option; every option needs both (checked below).
    static let samples: [String: (good: String, bad: String)] = [
        "dir": ("/tmp", "a\u{0}b"),
        "out": ("f.iso", "a/b"),
        "checksum": (sha, "sha256=12"),
        "header": ("X-A: 1", "NoColon"),
        "user-agent": ("UA/1", "a\u{0}b"),
        "referer": ("http://r/", "a\u{0}b"),
        "all-proxy": ("http://p:3128", "a\u{0}b"),
        "split": ("4", "0"),
        "max-download-limit": ("2M", "100"),
        "max-connection-per-server": ("4", "17"),
        "max-tries": ("2", "1000001"),
        "retry-wait": ("2.5", "601"),
        "timeout": ("2", "0"),
        "connect-timeout": ("3", "ten"),
    ]

    static func schemaOptions(_ spec: OptionSpec, _ value: String) throws -> FileOptions {
        try FileOptions(fields: [(spec.key, [value])])
    }

    static func flag(_ spec: OptionSpec) -> String { "--" + spec.long! }

    static let policy = RPCPolicy(root: "/", allowAnyDirectory: true)

    /// A request names one host: a second `Host` header is refused wherever headers are given (libcurl
    /// sent the first only, the second dropped without a word). Other headers may repeat.
    @Test func hostIsGivenOnce() throws {
        var o = FileOptions()
        try OptionSchema.header.apply("Host: a.example", &o)
        try OptionSchema.header.apply("X-A: 1", &o)
        try OptionSchema.header.apply("X-A: 2", &o)
        #expect(throws: OptionError.self) { try OptionSchema.header.apply("host:b.example", &o) }
        #expect(o.headers == ["Host: a.example", "X-A: 1", "X-A: 2"])
        // An input file's lines, as an entry point that applies them in turn.
        #expect(throws: (any Error).self) { try InputFile(parsing: "\(Self.url)\n  header=Host: a.example\n  header=host: b.example\n") }
    }

    /// Two different digests of one algorithm are refused where they are given (the download ran to
    /// its end and failed the check, exit 6); the same one twice is one; two algorithms are both kept.
    @Test func checksumsOfOneAlgorithmMustAgree() throws {
        let other = "sha-256=" + String(repeating: "cd", count: 32)
        let md5 = "md5=" + String(repeating: "0f", count: 16)
        var o = FileOptions()
        try OptionSchema.checksum.apply(Self.sha, &o)
        try OptionSchema.checksum.apply(Self.sha.uppercased().replacingOccurrences(of: "SHA256", with: "sha-256"), &o)
        try OptionSchema.checksum.apply(md5, &o)
        #expect(o.checksums.map(\.algorithm) == [.sha256, .md5])
        #expect(throws: OptionError.self) { try OptionSchema.checksum.apply(other, &o) }
        #expect(o.checksums.count == 2)
        #expect(throws: (any Error).self) { try Get.parse(["--checksum", Self.sha, "--checksum", other, Self.url]).downloadOptions() }
        #expect(throws: (any Error).self) { try InputFile(parsing: "\(Self.url)\n  checksum=\(Self.sha)\n  checksum=\(other)\n") }
        #expect(try Get.parse(["--checksum", Self.sha, "--checksum", Self.sha, Self.url]).downloadOptions().checksums.count == 1)
    }

    /// aria2's names for the retries and time limits reach the download as the command line's flags
    /// would set them: `max-tries` counts the first try (0: no limit), `timeout` is the stall timeout.
    @Test func retriesAndTimeLimitsReachTheDownload() throws {
        let o = DownloadOptions().applying(
            try FileOptions(fields: [("max-tries", ["2"]), ("retry-wait", ["0.5"]), ("timeout", ["3"]), ("connect-timeout", ["4"])]))
        #expect(o.retries == 1 && o.retryWait == 0.5 && o.transfer.stallTimeout == 3 && o.transfer.connectTimeout == 4)
        #expect(try Get.parse(["--retries", "1", "--retry-wait", "0.5", "--stall-timeout", "3", "--connect-timeout", "4", Self.url])
            .downloadOptions() == o)
        let unlimited = DownloadOptions().applying(try FileOptions(fields: [("max-tries", ["0"]), ("retry-wait", ["0"])]))
        #expect(unlimited.retries == OptionSchema.unlimitedRetries && unlimited.retryWait == 1)
        // Unset, the defaults stay; written back without a fraction where there is none.
        #expect(DownloadOptions().applying(FileOptions()) == DownloadOptions())
        #expect(OptionSchema.timeout.values(try FileOptions(fields: [("timeout", ["20.0"])])) == ["20"])
    }

    @Test func everyOptionHasSamplesAndEveryAbsenceAReason() {
        #expect(Set(Self.samples.keys) == Set(OptionSchema.all.map(\.key)))
        #expect(Set(OptionSchema.all.map(\.key)).count == OptionSchema.all.count)
        for spec in OptionSchema.all {
            for reason in spec.absent.values { #expect(reason.hasSuffix("."), "\(spec.key)") }
            if spec.isGiven(at: .commandLine) || spec.isGiven(at: .add) { #expect(spec.long != nil, "\(spec.key)") }
            #expect(spec.help.hasSuffix("."), "\(spec.key)")
        }
    }

    @Test(arguments: OptionSchema.all.map(\.key))
    func commandLineTakesIt(_ key: String) throws {
        let spec = try #require(OptionSchema.spec(key))
        guard spec.isGiven(at: .commandLine) else { return }
        let value = Self.samples[key]!.good
        #expect(Get.helpMessage().contains(Self.flag(spec) + " <"), "\(key) missing from segget --help")
        let base = try Get.parse([Self.url]).downloadOptions()
        let got = try Get.parse([Self.flag(spec), value, Self.url]).downloadOptions()
        #expect(got == base.applying(try Self.schemaOptions(spec, value)), "\(key)")
        #expect(got != base, "\(key) changed nothing")
    }

    @Test(arguments: OptionSchema.all.map(\.key))
    func addSendsItByItsAria2Name(_ key: String) throws {
        let spec = try #require(OptionSchema.spec(key))
        guard spec.isGiven(at: .add) else { return }
        let value = Self.samples[key]!.good
        #expect(Add.helpMessage().contains(Self.flag(spec) + " <"), "\(key) missing from segget add --help")
        let sent = try Add.parse([Self.flag(spec), value, Self.url]).aria2Options()
        let written = spec.values(try Self.schemaOptions(spec, value))
        let expected: JSON = spec.repeatable ? .array(written.map(JSON.string)) : .string(written[0])
        #expect(sent[key] == expected, "\(key): \(sent.serialized)")
    }

    @Test(arguments: OptionSchema.all.map(\.key))
    func inputFileReadsItOrRefusesIt(_ key: String) throws {
        let spec = try #require(OptionSchema.spec(key))
        let value = Self.samples[key]!.good
        let text = "\(Self.url)\n  \(key)=\(value)\n"
        if spec.isGiven(at: .inputFile) {
            #expect(InputFile.optionNames.contains(key))
            #expect(try InputFile(parsing: text).entries[0].options == Self.schemaOptions(spec, value))
        } else {
            #expect(!InputFile.optionNames.contains(key))
            #expect(throws: InputFileError.self) { try InputFile(parsing: text) }
        }
    }

    @Test(arguments: OptionSchema.all.map(\.key))
    func rpcReadsItAndAnswersIt(_ key: String) throws {
        let spec = try #require(OptionSchema.spec(key))
        #expect(spec.isGiven(at: .rpc), "every per-file option is an aria2 option")
        let value = Self.samples[key]!.good
        let parsed = try Aria2TaskOptions.parse(.object([(key, .string(value))]), policy: Self.policy)
        let expected = try Self.schemaOptions(spec, value)
        #expect(parsed.options == expected, "\(key)")
        // getOption answers it under the same name, as the schema writes it.
        let entry = try #require(Aria2OptionTable.entries.first { $0.name == key }, "\(key) not in the aria2 table")
        #expect(entry.perDownload)
        guard case .mapped = entry.source else { Issue.record("\(key) answered as a fixed value"); return }
        let answer = Aria2OptionTable.download(
            .init(options: expected, directory: expected.directory ?? "/srv"),
            .init(settings: .init(downloadRoot: "/srv")))
        let text = spec.values(expected)
        #expect(answer[key]?.stringValue == (spec.repeatable && key == "header" ? text.map { $0 + "\n" }.joined() : text[0]))
    }

    /// The same bad value gets the same sentence from the command line, `segget add`, an input file
    /// and the daemon's RPC.
    @Test(arguments: OptionSchema.all.map(\.key))
    func oneRefusalSentenceEverywhere(_ key: String) throws {
        let spec = try #require(OptionSchema.spec(key))
        let bad = Self.samples[key]!.bad
        let refusal: OptionError
        do {
            _ = try spec.check(bad)
            Issue.record("\(key) accepted '\(bad)'")
            return
        } catch {
            refusal = error
        }
        #expect(refusal.message.hasSuffix("."))
        if spec.isGiven(at: .commandLine) {
            // The download command's -n adds "or 'auto'" to the sentence; every other option's is the same.
            let sentence = String(refusal.reason.dropLast())
            #expect(parseFailure([Self.flag(spec), bad, Self.url])?.contains(": " + sentence) == true, "\(key)")
        }
        if spec.isGiven(at: .add) {
            do {
                _ = try Add.parse([Self.flag(spec), bad, Self.url])
                Issue.record("segget add accepted \(key) '\(bad)'")
            } catch {
                #expect(Add.message(for: error).hasSuffix(": " + refusal.reason), "\(key)")
            }
        }
        if spec.isGiven(at: .inputFile) {
            #expect {
                try InputFile(parsing: "\(Self.url)\n  \(key)=\(bad)\n")
            } throws: { error in
                (error as? InputFileError) == InputFileError(line: 2, message: refusal.message)
            }
        }
        do {
            _ = try Aria2TaskOptions.parse(.object([(key, .string(bad))]), policy: Self.policy)
            Issue.record("RPC accepted \(key) '\(bad)'")
        } catch {
            #expect(error.message == "option \(key): \(refusal.message)")
        }
    }

    /// README's table of per-file options, as the schema gives it.
    static func readmeTable() -> String {
        func place(_ spec: OptionSpec, _ entry: OptionEntryPoint, _ given: String) -> String {
            spec.isGiven(at: entry) ? given : "—"
        }
        var lines = [
            "| option | `segget URL` | `segget add` | `-i` file line | aria2 RPC | meaning |",
            "|---|---|---|---|---|---|",
        ]
        for spec in OptionSchema.all {
            let flag = (spec.short.map { "`-\($0)`, " } ?? "") + "`--\(spec.long ?? "")`"
            lines.append(
                "| `\(spec.key)` | \(place(spec, .commandLine, flag)) | \(place(spec, .add, flag)) | "
                    + "\(place(spec, .inputFile, "`\(spec.key)=`")) | \(place(spec, .rpc, "`\(spec.key)`")) | \(spec.help) |")
        }
        return lines.joined(separator: "\n")
    }

    @Test func readmeListsTheSchema() throws {
        var parts = String(#filePath).split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        let readme = try String(contentsOfFile: parts.joined(separator: "/") + "/README.md", encoding: .utf8)
        let table = Self.readmeTable()
        #expect(readme.contains(table), "README.md's per-file options table should read:\n\(table)")
    }
}

import ArgumentParser
import Segget
import SeggetVerify
import Testing

@testable import segget

/// The message segget prints for a parse failure (main.swift adds "segget: " and the help hint).
func parseFailure(_ arguments: [String]) -> String? {
    do {
        _ = try Get.parse(arguments)
        return nil
    } catch {
        return Get.message(for: error)
    }
}

@Suite struct DownloadOptionsFromArgumentsTests {
    let url = "http://127.0.0.1:9/x"

    @Test func noOptionsGiveTheLibraryDefaults() throws {
        #expect(try Get.parse([url]).downloadOptions() == DownloadOptions())
    }

    @Test func everyOptionLandsInItsField() throws {
        let md5 = "md5=" + String(repeating: "a", count: 32)
        let get = try Get.parse([
            "-n", "12", "--mirror", "http://m/x", "--chunk-size", "256k", "--max-speed", "20M", "-o", "out.bin", "-f",
            "--no-continue", "--checksum", md5, "--retries", "7", "--retry-wait", "2", "--connect-timeout", "3",
            "--stall-timeout", "4", "--timeout", "60", "--max-retry-wait", "30", "-H", "X-A: 1", "-H", "X-B: 2", "-A",
            "UA/1", "-e", "http://ref/", "--proxy", "http://proxy:3128", "-k", "-u", "u:p", "--netrc", "-b", "c=1",
            "--http2", "--allow-insecure-redirect", "--sync-interval", "9", "--fsync", "--write-path", "direct", url,
        ])
        var expected = DownloadOptions()
        expected.connections = 12
        expected.mirrors = ["http://m/x"]
        expected.chunkSize = 256 << 10
        expected.maxSpeed = 20 << 20
        expected.outputPath = "out.bin"
        expected.force = true
        expected.resume = false
        expected.checksums = [try ExpectedDigest(parsing: md5)]
        expected.retries = 7
        expected.retryWait = 2
        expected.timeout = 60
        expected.maxRetryWait = 30
        expected.checkpointInterval = 9
        expected.syncBeforeRename = true
        expected.writePath = .direct
        expected.transfer.connectTimeout = 3
        expected.transfer.stallTimeout = 4
        expected.transfer.headers = ["X-A: 1", "X-B: 2"]
        expected.transfer.userAgent = "UA/1"
        expected.transfer.referer = "http://ref/"
        expected.transfer.proxy = "http://proxy:3128"
        expected.transfer.insecure = true
        expected.transfer.credentials = "u:p"
        expected.transfer.useNetrc = true
        expected.transfer.cookie = "c=1"
        expected.transfer.http2 = true
        expected.transfer.allowInsecureRedirect = true
        #expect(try get.downloadOptions() == expected)
    }

    @Test func autoConnections() throws {
        let o = try Get.parse(["-n", "auto", url]).downloadOptions()
        #expect(o.connections == ConnectionCount.autoCap && o.autoConnections)
        #expect(try Get.parse(["--connections", "AUTO", url]).downloadOptions().autoConnections)
    }

    @Test func directoryNoVerifyAndHiddenSwitches() throws {
        let o = try Get.parse(["-d", "dl", "--no-verify", "--buffered-io", "--no-fsync", url]).downloadOptions()
        #expect(o.directory == "dl" && o.outputPath == nil)
        #expect(!o.verifyServerDigests)
        #expect(o.writePath == .pageCache)
        #expect(!o.syncBeforeRename)
    }

    @Test func batchSettingsStayOnTheCommand() throws {
        let get = try Get.parse(["-j", "4", "--total-connections", "40", "--skip-existing", "--json", "-q", url, url])
        #expect(get.connection.jobs == 4)
        #expect(get.connection.totalConnections == 40)
        #expect(get.output.skipExisting)
        #expect(get.format.json && get.format.quiet)
    }

    @Test func batchEntryAndBudgetGoThroughTheSameOverrides() throws {
        let get = try Get.parse(["-n", "8", "-H", "A: 1", "-e", "http://cli/", "-i", "list"])
        let file = try InputFile(parsing: "http://a/x\thttp://b/x\n  dir=sub\n  header=B: 2\n  referer=http://list/\n")
        let batch = Batch(
            entries: file.entries, base: try get.downloadOptions(), jobs: 4, totalConnections: 16, listMode: true,
            planPaths: true, skipExisting: false, checksumFile: nil)
        let o = batch.options(for: file.entries[0])
        #expect(o.connections == 8)  // min(-n, 16 / min(4, 1 file))
        #expect(o.directory == "sub")
        #expect(o.mirrors == ["http://b/x"])
        #expect(o.transfer.headers == ["A: 1", "B: 2"])
        #expect(o.transfer.referer == "http://list/")
    }

    /// With `--http2` and more than one file at once, the batch multiplexes: `-j` counts connections,
    /// on one loop, the files in flight from the start spread evenly over them (at most 32 streams
    /// each); files started beyond the first `-j` probe for 64 KiB only, and a file larger than 1 MiB
    /// (or of no known size) that its probe did not bring whole is large. Without `--http2`, or at
    /// `-j 1`, nothing changes.
    @Test func http2BatchSharesConnectionsAndRunsMoreFilesAtOnce() throws {
        let file = try InputFile(parsing: (0..<400).map { "https://a/\($0)" }.joined(separator: "\n"))
        func batch(_ args: [String], jobs: Int, entries: Int = 400) throws -> Batch {
            Batch(
                entries: Array(file.entries.prefix(entries)), base: try Get.parse(args + ["-i", "list"]).downloadOptions(),
                jobs: jobs, totalConnections: nil, listMode: true, planPaths: true, skipExisting: false, checksumFile: nil)
        }
        let h2 = try batch(["--http2"], jobs: 16)
        #expect(h2.multiplexes)
        #expect(h2.parallelFiles == 16)
        #expect(h2.parallelFilesOverHTTP2 == 400)  // 16 × 32 = 512, but 400 files
        #expect(try batch(["--http2"], jobs: 4).parallelFilesOverHTTP2 == 128)
        #expect(h2.loopLimit(cpus: 4) == 1)
        #expect(h2.http2Sharing(loops: 1)?.streams == 25)  // 400 files over 16 connections
        #expect(h2.http2Sharing(loops: 1)?.connections == 16)
        #expect(try batch(["--http2"], jobs: 4).http2Sharing(loops: 1)?.streams == 32)
        #expect(try batch(["--http2"], jobs: 16, entries: 40).http2Sharing(loops: 1)?.streams == 3)
        #expect(!h2.speculative(inFlight: 15) && h2.speculative(inFlight: 16) && h2.speculative(inFlight: 399))
        #expect(Batch.speculativeProbeBytes == 64 << 10)
        #expect(!Batch.isLarge(totalBytes: 64 << 10, whole: true))
        #expect(!Batch.isLarge(totalBytes: 1 << 20, whole: false))  // the rest of a file of at most 1 MiB
        #expect(Batch.isLarge(totalBytes: (1 << 20) + 1, whole: false))
        #expect(Batch.isLarge(totalBytes: nil, whole: false))
        #expect(h2.options(for: file.entries[0]).transfer.multiplexed)
        #expect(try batch(["--http2"], jobs: 16, entries: 40).parallelFilesOverHTTP2 == 40)
        let h1 = try batch([], jobs: 16)
        #expect(!h1.multiplexes)
        #expect(h1.parallelFilesOverHTTP2 == 16)
        #expect(!h1.speculative(inFlight: 16))
        #expect(h1.http2Sharing(loops: 1) == nil)
        #expect(!h1.options(for: file.entries[0]).transfer.multiplexed)
        let one = try batch(["--http2"], jobs: 1)
        #expect(!one.multiplexes)
        #expect(one.parallelFilesOverHTTP2 == 1)
    }

    /// `-j N` above 16 is what it says without `--total-connections` beside it: N files at once,
    /// or with `--http2` N connections (before, the default budget of 16 held both at 16). An
    /// explicit `--total-connections` still caps them.
    @Test func jobsAbove16RaiseTheDefaultBudget() throws {
        let file = try InputFile(parsing: (0..<400).map { "https://a/\($0)" }.joined(separator: "\n"))
        func batch(_ args: [String], jobs: Int, total: Int? = nil) throws -> Batch {
            Batch(
                entries: file.entries, base: try Get.parse(args + ["-i", "list"]).downloadOptions(),
                jobs: jobs, totalConnections: total, listMode: true, planPaths: true, skipExisting: false, checksumFile: nil)
        }
        let h2 = try batch(["--http2"], jobs: 32)
        #expect(h2.budget == 32)
        #expect(h2.multiplexedConnections == 32)
        #expect(h2.http2Sharing(loops: 1)?.connections == 32)
        #expect(h2.http2Sharing(loops: 1)?.streams == 13)  // 400 files over 32 connections
        let h1 = try batch(["-n", "8"], jobs: 24)
        #expect(h1.parallelFiles == 24)
        #expect(h1.connectionsPerFile == 1)
        let capped = try batch(["--http2"], jobs: 32, total: 16)
        #expect(capped.multiplexedConnections == 16)
        #expect(try batch(["-n", "8"], jobs: 32, total: 16).parallelFiles == 16)
        // At most 16 files, the default is as before: the larger of 16 and -n.
        #expect(try batch(["-n", "8"], jobs: 4).budget == 16)
        #expect(try batch(["-n", "20"], jobs: 4).budget == 20)
        #expect(try batch(["-n", "8"], jobs: 4).connectionsPerFile == 4)
    }

    /// `--max-connections-per-host` caps a multiplexing batch's connections, not its streams: each
    /// of the capped connections carries up to 32 files, and once a host answered over HTTP/2 its
    /// requests in flight are capped at the streams those connections carry (before,
    /// `--max-connections-per-host 16 -j 16 --http2` let 16 files through at a time where 400 went
    /// without it: 3.7 s against 1.2 s through WAN link a). Where nothing multiplexes there is no
    /// such cap: the option's number is the requests in flight.
    @Test func connectionCapOfAMultiplexingBatchCountsConnections() throws {
        let file = try InputFile(parsing: (0..<400).map { "https://a/\($0)" }.joined(separator: "\n"))
        func batch(_ args: [String], jobs: Int, cap: Int?) throws -> Batch {
            var b = Batch(
                entries: file.entries, base: try Get.parse(args + ["-i", "list"]).downloadOptions(),
                jobs: jobs, totalConnections: nil, listMode: true, planPaths: true, skipExisting: false, checksumFile: nil)
            b.maxConnectionsPerHost = cap
            return b
        }
        let two = try batch(["--http2"], jobs: 16, cap: 2)
        #expect(two.multiplexedConnections == 2)
        #expect(two.http2Sharing(loops: 1)?.connections == 2)
        #expect(two.http2Sharing(loops: 1)?.streams == 32)
        #expect(two.parallelFilesOverHTTP2 == 64)
        #expect(two.requestsPerHostOverHTTP2 == 64)
        let same = try batch(["--http2"], jobs: 16, cap: 16)
        #expect(same.http2Sharing(loops: 1)?.connections == 16)
        #expect(same.http2Sharing(loops: 1)?.streams == 25)
        #expect(same.parallelFilesOverHTTP2 == 400)
        #expect(same.requestsPerHostOverHTTP2 == 400)  // as many as without the cap
        let above = try batch(["--http2"], jobs: 16, cap: 100)
        #expect(above.multiplexedConnections == 16)
        #expect(above.requestsPerHostOverHTTP2 == 400)
        #expect(try batch(["--http2"], jobs: 16, cap: nil).requestsPerHostOverHTTP2 == nil)
        #expect(try batch(["--http2"], jobs: 16, cap: nil).multiplexedConnections == 16)
        #expect(try batch([], jobs: 16, cap: 3).requestsPerHostOverHTTP2 == nil)  // HTTP/1.1: requests are connections
        #expect(try batch(["--http2"], jobs: 1, cap: 3).requestsPerHostOverHTTP2 == nil)  // one file at a time: no sharing
    }

    /// An entry's `split=` lowers its connections below its share of the budget, never above it; its
    /// other lines (aria2's names) land where the command line's options would.
    @Test func batchEntryTakesEveryInputFileOption() throws {
        let get = try Get.parse(["-n", "8", "-i", "list"])
        let file = try InputFile(
            parsing: """
                http://a/x
                  split=2
                  max-download-limit=1M
                  user-agent=UA/2
                  all-proxy=http://p:3128
                http://a/y
                  split=64
                """)
        let batch = Batch(
            entries: file.entries, base: try get.downloadOptions(), jobs: 2, totalConnections: 8, listMode: true,
            planPaths: true, skipExisting: false, checksumFile: nil)
        let x = batch.options(for: file.entries[0])
        #expect(x.connections == 2)
        #expect(x.maxSpeed == 1 << 20)
        #expect(x.transfer.userAgent == "UA/2")
        #expect(x.transfer.proxy == "http://p:3128")
        #expect(batch.options(for: file.entries[1]).connections == 4)  // its share: 8 / 2 files
    }
}

@Suite struct ArgumentErrorTests {
    let url = "http://127.0.0.1:9/x"

    @Test(arguments: [
        (["-n", "0"], "The value '0' is invalid for '-n <n>': too few connections; give a number from 1 to 128 or 'auto'."),
        (["-n", "500"], "The value '500' is invalid for '-n <n>': too many connections; give a number from 1 to 128 or 'auto'."),
        (["-n", "abc"], "The value 'abc' is invalid for '-n <n>': not a number of connections; give a number from 1 to 128 or 'auto'."),
        (["--chunk-size", "8k"], "The value '8k' is invalid for '--chunk-size <chunk-size>': too small; give a size from 16k to 1G."),
        (["--chunk-size", "2G"], "The value '2G' is invalid for '--chunk-size <chunk-size>': too large; give a size from 16k to 1G."),
        (
            ["--chunk-size", "big"],
            "The value 'big' is invalid for '--chunk-size <chunk-size>': not a size; give a number of bytes with an optional unit k, M, G or T (powers of 1024), such as 512k, 1M or 1.5G."
        ),
        (["--max-speed", "100"], "The value '100' is invalid for '--max-speed <max-speed>': too slow; give a rate of at least 1k, such as 20M, or 0 for no cap."),
        (
            ["--max-speed", "fast"],
            "The value 'fast' is invalid for '--max-speed <max-speed>': not a rate; give bytes per second with an optional unit k, M or G (powers of 1024), such as 512k, 20M or 1.5G. 0 means no cap."
        ),
        (["--write-path", "fast"], "The value 'fast' is invalid for '--write-path <write-path>': give adaptive, direct or page-cache."),
        (["--retry-wait", "soon"], "The value 'soon' is invalid for '--retry-wait <retry-wait>': not a number of seconds; give a number such as 5 or 0.5."),
        (["-j", "two"], "The value 'two' is invalid for '-j <jobs>': not a whole number; give one such as 1 or 8."),
        // A negative number is the option's value, judged as such, not "Missing value" (it looks
        // like an option to the parser unless the option takes whatever follows it).
        (["-n", "-1"], "The value '-1' is invalid for '-n <n>': too few connections; give a number from 1 to 128 or 'auto'."),
        (["-j", "-3"], "-j takes a number from 1 to 32 (got -3)."),
        (["--max-speed", "-5"], "The value '-5' is invalid for '--max-speed <max-speed>': not a rate; give bytes per second with an optional unit k, M or G (powers of 1024), such as 512k, 20M or 1.5G. 0 means no cap."),
        (["--retry-wait", "-2"], "--retry-wait must be between 0 and 3600 seconds."),
        // Numbers that do not fit libcurl's milliseconds once stopped the program (SIGILL).
        (["--timeout", "inf"], "The value 'inf' is invalid for '--timeout <timeout>': not a number of seconds; give a number such as 5 or 0.5."),
        (["--timeout", "nan"], "The value 'nan' is invalid for '--timeout <timeout>': not a number of seconds; give a number such as 5 or 0.5."),
        (["--timeout", "1e20"], "The value '1e20' is invalid for '--timeout <timeout>': too long; give at most 1000000000 seconds (about 31 years)."),
        (["--stall-timeout", "inf"], "The value 'inf' is invalid for '--stall-timeout <stall-timeout>': not a number of seconds; give a number such as 5 or 0.5."),
        (["--connect-timeout", "1e20"], "The value '1e20' is invalid for '--connect-timeout <connect-timeout>': too long; give at most 1000000000 seconds (about 31 years)."),
    ] as [([String], String)])
    func badValueSaysWhatIsWrongAndWhatIsAccepted(_ arguments: [String], _ message: String) {
        #expect(parseFailure(arguments + [url]) == message)
    }

    @Test(arguments: [
        (["-j", "0"], "-j takes a number from 1 to 32 (got 0)."),
        (["--total-connections", "600"], "--total-connections takes a number from 1 to 512 (got 600)."),
        (["-f", "--skip-existing"], "give either --force or --skip-existing, not both."),
        (["-o", "a", "-d", "b"], "give either -o FILE or -d DIR, not both."),
        (["--retries", "101"], "--retries must be between 0 and 100."),
        (["--sync-interval", "0"], "--sync-interval must be a positive number of seconds."),
        (["--connect-timeout", "0"], "--connect-timeout must be a positive number of seconds."),
        (["--stall-timeout", "-1"], "--stall-timeout must be a number of seconds, or 0 to turn the check off."),
        (["--fsync", "--no-fsync"], "give either --fsync or --no-fsync, not both."),
        (["-H", "nocolon"], "The value 'nocolon' is invalid for '-H <header>': The header 'nocolon' is not of the form 'Name: value'."),
        (["-H", "Range: bytes=5-"], "The value 'Range: bytes=5-' is invalid for '-H <header>': segget sends Range itself: it asks each connection for its own bytes and resumes only the same file; drop that header."),
        (["-H", "if-range: \"x\""], "The value 'if-range: \"x\"' is invalid for '-H <header>': segget sends if-range itself: it asks each connection for its own bytes and resumes only the same file; drop that header."),
        (["--no-verify", "--checksum-file", "f"], "--no-verify cannot be combined with --checksum or --checksum-file."),
        (["--timeout", "0"], "--timeout must be a positive number of seconds."),
        (["--mirror", "http://m/", "http://127.0.0.1:9/y"], "--mirror applies to one file; with several URLs put mirrors on the URL's line in an input file, separated by tabs."),
    ] as [([String], String)])
    func combinationsKeepTheirMessages(_ arguments: [String], _ message: String) {
        #expect(parseFailure(arguments + [url]) == message)
    }
}

@Suite struct HelpTests {
    @Test func groupsHaveTitlesAndHiddenOptionsStayHidden() {
        let help = SeggetCommand.helpMessage(for: Get.self, columns: 200)
        for title in [
            "CONNECTIONS AND SCHEDULING:", "OUTPUT:", "OUTPUT FORMAT:", "VERIFICATION:", "RETRIES AND TIME LIMITS:",
            "HTTP REQUESTS:", "NETWORK:", "DURABILITY AND I/O:", "STREAMING TO STANDARD OUTPUT:",
        ] {
            #expect(help.contains(title), "\(title) missing")
        }
        #expect(!help.contains("--no-fsync"))
        #expect(!help.contains("--buffered-io"))
        // Each default is given once, in the option's own sentence.
        #expect(!help.contains(". (default: "), "\(help)")
        for option in ["--connections <n>", "--chunk-size <chunk-size>", "--max-speed <max-speed>", "--input-file"] {
            #expect(help.contains(option), "\(option) missing")
        }
    }
}

@Suite struct AddArgumentsTests {
    @Test func sharedRequestGroupAndTypedValuesBecomeAria2Options() throws {
        let add = try Add.parse([
            "-n", "4", "--max-speed", "2M", "-H", "A: 1", "-A", "UA", "-e", "http://r/", "--proxy", "http://p/",
            "http://x/f",
        ])
        #expect(
            try add.aria2Options()
                == .object([
                    ("header", .array([.string("A: 1")])), ("user-agent", .string("UA")), ("referer", .string("http://r/")),
                    ("all-proxy", .string("http://p/")), ("split", .string("4")),
                    ("max-download-limit", .string(String(2 << 20))), ("max-connection-per-server", .string("4")),
                ]))
    }

    @Test func addRefusesAutoAndBadRates() {
        for (arguments, message) in [
            (["-n", "auto"], "The value 'auto' is invalid for '-n <n>': not a number of connections; give a number from 1 to 128."),
            (["--max-speed", "x"], "The value 'x' is invalid for '--max-speed <max-speed>': not a rate; give bytes per second with an optional unit k, M or G (powers of 1024), such as 512k, 20M or 1.5G. 0 means no cap."),
        ] {
            do {
                _ = try Add.parse(arguments + ["http://x/f"])
                Issue.record("\(arguments) accepted")
            } catch {
                #expect(Add.message(for: error) == message)
            }
        }
    }
}

@Suite struct DaemonArgumentsTests {
    /// A negative number is judged as the option's value, here as in `get` (not "Missing value"),
    /// and a client verb's port is checked as the daemon's is.
    @Test func negativeNumbersAreValuesThatGetTheirRange() {
        for (arguments, message) in [
            (["--max-concurrent-downloads", "-1"], "--max-concurrent-downloads takes a number from 1 to 64 (got -1)."),
            (["--rpc-listen-port", "-5"], "--rpc-listen-port takes a port from 1 to 65535 (got -5)."),
        ] {
            do {
                _ = try Daemon.parse(arguments)
                Issue.record("\(arguments) accepted")
            } catch {
                #expect(Daemon.message(for: error) == message)
            }
        }
        for port in ["-1", "0", "70000"] {
            do {
                _ = try Add.parse(["--rpc-port", port, "http://x/f"])
                Issue.record("--rpc-port \(port) accepted")
            } catch {
                #expect(Add.message(for: error) == "--rpc-port takes a port from 1 to 65535 (got \(port)).")
            }
        }
    }

    @Test func overallLimitIsARate() throws {
        #expect(try Daemon.parse(["--max-overall-download-limit", "20M"]).maxOverall == ByteRate(bytesPerSecond: 20 << 20))
        #expect(try Daemon.parse([]).maxOverall == nil)
        do {
            _ = try Daemon.parse(["--max-overall-download-limit", "lots"])
            Issue.record("accepted")
        } catch {
            #expect(Daemon.message(for: error).contains("'lots' is invalid"))
            #expect(Daemon.message(for: error).hasSuffix(": not a rate; give bytes per second with an optional unit k, M or G (powers of 1024), such as 512k, 20M or 1.5G."))
        }
    }

    /// The per-host cap (aria2's 1-16) and the speed schedule: read, and refused with a sentence.
    @Test func perHostCapAndScheduleAreChecked() throws {
        #expect(try Daemon.parse(["--max-connections-per-host", "3"]).maxConnectionsPerHost == 3)
        // Not given: the queue's default (16) or what a client stored (`useStoredGlobals`).
        #expect(try Daemon.parse([]).maxConnectionsPerHost == nil)
        #expect(try Daemon.parse(["--speed-schedule", "08:00-18:00=2M,18:00-08:00=0"]).speedSchedule != nil)
        for (arguments, words) in [
            (["--max-connections-per-host", "17"], "from 1 to 16"), (["--speed-schedule", "8-9=1M"], "HH:MM"),
            (["--speed-schedule", "08:00-12:00=1M,11:00-13:00=2M"], "overlap"),
        ] {
            do {
                _ = try Daemon.parse(arguments)
                Issue.record("accepted \(arguments)")
            } catch {
                #expect(Daemon.message(for: error).contains(words), "\(Daemon.message(for: error))")
            }
        }
        #expect(parseFailure(["--max-connections-per-host", "0", "http://127.0.0.1:9/x"])?.contains("from 1 to 128") == true)
        let get = try Get.parse(["--max-connections-per-host", "4", "-j", "8", "http://127.0.0.1:9/x"])
        #expect(try get.parsedRequest().maxConnectionsPerHost == 4)
    }

    @Test func helpGivesEachDefaultOnce() {
        let help = SeggetCommand.helpMessage(for: Daemon.self, columns: 200)
        #expect(!help.contains(". (default: "), "\(help)")
    }
}

import Testing

@testable import Segget

@Suite struct ByteSizeValueTests {
    @Test(arguments: [
        ("4096", 4096), ("1k", 1024), ("512K", 512 * 1024), ("1M", 1 << 20), ("20MiB", 20 << 20), ("1.5G", 3 << 29),
        ("2T", 2 << 40), ("1MB", 1 << 20), ("0", 0), (" 64k ", 64 << 10), ("1m/s", 1 << 20),
    ] as [(String, Int64)])
    func parses(_ text: String, _ bytes: Int64) throws {
        #expect(try ByteSize(parsing: text) == ByteSize(bytes))
    }

    @Test(arguments: ["", "abc", "1X", "-1M", "1..5M", "M", "1 M M", "1e3", "9999999T", "0x10"])
    func refusesAndSaysWhatIsAccepted(_ text: String) {
        #expect(throws: ArgumentValueError.self) { try ByteSize(parsing: text) }
        do {
            _ = try ByteSize(parsing: text)
        } catch {
            #expect(error.description.hasPrefix("'\(text)' is not a size; give "))
            #expect(error.description.contains("512k, 1M or 1.5G"))
        }
    }

    @Test func rangeCheckNamesTheBounds() throws {
        let range = ByteSize.kibibytes(16)...ByteSize.gibibytes(1)
        #expect(try ByteSize(parsing: "1M").checked(in: range) == .mebibytes(1))
        #expect(try ByteSize(parsing: "16k").checked(in: range) == .kibibytes(16))
        #expect(try ByteSize(parsing: "1G").checked(in: range) == .gibibytes(1))
        #expect(throws: ArgumentValueError(value: "8k", problem: "too small", accepted: "a size from 16k to 1G")) {
            try ByteSize(parsing: "8k").checked(in: range)
        }
        #expect(throws: ArgumentValueError(value: "2G", problem: "too large", accepted: "a size from 16k to 1G")) {
            try ByteSize(parsing: "2G").checked(in: range)
        }
        #expect(
            ArgumentValueError(value: "2G", problem: "too large", accepted: "a size from 16k to 1G").description
                == "'2G' is too large; give a size from 16k to 1G.")
    }

    @Test(arguments: [(0, "0"), (1023, "1023"), (1024, "1k"), (1536, "1536"), (3 << 19, "1536k"), (1 << 20, "1M"),
        (1 << 30, "1G"), (5 << 40, "5T")] as [(Int64, String)])
    func descriptionIsShortAndReadsBack(_ bytes: Int64, _ text: String) throws {
        #expect(ByteSize(bytes).description == text)
        #expect(try ByteSize(parsing: text).bytes == bytes)
    }

    @Test func parseByteSizeStillAgrees() {
        for text in ["1M", "512k", "1.5G", "x", "", "20MiB/s"] {
            #expect(parseByteSize(text) == (try? ByteSize(parsing: text))?.bytes)
        }
    }
}

@Suite struct ByteRateTests {
    @Test func parsesSizesPerSecond() throws {
        #expect(try ByteRate(parsing: "20M").bytesPerSecond == 20 << 20)
        #expect(try ByteRate(parsing: "512k/s").bytesPerSecond == 512 << 10)
        #expect(try ByteRate(parsing: "0").bytesPerSecond == 0)
        #expect(ByteRate(bytesPerSecond: 2 << 20).description == "2M")
    }

    @Test func refusals() throws {
        #expect(throws: ArgumentValueError.self) { try ByteRate(parsing: "fast") }
        do {
            _ = try ByteRate(parsing: "fast")
        } catch {
            #expect(error.description.hasPrefix("'fast' is not a rate; give bytes per second"))
            #expect(error.reason.hasPrefix("not a rate; give "))
        }
        let slowest = ByteRate(bytesPerSecond: 1024)
        #expect(throws: ArgumentValueError(value: "512", problem: "too slow", accepted: "a rate of at least 1k, such as 20M")) {
            try ByteRate(parsing: "512").checked(atLeast: slowest)
        }
        #expect(try ByteRate(parsing: "1k").checked(atLeast: slowest) == slowest)
    }
}

@Suite struct ConnectionCountTests {
    @Test(arguments: [("1", ConnectionCount.fixed(1)), ("8", .fixed(8)), ("128", .fixed(128)), ("auto", .auto),
        ("AUTO", .auto), ("Auto", .auto)])
    func parses(_ text: String, _ count: ConnectionCount) throws {
        #expect(try ConnectionCount(parsing: text) == count)
        #expect(try ConnectionCount(parsing: count.description) == count)
    }

    @Test(arguments: [
        ("0", "'0' is too few connections; give a number from 1 to 128 or 'auto'."),
        ("129", "'129' is too many connections; give a number from 1 to 128 or 'auto'."),
        ("-3", "'-3' is too few connections; give a number from 1 to 128 or 'auto'."),
        ("abc", "'abc' is not a number of connections; give a number from 1 to 128 or 'auto'."),
        ("", "'' is not a number of connections; give a number from 1 to 128 or 'auto'."),
        ("8.5", "'8.5' is not a number of connections; give a number from 1 to 128 or 'auto'."),
    ])
    func refusals(_ text: String, _ message: String) {
        do {
            _ = try ConnectionCount(parsing: text)
            Issue.record("\(text) was accepted")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func fixedOnlyRefusesAuto() throws {
        #expect(try ConnectionCount.parseFixed("4") == 4)
        do {
            _ = try ConnectionCount.parseFixed("auto")
            Issue.record("auto was accepted")
        } catch {
            #expect(error.description == "'auto' is not a number of connections; give a number from 1 to 128.")
        }
    }

    @Test func mostAndTheOptionsItSets() {
        #expect(ConnectionCount.fixed(5).most == 5)
        #expect(ConnectionCount.auto.most == ConnectionCount.autoCap)
        var o = DownloadOptions()
        #expect(o.connectionCount == .fixed(8))
        o.connectionCount = .auto
        #expect(o.connections == 16 && o.autoConnections)
        o.connectionCount = .fixed(3)
        #expect(o.connections == 3 && !o.autoConnections)
    }
}

@Suite struct FileOptionsApplyTests {
    @Test func emptyOverridesChangeNothing() {
        var base = DownloadOptions()
        base.mirrors = ["http://m/"]
        base.transfer.referer = "http://r/"
        #expect(base.applying(FileOptions()) == base)
    }

    @Test func givenFieldsReplaceAndListsAdd() throws {
        var base = DownloadOptions()
        base.directory = "d"
        base.mirrors = ["http://m1/"]
        base.transfer.headers = ["A: 1"]
        let digest = try ExpectedDigest(parsing: "md5=" + String(repeating: "0", count: 32))
        let o = base.applying(
            FileOptions(
                directory: "e", headers: ["B: 2"], userAgent: "UA", referer: "http://r/", proxy: "http://p/",
                connections: 3, maxSpeed: 1000, checksums: [digest], maxConnectionsPerServer: 2))
        #expect(o.directory == "e")
        #expect(o.mirrors == ["http://m1/"])
        #expect(o.checksums == [digest])
        #expect(o.transfer.headers == ["A: 1", "B: 2"])
        #expect(o.transfer.userAgent == "UA")
        #expect(o.transfer.referer == "http://r/")
        #expect(o.transfer.proxy == "http://p/")
        #expect(o.connections == 3)
        #expect(o.maxSpeed == 1000)
    }

    @Test func inputFileEntryLines() throws {
        let file = try InputFile(parsing: "http://a/x\thttp://b/x\n  dir=sub\n  header=X: y\n  referer=http://r/\n")
        let x = file.entries[0].options
        #expect(x.directory == "sub")
        #expect(file.entries[0].mirrors == ["http://b/x"])
        #expect(x.headers == ["X: y"])
        #expect(x.referer == "http://r/")
        #expect(x.connections == nil && x.maxSpeed == nil)
    }
}

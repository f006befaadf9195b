import ArgumentParser
import Segget
import Testing

@testable import segget

/// The command lines main.swift reads without ArgumentParser must mean what ArgumentParser reads.
@Suite struct QuickParsingTests {
    let url = "http://127.0.0.1:9/x"

    /// ArgumentParser's reading of `arguments`, from the root command as main.swift starts it.
    private func parsed(_ arguments: [String]) throws -> GetRequest {
        let command = try SeggetCommand.parseAsRoot(arguments)
        let get = try #require(command as? Get)
        return try get.parsedRequest()
    }

    @Test func acceptedCommandLinesMeanWhatArgumentParserReads() throws {
        let cases: [[String]] = [
            [url], ["-q", url], [url, "-q"], ["--quiet", url], ["-f", url], ["--force", "-q", url],
            ["-o", "out.bin", url], [url, "-o", "out.bin"], ["--output", "a/b", "-q", url],
            ["-d", "dir", url, "https://example.com/y"], ["--dir", "d", "-f", url],
            [url, "https://example.com/a?b=c&d=-e"], ["-q", "-f", "-o", "x", url], ["-o", "http://not.a/flag", url],
            ["-n", "4", url], ["-n", "8", "-q", "-o", "out.bin", url], ["--connections", "128", url], [url, "-n", "1"],
            ["-i", "list.txt"], ["-q", "-i", "urls.txt", "-j", "16", "-d", "out"], ["--input-file", "l", "--jobs", "32", url],
            ["-j", "1", url, url], ["-i", "l", "-n", "1", "-f"],
            ["-k", url], ["--insecure", "-q", url], ["--http2", url], ["--json", url], [url, "--json", "-k", "--http2"],
            ["-k", "--json", "-i", "list.txt", "-j", "16", "-d", "out", "--http2"], ["--json", "-q", "-o", "x", url],
        ]
        for args in cases {
            let quick = try #require(GetRequest(quickParsing: args), "\(args)")
            #expect(quick == (try parsed(args)), "\(args)")
        }
    }

    @Test func everythingElseIsLeftToArgumentParser() {
        let cases: [[String]] = [
            [], ["-q"], ["--json"], ["-k"], ["-qf", url], ["-kq", url], ["-k", "-k", url], ["-k", "--insecure", url],
            ["--http2", "--http2", url], ["--json", "--json", url], ["--json=1", url], ["--http2", "-i", "-"], ["-q", "-q", url], ["-q", "--quiet", url], ["-f", "--force", url],
            ["-o", url], ["-o", "-q", url], ["-o", "", url], ["-o", "a", "-o", "b", url], ["-o", "a", url, url],
            ["-o", "a", "-d", "d", url], ["-d", "a", "-d", "b", url], [url, "-d"], ["--", url], ["--output=a", url],
            ["ftp://x/y"], ["get", url], ["verify", "f"], ["--help"], ["-h", url], ["--version"], ["-n", "auto", url], ["-n", "0", url], ["-n", "129", url],
            ["-n", "08", url], ["-n", "+4", url], ["-n", "-4", url], ["-n", "4", "-n", "4", url], ["-n4", url], [url, "-n"],
            ["HTTP://x/y"], ["--mirror", url, url], [url, "--skip-existing"],
            ["-i", "-"], ["-i", "a", "-i", "b"], ["-i", "l", "-o", "x"], ["-i", "l", "-o", "x", url], ["-i"], ["-j", "16"],
            ["-j", "0", url], ["-j", "33", url], ["-j", "08", url], ["-j", "4", "-j", "4", url], ["-j16", url], [url, "-j"],
        ]
        for args in cases {
            #expect(GetRequest(quickParsing: args) == nil, "\(args)")
        }
    }
}

@Suite struct LastPathComponentTests {
    /// The byte scan of an ASCII path gives what splitting its `Character`s on "/" gives.
    @Test func matchesSplittingOnSlashes() {
        let pieces = ["/", "//", ".", "a", "b.bin", "", " ", "é", "\u{301}", "/\u{301}", "\r\n"]
        var state: UInt64 = 0x5EED_0008
        for _ in 0..<10_000 {
            var path = ""
            for _ in 0..<6 {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                path += pieces[Int(state >> 33) % pieces.count]
            }
            #expect(lastPathComponent(path) == (path.split(separator: "/").last.map(String.init) ?? path), "\(path.debugDescription)")
        }
        #expect(lastPathComponent("dl/x.bin") == "x.bin" && lastPathComponent("///") == "///" && lastPathComponent("a/b//") == "b")
    }
}

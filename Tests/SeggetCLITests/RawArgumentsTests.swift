import Testing

@testable import segget

/// Arguments that are not UTF-8 are refused before Swift turns their odd bytes into U+FFFD (which
/// saved `-o $'caf\xe9.bin'` as `caf�.bin`).
@Suite struct RawArgumentsTests {
    @Test func theFirstArgumentThatIsNotUTF8IsNamed() {
        let ok: [[UInt8]] = [Array("-o".utf8), Array("café.bin".utf8), Array("http://h/€".utf8), []]
        #expect(RawArguments.firstNotUTF8(ok) == nil)
        let latin1: [[UInt8]] = [Array("-o".utf8), [0x63, 0x61, 0x66, 0xE9, 0x2E, 0x62, 0x69, 0x6E], Array("x".utf8)]
        let bad = RawArguments.firstNotUTF8(latin1)
        #expect(bad?.position == 2 && bad?.shown == "caf\\xe9.bin")
    }

    /// The secrets of a command line with each `*`ed, as `hideSecrets` leaves it for `ps`.
    static func hidden(_ args: [String]) -> [String] {
        var bytes = args.map { Array($0.utf8) }
        for (index, range) in RawArguments.secretSpans(bytes) {
            for k in range { bytes[index][k] = UInt8(ascii: "*") }
        }
        return bytes.map { String(decoding: $0, as: UTF8.self) }
    }

    /// The daemon's token on the command line is found in both forms, and only before a `--`.
    @Test func theRPCTokenIsFound() {
        #expect(Self.hidden(["daemon", "--rpc-secret", "s3"]) == ["daemon", "--rpc-secret", "**"])
        #expect(Self.hidden(["ls", "--rpc-secret=s3", "--rpc-port", "1"]) == ["ls", "--rpc-secret=**", "--rpc-port", "1"])
        #expect(Self.hidden(["daemon", "--rpc-secret"]) == ["daemon", "--rpc-secret"])
        #expect(Self.hidden(["daemon", "--rpc-secret-file", "/p", "--rpc-secret="]) == ["daemon", "--rpc-secret-file", "/p", "--rpc-secret="])
        #expect(Self.hidden(["daemon", "--rpc-secret=", "--rpc-secret", "x"]) == ["daemon", "--rpc-secret=", "--rpc-secret", "*"])
        #expect(Self.hidden(["x", "--", "--rpc-secret", "s"]) == ["x", "--", "--rpc-secret", "s"])
        #expect(Self.hidden(["--rpc-secret", "--rpc-secret", "--rpc-secret=t"]) == ["--rpc-secret", "************", "--rpc-secret=*"])
    }

    /// A password, credential headers and inline cookies are hidden; the user, other headers, a
    /// cookie file's name and everything but a URL's password stay as given.
    @Test func credentialsAreHidden() {
        #expect(Self.hidden(["-u", "alice:pa:ss", "URL"]) == ["-u", "alice:*****", "URL"])
        #expect(Self.hidden(["--user=bob:x", "--user", "carol", "--user", "dan:"]) == ["--user=bob:*", "--user", "carol", "--user", "dan:"])
        #expect(Self.hidden(["-H", "Authorization: Bearer abc", "-H", "X-Trace: 1"]) == ["-H", "Authorization: **********", "-H", "X-Trace: 1"])
        #expect(Self.hidden(["--header=proxy-authorization:Basic Zm9v", "--header", " Cookie :\tsid=1"])
                == ["--header=proxy-authorization:**********", "--header", " Cookie :\t*****"])
        #expect(Self.hidden(["-H", "Authorization:", "-H", "Authorization:  "]) == ["-H", "Authorization:", "-H", "Authorization:  "])
        #expect(Self.hidden(["-b", "sid=42; theme=dark", "--cookie", "jar.txt", "--cookie=a=b"]) == ["-b", "******************", "--cookie", "jar.txt", "--cookie=***"])
        // A value that looks like an option is the option's value, not the next option.
        #expect(Self.hidden(["-H", "-u", "x:y"]) == ["-H", "-u", "x:y"])
        // After `--`, options are not read, but a URL's password is hidden anywhere.
        #expect(Self.hidden(["-q", "--", "-u", "a:b", "https://u:pw@h/x"]) == ["-q", "--", "-u", "a:b", "https://u:**@h/x"])
    }

    /// Every form swift-argument-parser reads a one-letter option in: with `=`, and in a pack whose
    /// value-taking letters take the next arguments in turn; and a proxy given without a scheme.
    @Test func everyFormOfAnOptionIsHidden() {
        #expect(Self.hidden(["-u=alice:pw", "-H=Authorization: x", "-b=sid=1"]) == ["-u=alice:**", "-H=Authorization: *", "-b=*****"])
        #expect(Self.hidden(["-qu", "alice:pw", "URL"]) == ["-qu", "alice:**", "URL"])
        #expect(Self.hidden(["-nu", "8", "alice:pw", "URL"]) == ["-nu", "8", "alice:**", "URL"])
        #expect(Self.hidden(["-un", "alice:pw", "8"]) == ["-un", "alice:**", "8"])
        #expect(Self.hidden(["-kH", "Authorization: Basic x", "-fb", "sid=1"]) == ["-kH", "Authorization: *******", "-fb", "*****"])
        #expect(Self.hidden(["-qu"]) == ["-qu"])
        // Another option's value is not read as an option: -o takes "-u".
        #expect(Self.hidden(["-o", "-u", "x:y"]) == ["-o", "-u", "x:y"])
        #expect(Self.hidden(["--proxy", "alice:pw@proxy:3128", "--proxy=bob:s@p"]) == ["--proxy", "alice:**@proxy:3128", "--proxy=bob:*@p"])
        #expect(Self.hidden(["--proxy", "proxy:3128", "--proxy", "socks5h://u:p@h:1"]) == ["--proxy", "proxy:3128", "--proxy", "socks5h://u:*@h:1"])
    }

    /// `valueShorts` names every one-letter option of every command that takes a value, as their
    /// help shows them (`-n, --connections <n>`): a new one is read as a flag in a pack until added.
    @Test func theOneLetterOptionsThatTakeValuesAreKnown() {
        var seen: Set<UInt8> = []
        for command in SeggetCommand.configuration.subcommands {
            for line in command.helpMessage(columns: 200).split(separator: "\n") {
                let words = line.split(separator: " ")
                guard let first = words.first, first.count == 3, first.hasPrefix("-"), first.hasSuffix(","),
                      words.count > 2, words[2].hasPrefix("<") else { continue }
                seen.insert(first.utf8[first.utf8.index(after: first.utf8.startIndex)])
            }
        }
        #expect(!seen.isEmpty)
        #expect(seen == RawArguments.valueShorts, "\(String(decoding: seen.sorted(), as: UTF8.self))")
    }

    /// A URL's password is hidden in a download's URL, a mirror, a proxy (both forms) and a header's
    /// value; a user without one, an `@` in the path or query, and the host stay.
    @Test func urlPasswordsAreHidden() {
        #expect(Self.hidden(["https://me:s3cr3t@example.org/f.iso"]) == ["https://me:******@example.org/f.iso"])
        #expect(Self.hidden(["--proxy", "http://p:q@proxy:3128", "--mirror=ftp://a:b@m/x"]) == ["--proxy", "http://p:*@proxy:3128", "--mirror=ftp://a:*@m/x"])
        #expect(Self.hidden(["https://me@example.org/a:b@c", "https://h/?u=a:b@c", "https://h#a:b@c"]) == ["https://me@example.org/a:b@c", "https://h/?u=a:b@c", "https://h#a:b@c"])
        #expect(Self.hidden(["https://u:p@ss@h/x", "https://u:@h/", "http://"]) == ["https://u:****@h/x", "https://u:@h/", "http://"])
        #expect(Self.hidden(["-H", "Link: <https://a:b@h/>"]) == ["-H", "Link: <https://a:*@h/>"])
        #expect(Self.hidden(["--out", "x", "-i", "list.txt"]) == ["--out", "x", "-i", "list.txt"])
    }

    @Test(arguments: [
        ([0xFF], "\\xff"),
        ([0xC3], "\\xc3"),  // a character cut short
        ([0xC3, 0xA9, 0xE9], "é\\xe9"),
        ([0xC0, 0xAF], "\\xc0\\xaf"),  // an overlong slash
        ([0xED, 0xA0, 0x80], "\\xed\\xa0\\x80"),  // a surrogate
        ([0x61, 0x1B, 0x62], "a\\x1bb"),  // a control character among others
        ([0xF0, 0x9F, 0x98, 0x80, 0x80], "😀\\x80"),
    ] as [([UInt8], String)])
    func oddBytesAreShownAsEscapes(_ bytes: [UInt8], _ shown: String) {
        #expect(RawArguments.shown(bytes) == shown)
    }
}

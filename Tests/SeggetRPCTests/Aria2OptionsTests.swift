import Glibc
import Segget
import Testing

@testable import SeggetQueue
@testable import SeggetRPC

/// A fresh directory under /tmp; the caller removes it with `removeTree`.
func makeTempDirectory() -> String {
    var template = Array("/tmp/segget-rpc-test.XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    return String(cString: path!)
}

/// `rm -rf path`, without following symbolic links.
func removeTree(_ path: String) {
    var st = stat()
    guard lstat(path, &st) == 0 else { return }
    if st.st_mode & S_IFMT == S_IFDIR, let dir = opendir(path) {
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        closedir(dir)
        for name in names { removeTree(path + "/" + name) }
        rmdir(path)
    } else {
        unlink(path)
    }
}

@Suite struct Aria2OptionsTests {
    let policy = RPCPolicy(root: "/tmp", allowAnyDirectory: false)

    func parse(_ text: String, policy: RPCPolicy? = nil) throws(RPCError) -> Aria2TaskOptions {
        let json: JSON
        do { json = try JSON.parse(text) } catch { fatalError("bad test JSON") }
        return try Aria2TaskOptions.parse(json, policy: policy ?? self.policy)
    }

    func code(_ text: String) -> Int? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            return error.code
        }
    }

    /// What getOption answers for a task, sent back whole with changeOption (a front-end's option
    /// form, aria2p's options), is no change to what its download runs with, so a running task is not
    /// restarted; whatever the task set itself and whatever the queue's defaults are. Before, the
    /// values getOption fills in for options a task leaves to the daemon (split, max-tries, timeout,
    /// the user agent, …) restarted it. (The directory, answered resolved, is the queue's own check:
    /// LiveOptionsTests.)
    @Test(arguments: 0..<4) func getOptionsAnswerSentBackIsNoChange(_ variant: Int) throws {
        var settings = QueueSettings(downloadRoot: "/tmp")
        var task = TaskOptions(outputName: "f.bin")
        if variant >= 1 {
            settings.defaultConnections = 3
            settings.maxConnectionsPerServer = 4
            settings.taskRetries.maxTries = 0
            settings.taskRetries.timeout = 45
        }
        if variant >= 2 {
            task.headers = ["X-A: 1", "X-B: 2"]
            task.referer = "https://example.com/"
            task.maxSpeed = 5000
            task.checksums = [try ExpectedDigest(parsing: "md5=" + String(repeating: "ab", count: 16))]
        }
        if variant == 3 {
            task.connections = 12
            task.maxTries = 2
            task.retryWait = 2.5
            task.stallTimeout = 7
            task.connectTimeout = 3
            task.userAgent = "agent/1"
        }
        guard case .object(let members) = Aria2OptionTable.download(.init(options: task, directory: "/tmp"), .init(settings: settings))
        else { Issue.record("getOption answered no object"); return }
        let back = try Aria2TaskOptions.parse(.object(members.filter { $0.0 != "dir" }), onto: task, policy: policy)
        #expect(!DownloadQueue.needsRestart(from: task, to: back.options, settings: settings), "\(back.options)")
        // The check can fail: one value changed in the same form is a restart.
        let changed = try Aria2TaskOptions.parse(
            .object(members.filter { $0.0 != "dir" && $0.0 != "timeout" } + [("timeout", .string("599"))]), onto: task, policy: policy)
        #expect(DownloadQueue.needsRestart(from: task, to: changed.options, settings: settings))
    }

    @Test func emptyAndNullGiveDefaults() throws {
        #expect(try Aria2TaskOptions.parse(nil, policy: policy) == Aria2TaskOptions())
        #expect(try parse("null") == Aria2TaskOptions())
        #expect(try parse("{}") == Aria2TaskOptions())
        #expect(code("[]") == 1)
    }

    @Test func simpleStrings() throws {
        let o = try parse(#"{"out":"f.iso","user-agent":"UA/1","referer":"http://r/","all-proxy":"http://p:3128"}"#)
            .options
        #expect(o.outputName == "f.iso")
        #expect(o.userAgent == "UA/1")
        #expect(o.referer == "http://r/")
        #expect(o.proxy == "http://p:3128")
        #expect(try parse(#"{"all-proxy":""}"#).options.proxy == nil)
    }

    @Test func headerStringOrArray() throws {
        #expect(try parse(#"{"header":"A: 1"}"#).options.headers == ["A: 1"])
        #expect(try parse(#"{"header":["A: 1","B:2"]}"#).options.headers == ["A: 1", "B:2"])
        // What getOption answers, sent back (aria2p's retry_downloads does): a header per line.
        #expect(try parse(#"{"header":"X-A: 1\nX-B: 2\n"}"#).options.headers == ["X-A: 1", "X-B: 2"])
    }

    @Test(arguments: [
        #"{"header":"A: 1\r\nB: 2"}"#, #"{"header":["A: 1\n"]}"#, #"{"header":"no colon"}"#, #"{"header":": v"}"#,
        #"{"header":"Bad Name: v"}"#, #"{"header":[1]}"#, #"{"header":5}"#, #"{"user-agent":"a\rb"}"#,
        #"{"referer":"x\ny"}"#, #"{"all-proxy":"p\u0000"}"#,
    ])
    func headerInjectionRefused(_ text: String) {
        #expect(code(text) == 1)
    }

    @Test(arguments: ["a/b", "../x", "/etc/passwd", "..", ".", "a\nb"])
    func outIsOneComponent(_ name: String) {
        #expect(code(JSON.object([("out", .string(name))]).serialized) == 1)
    }

    /// An empty out or dir is not set, as in aria2 (before: the whole addUri refused).
    @Test func anEmptyOutOrDirIsNotSet() throws {
        let o = try parse(#"{"out":"","dir":"","split":"2"}"#).options
        #expect(o.outputName == nil && o.directory == nil && o.connections == 2)
    }

    @Test func connections() throws {
        #expect(try parse(#"{"split":"4"}"#).options.connections == 4)
        // Per server is aria2's separate option: stored, and split left alone.
        #expect(try parse(#"{"max-connection-per-server":"3"}"#).options.connections == nil)
        #expect(try parse(#"{"max-connection-per-server":"3"}"#).options.maxConnectionsPerServer == 3)
        #expect(try parse(#"{"split":"16","max-connection-per-server":"4"}"#).options.connections == 16)
        #expect(try parse(#"{"split":2,"max-connection-per-server":"8"}"#).options.connections == 2)
        #expect(code(#"{"max-connection-per-server":"17"}"#) == 1)
        #expect(code(#"{"max-connection-per-server":"0"}"#) == 1)
        #expect(code(#"{"split":"0"}"#) == 1)
        #expect(code(#"{"split":"129"}"#) == 1)
        #expect(code(#"{"split":"many"}"#) == 1)
    }

    /// The messages are the command line's (`segget -n`, `--max-speed`): one rule, one wording.
    @Test func refusalsSayWhatIsWrongAndWhatIsAccepted() {
        func message(_ text: String) -> String? {
            do {
                _ = try parse(text)
                return nil
            } catch {
                return error.message
            }
        }
        #expect(message(#"{"split":"0"}"#) == "option split: '0' is too few connections; give a number from 1 to 128.")
        #expect(
            message(#"{"max-connection-per-server":200}"#)
                == "option max-connection-per-server: '200' is not a number of connections per server; give a number from 1 to 16, as in aria2.")
        #expect(
            message(#"{"split":"many"}"#)
                == "option split: 'many' is not a number of connections; give a number from 1 to 128.")
        #expect(
            message(#"{"max-download-limit":"fast"}"#)
                == "option max-download-limit: 'fast' is not a rate; give bytes per second with an optional unit k, M or G (powers of 1024), such as 512k, 20M or 1.5G. 0 means no cap."
        )
    }

    @Test func speedUsesAria2SizeSyntax() throws {
        #expect(try parse(#"{"max-download-limit":"1M"}"#).options.maxSpeed == 1 << 20)
        #expect(try parse(#"{"max-download-limit":"500K"}"#).options.maxSpeed == 500 * 1024)
        #expect(try parse(#"{"max-download-limit":"12345"}"#).options.maxSpeed == 12345)
        #expect(try parse(#"{"max-download-limit":"0"}"#).options.maxSpeed == nil)
        #expect(code(#"{"max-download-limit":"fast"}"#) == 1)
    }

    @Test func checksum() throws {
        let hex = String(repeating: "ab", count: 32)
        func written(_ json: String) throws -> [String] { OptionSchema.checksum.values(try parse(json).options) }
        #expect(try written(#"{"checksum":"sha-256="# + hex + #""}"#) == ["sha-256=" + hex])
        #expect(try written(#"{"checksum":"SHA256="# + hex.uppercased() + #""}"#) == ["sha-256=" + hex])
        #expect(
            try written(#"{"checksum":"md5=0123456789abcdef0123456789abcdef"}"#)
                == ["md5=0123456789abcdef0123456789abcdef"])
        #expect(code(#"{"checksum":"sha-1=0123456789abcdef0123456789abcdef01234567"}"#) == 1)
        #expect(code(#"{"checksum":"sha-256=abc"}"#) == 1)
        #expect(code(#"{"checksum":"md5"}"#) == 1)
        #expect(code(#"{"checksum":"md5=0123456789abcdef0123456789abcdeg"}"#) == 1)
    }

    @Test func pause() throws {
        #expect(try parse(#"{"pause":"true"}"#).paused)
        #expect(try parse(#"{"pause":true}"#).paused)
        #expect(try !parse(#"{"pause":"false"}"#).paused)
        #expect(code(#"{"pause":"yes"}"#) == 1)
    }

    @Test func unknownOptionsAreIgnored() throws {
        #expect(try parse(#"{"seed-time":"0","bt-tracker":"x","continue":"true"}"#) == Aria2TaskOptions())
    }

    @Test func changeOptionKeepsWhatItDoesNotName() throws {
        let base = TaskOptions(outputName: "keep.bin", headers: ["A: 1"], connections: 3)
        let o = try Aria2TaskOptions.parse(.object([("max-download-limit", .string("2M"))]), onto: base, policy: policy)
            .options
        #expect(o.outputName == "keep.bin")
        #expect(o.headers == ["A: 1"])
        #expect(o.connections == 3)
        #expect(o.maxSpeed == 2 << 20)
    }

    @Test func directoryConfinedToRootThroughSymlinks() throws {
        let root = makeTempDirectory()
        defer { removeTree(root) }
        let outside = makeTempDirectory()
        defer { removeTree(outside) }
        mkdir(root + "/sub", 0o755)
        symlink(outside, root + "/escape")
        symlink(root + "/sub", root + "/inside-link")
        let policy = RPCPolicy(root: root, allowAnyDirectory: false)
        let realRoot = Aria2TaskOptions.resolvePath(root)
        func dir(_ d: String) throws(RPCError) -> String { try Aria2TaskOptions.confineDirectory(d, policy: policy) }

        #expect(try dir(root) == realRoot)
        #expect(try dir(root + "/sub") == realRoot + "/sub")
        #expect(try dir("sub") == realRoot + "/sub")
        #expect(try dir(root + "/new/deeper") == realRoot + "/new/deeper")
        #expect(try dir(root + "/inside-link") == realRoot + "/sub")
        #expect(try dir(root + "/sub/../sub/./") == realRoot + "/sub")
        for bad in [
            "/etc", root + "/escape", root + "/escape/x", root + "/..", root + "/new/../../etc", "../x", outside, "/",
        ] {
            #expect(throws: RPCError.self, "dir \(bad)") { try dir(bad) }
        }
        #expect(throws: RPCError.self) { try dir("") }
        // A sibling whose name starts with the root's is not inside it.
        let sibling = realRoot + "-other"
        mkdir(sibling, 0o755)
        defer { removeTree(sibling) }
        #expect(throws: RPCError.self) { try dir(sibling) }

        let any = RPCPolicy(root: root, allowAnyDirectory: true)
        #expect(
            try Aria2TaskOptions.confineDirectory(root + "/escape", policy: any)
                == Aria2TaskOptions.resolvePath(outside))
    }

    @Test func dirOptionGoesThroughConfinement() throws {
        let root = makeTempDirectory()
        defer { removeTree(root) }
        let policy = RPCPolicy(root: root, allowAnyDirectory: false)
        #expect(
            try Aria2TaskOptions.parse(.object([("dir", .string("d"))]), policy: policy).options.directory
                == Aria2TaskOptions.resolvePath(root) + "/d")
        #expect(throws: RPCError.self) {
            try Aria2TaskOptions.parse(.object([("dir", .string("/etc"))]), policy: policy)
        }
    }

    @Test func renderedOptionsAreStrings() {
        let o = TaskOptions(
            directory: "/d", outputName: "o", headers: ["A: 1", "B: 2"], connections: 4, maxSpeed: 100,
            maxConnectionsPerServer: 2)
        let context = Aria2OptionTable.Context(settings: QueueSettings(downloadRoot: "/root"))
        let r = Aria2OptionTable.download(.init(options: o, directory: "/d"), context)
        #expect(r["dir"] == .string("/d"))
        #expect(r["out"] == .string("o"))
        #expect(r["split"] == .string("4"))
        #expect(r["max-connection-per-server"] == .string("2"))
        #expect(r["max-download-limit"] == .string("100"))
        // aria2 answers its header option as one string, each line ended by a line feed.
        #expect(r["header"] == .string("A: 1\nB: 2\n"))
        let plain = Aria2OptionTable.download(.init(options: TaskOptions(), directory: "/x"), context)
        #expect(plain["split"] == .string("8"))
        #expect(plain["max-connection-per-server"] == .string("16"))
        #expect(plain["out"] == nil)
        #expect(plain["header"] == nil)
    }
}

import Glibc
import Segget
import SeggetQueue
import Synchronization
import Testing

@testable import SeggetRPC

/// The shutdown requests a handler made: `force` for each.
final class ShutdownLog: Sendable {
    let calls = Mutex<[Bool]>([])
}

/// aria2's methods over a real DownloadQueue with a database in a temporary directory. The queue is
/// never started, so nothing is downloaded: these check the mapping of calls to queue commands and
/// the rendering of what the queue answers.
final class MethodsFixture {
    let root = makeTempDirectory()
    let queue: DownloadQueue
    let methods: Aria2Methods
    let processor: RPCProcessor
    let shutdowns = ShutdownLog()

    init() throws {
        queue = try DownloadQueue(databasePath: root + "/q.sqlite", settings: QueueSettings(downloadRoot: root))
        let log = shutdowns
        methods = Aria2Methods(
            queue: queue, policy: RPCPolicy(root: root, allowAnyDirectory: false), sessionID: "abc",
            requestShutdown: { force in log.calls.withLock { $0.append(force) } })
        processor = RPCProcessor(secret: "tok", handler: methods)
    }

    deinit { removeTree(root) }

    /// Calls a method with the token, returning the result or the error.
    func call(_ method: String, _ params: [JSON] = []) -> Result<JSON, RPCError> {
        do {
            return .success(try processor.call(method: method, params: [.string("token:tok")] + params))
        } catch {
            return .failure(error)
        }
    }

    func ok(_ method: String, _ params: [JSON] = [], sourceLocation: SourceLocation = #_sourceLocation) -> JSON {
        switch call(method, params) {
        case .success(let v): return v
        case .failure(let e):
            Issue.record("\(method) failed: \(e)", sourceLocation: sourceLocation)
            return .null
        }
    }

    func errorCode(_ method: String, _ params: [JSON] = []) -> Int? {
        if case .failure(let e) = call(method, params) { return e.code }
        return nil
    }

    func add(_ name: String, _ options: [(String, JSON)] = []) -> String {
        ok("aria2.addUri", [.array([.string("http://127.0.0.1:9/\(name)")]), .object(options)]).stringValue ?? ""
    }

    func status(_ gid: String) -> String? {
        ok("aria2.tellStatus", [.string(gid), .array([.string("status")])])["status"]?.stringValue
    }

    func gids(_ list: JSON) -> [String] { list.arrayValue?.compactMap { $0["gid"]?.stringValue } ?? [] }
}

@Suite(.serialized) struct Aria2MethodsTests {
    /// An unknown GID is answered in aria2's words by every method (exploratory run 3: methods that
    /// reach the queue said "No task has the id …" where the others said aria2's).
    @Test func anUnknownGIDIsNotFoundInAria2sWordsByEveryMethod() throws {
        let f = try MethodsFixture()
        let gid = "00000000000000ab"
        let calls: [(String, [JSON])] = [
            ("aria2.tellStatus", [.string(gid)]), ("aria2.pause", [.string(gid)]), ("aria2.unpause", [.string(gid)]),
            ("aria2.remove", [.string(gid)]), ("aria2.forceRemove", [.string(gid)]), ("aria2.getOption", [.string(gid)]),
            ("aria2.changeOption", [.string(gid), .object([("max-download-limit", .string("1M"))])]),
            ("aria2.changeUri", [.string(gid), .int(1), .array([]), .array([.string("http://127.0.0.1:9/x")])]),
            ("aria2.changePosition", [.string(gid), .int(0), .string("POS_SET")]),
            ("aria2.removeDownloadResult", [.string(gid)]), ("aria2.getUris", [.string(gid)]),
        ]
        for (method, params) in calls {
            guard case .failure(let e) = f.call(method, params) else {
                Issue.record("\(method) of an unknown GID succeeded")
                continue
            }
            #expect(e.message == "GID \(gid) is not found", "\(method): \(e.message)")
        }
    }

    @Test func addUriStoresOptionsAndAnswersAGid() throws {
        let f = try MethodsFixture()
        let gid = f.add("a.bin", [("out", .string("x.bin")), ("header", .string("A: 1")), ("split", .string("3"))])
        #expect(gid.count == 16 && gid.allSatisfy(\.isHexDigit))
        #expect(f.status(gid) == "waiting")
        let options = f.ok("aria2.getOption", [.string(gid)])
        #expect(options["out"] == .string("x.bin"))
        #expect(options["header"] == .string("A: 1\n"))
        #expect(options["split"] == .string("3"))
        // The options getOption answered, sent back whole (aria2p's retry, of a task that failed or
        // was removed: one still to run keeps its out to itself), make the same task.
        _ = f.ok("aria2.forceRemove", [.string(gid)])
        let again = f.ok("aria2.addUri", [.array([.string("http://127.0.0.1:9/a.bin")]), options])
        let copied = f.ok("aria2.getOption", [again])
        #expect(copied["header"] == .string("A: 1\n"))
        let uris = f.ok("aria2.getUris", [again])
        #expect(
            uris == .array([.object([("uri", .string("http://127.0.0.1:9/a.bin")), ("status", .string("waiting"))])]))
        let files = f.ok("aria2.getFiles", [.string(gid)]).arrayValue?.first
        #expect(files?["path"]?.stringValue?.hasSuffix("/x.bin") == true)
    }

    @Test func addUriRefusals() throws {
        let f = try MethodsFixture()
        #expect(f.errorCode("aria2.addUri", []) == 1)
        #expect(f.errorCode("aria2.addUri", [.array([])]) == 1)
        #expect(f.errorCode("aria2.addUri", [.array([.int(5)])]) == 1)
        #expect(f.errorCode("aria2.addUri", [.array([.string("ftp://h/f")])]) == 1)
        #expect(
            f.errorCode("aria2.addUri", [.array([.string("http://h/f")]), .object([("dir", .string("/etc"))])]) == 1)
        #expect(f.errorCode("aria2.addUri", [.array([.string("http://h/f")]), .object([]), .int(-1)]) == 1)
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(0), .int(100)])).isEmpty)
    }

    /// An `out` that ends as a side file's name does (`.segget-part`, `-journal`, `-progress`) is
    /// refused by addUri, as `out=..` is: it was accepted, and the task then failed with error 16
    /// and the command line's advice ("choose another name with -o"). Found by an exploratory test
    /// against aria2c 1.36's RPC.
    @Test func addUriRefusesASideFilesNameAsOut() throws {
        let f = try MethodsFixture()
        for name in ["x.segget-part", "x.segget-journal", "x.segget-progress"] {
            let answer = f.call("aria2.addUri", [.array([.string("http://h/f")]), .object([("out", .string(name))])])
            guard case .failure(let e) = answer else {
                Issue.record("\(name) was accepted")
                continue
            }
            #expect(e.code == 1, "\(e)")
            #expect(e.message.contains("ends in .segget-"), "\(e.message)")
            #expect(!e.message.contains("-o"), "\(e.message)")
        }
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(0), .int(100)])).isEmpty)
        // Only the ending counts.
        _ = f.ok("aria2.addUri", [.array([.string("http://h/f")]), .object([("out", .string("x.segget-part.bin"))])])
    }

    @Test func pauseAndUnpause() throws {
        let f = try MethodsFixture()
        let paused = f.add("p.bin", [("pause", .string("true"))])
        #expect(f.status(paused) == "paused")
        #expect(f.ok("aria2.unpause", [.string(paused)]) == .string(paused))
        #expect(f.status(paused) == "waiting")
        #expect(f.ok("aria2.forcePause", [.string(paused)]) == .string(paused))
        #expect(f.status(paused) == "paused")
        let other = f.add("q.bin")
        #expect(f.ok("aria2.unpauseAll") == .string("OK"))
        #expect(f.status(paused) == "waiting")
        #expect(f.ok("aria2.pauseAll") == .string("OK"))
        #expect(f.status(paused) == "paused" && f.status(other) == "paused")
        // As aria2c: pausing a paused task, or unpausing one that is not paused, is error 1.
        #expect(f.errorCode("aria2.pause", [.string(other)]) == 1)
        #expect(f.errorCode("aria2.forcePause", [.string(other)]) == 1)
        #expect(f.ok("aria2.unpause", [.string(other)]) == .string(other))
        #expect(f.errorCode("aria2.unpause", [.string(other)]) == 1)
        #expect(f.status(other) == "waiting")
    }

    /// As aria2: a unique prefix of a GID names its task; one shared by several is refused.
    @Test func aGIDPrefixNamesItsTask() throws {
        let f = try MethodsFixture()
        let gids = (0..<40).map { f.add("g\($0).bin") }
        let g = gids[0]
        // The shortest prefix of g that no other GID shares, and one that another shares, if any.
        let unique = (1...16).map { String(g.prefix($0)) }.first { p in gids.filter { $0.hasPrefix(p) }.count == 1 }!
        #expect(f.ok("aria2.tellStatus", [.string(unique), .array([.string("gid")])])["gid"] == .string(g))
        #expect(f.ok("aria2.tellStatus", [.string(unique.uppercased()), .array([.string("gid")])])["gid"] == .string(g))
        #expect(f.ok("aria2.pause", [.string(unique)]) == .string(g))
        #expect(f.status(g) == "paused")
        if let shared = (1..<16).map({ String(g.prefix($0)) }).last(where: { p in gids.filter { $0.hasPrefix(p) }.count > 1 }) {
            #expect(f.errorCode("aria2.tellStatus", [.string(shared)]) == 1)
        }
        let absent = (0..<16).map { String(UInt8($0), radix: 16) }.first { d in !gids.contains { $0.hasPrefix(d) } }
        if let absent { #expect(f.errorCode("aria2.tellStatus", [.string(absent)]) == 1) }
        #expect(f.errorCode("aria2.tellStatus", [.string("xyz")]) == 1)
        #expect(f.errorCode("aria2.tellStatus", [.string("")]) == 1)
    }

    /// As aria2: `gid` sets the new task's GID (16 hex digits, not zero, not a task's already; error 1
    /// otherwise and nothing is added); a task keeps its GID (changeOption refuses it). It was ignored.
    @Test func theGidOptionNamesTheNewTask() throws {
        let f = try MethodsFixture()
        let wanted = "00000000c0ffee01"
        #expect(f.add("a.bin", [("gid", .string(wanted))]) == wanted)
        #expect(f.status(wanted) == "waiting")
        // Upper case is the same GID; a GID in use, zero, the wrong length or not hex: error 1, nothing added.
        #expect(f.add("b.bin", [("gid", .string("00000000C0FFEE02"))]) == "00000000c0ffee02")
        for bad in [wanted, "00000000C0FFEE01", "0000000000000000", "c0ffee", "00000000c0ffee0g", "0x000000c0ffee03"] {
            #expect(f.errorCode("aria2.addUri", [.array([.string("http://127.0.0.1:9/c.bin")]), .object([("gid", .string(bad))])]) == 1, "\(bad)")
        }
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(0), .int(100)])) == [wanted, "00000000c0ffee02"])
        #expect(f.errorCode("aria2.changeOption", [.string(wanted), .object([("gid", .string("00000000c0ffee09"))])]) == 1)
        #expect(f.errorCode("aria2.tellStatus", [.string("00000000c0ffee09")]) == 1)
    }

    @Test func waitingPagesAndKeys() throws {
        let f = try MethodsFixture()
        let g = (0..<5).map { f.add("w\($0).bin") }
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(0), .int(1000)])) == g)
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(1), .int(2)])) == [g[1], g[2]])
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(-1), .int(2)])) == [g[4], g[3]])
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(-1), .int(1000)])) == g.reversed())
        #expect(f.gids(f.ok("aria2.tellWaiting", [.string("0"), .string("1")])) == [g[0]])
        let keyed = f.ok("aria2.tellWaiting", [.int(0), .int(1), .array([.string("gid")])])
        #expect(keyed == .array([.object([("gid", .string(g[0]))])]))
        #expect(f.errorCode("aria2.tellWaiting", [.int(0)]) == 1)
        #expect(f.errorCode("aria2.tellWaiting", [.int(0), .int(-1)]) == 1)
        #expect(f.errorCode("aria2.tellWaiting", [.int(0), .int(1), .string("gid")]) == 1)
        #expect(f.ok("aria2.tellActive") == .array([]))
    }

    @Test func changePosition() throws {
        let f = try MethodsFixture()
        let g = (0..<4).map { f.add("c\($0).bin") }
        #expect(f.ok("aria2.changePosition", [.string(g[3]), .int(0), .string("POS_SET")]) == .int(0))
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(0), .int(10)])) == [g[3], g[0], g[1], g[2]])
        #expect(f.ok("aria2.changePosition", [.string(g[3]), .int(2), .string("POS_CUR")]) == .int(2))
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(0), .int(10)])) == [g[0], g[1], g[3], g[2]])
        #expect(f.ok("aria2.changePosition", [.string(g[0]), .int(0), .string("POS_END")]) == .int(3))
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(0), .int(10)])) == [g[1], g[3], g[2], g[0]])
        #expect(f.errorCode("aria2.changePosition", [.string(g[0]), .int(0), .string("POS_NOWHERE")]) == 1)
    }

    /// An integer parameter far out of range is clamped, as aria2 1.36 answers it, never refused
    /// and never a trap (`abs` of the smallest Int64 once took the daemon down from one
    /// authenticated request): front-ends ask for "all" with `num` = Number.MAX_SAFE_INTEGER
    /// (2^53-1) or 2^63-1, and aria2 moves a task to the end for `pos` 2^40. Found by an
    /// exploratory test against aria2c 1.36, which answered all of these where segget refused.
    @Test func integersAtTheEdgesOfInt64AreClamped() throws {
        let f = try MethodsFixture()
        let g = (0..<3).map { f.add("e\($0).bin") }
        let huge: [JSON] = [
            .int(1 << 40), .int((1 << 53) - 1), .int(Int64.max), .string("9007199254740991"),
            .double(18_446_744_073_709_551_616),  // 2^64: beyond Int64, read as a double
        ]
        for v in huge {
            #expect(f.gids(f.ok("aria2.tellWaiting", [.int(0), v])) == g)
            #expect(f.ok("aria2.tellStopped", [.int(0), v]) == .array([]))
            #expect(f.ok("aria2.tellWaiting", [v, .int(1)]) == .array([]))
            #expect(f.ok("aria2.changePosition", [.string(g[0]), v, .string("POS_SET")]) == .int(2))
            #expect(f.ok("aria2.changePosition", [.string(g[0]), v, .string("POS_CUR")]) == .int(2))
            #expect(f.ok("aria2.changePosition", [.string(g[0]), v, .string("POS_END")]) == .int(2))
            #expect(f.ok("aria2.changePosition", [.string(g[0]), .int(0), .string("POS_SET")]) == .int(0))
        }
        for v: JSON in [.int(-(1 << 40)), .int(-(1 << 53) + 1), .int(Int64.min), .int(Int64.min + 1)] {
            #expect(f.ok("aria2.tellStopped", [v, .int(1)]) == .array([]))
            #expect(f.ok("aria2.tellWaiting", [v, .int((1 << 53) - 1)]) == .array([]))
            #expect(f.errorCode("aria2.tellWaiting", [.int(0), v]) == 1)  // a negative num, as before
            for how in ["POS_SET", "POS_CUR", "POS_END"] {
                #expect(f.ok("aria2.changePosition", [.string(g[2]), v, .string(how)]) == .int(0))
                #expect(f.ok("aria2.changePosition", [.string(g[2]), .int(2), .string("POS_SET")]) == .int(2))
            }
        }
        #expect(f.gids(f.ok("aria2.tellWaiting", [.int(-1), .int(Int64.max)])) == g.reversed())
        #expect(f.ok("aria2.tellStopped", [.int(-((1 << 40) - 1)), .int(1)]) == .array([]))
        // What is not an integer is still refused.
        for v: JSON in [.double(1.5), .double(-0.5), .string("1.5"), .string("all"), .null, .bool(true)] {
            #expect(f.errorCode("aria2.tellWaiting", [.int(0), v]) == 1)
            #expect(f.errorCode("aria2.tellStopped", [v, .int(1)]) == 1)
            #expect(f.errorCode("aria2.changePosition", [.string(g[0]), v, .string("POS_SET")]) == 1)
        }
    }

    @Test func removeAndHistory() throws {
        let f = try MethodsFixture()
        let a = f.add("r1.bin")
        let b = f.add("r2.bin")
        #expect(f.ok("aria2.remove", [.string(a)]) == .string(a))
        #expect(f.ok("aria2.forceRemove", [.string(b)]) == .string(b))
        #expect(f.status(a) == "removed")
        #expect(f.gids(f.ok("aria2.tellStopped", [.int(0), .int(10)])) == [a, b])
        #expect(f.gids(f.ok("aria2.tellStopped", [.int(-1), .int(10)])) == [b, a])
        let stat = f.ok("aria2.getGlobalStat")
        #expect(
            stat["numStopped"] == .string("2") && stat["numWaiting"] == .string("0")
                && stat["numActive"] == .string("0"))
        #expect(f.ok("aria2.removeDownloadResult", [.string(a)]) == .string("OK"))
        #expect(f.errorCode("aria2.tellStatus", [.string(a)]) == 1)
        #expect(f.ok("aria2.purgeDownloadResult") == .string("OK"))
        #expect(f.ok("aria2.tellStopped", [.int(0), .int(10)]) == .array([]))
        #expect(f.ok("aria2.getGlobalStat")["numStoppedTotal"] == .string("2"))
    }

    @Test func unknownAndMalformedGids() throws {
        let f = try MethodsFixture()
        for method in [
            "aria2.tellStatus", "aria2.pause", "aria2.unpause", "aria2.remove", "aria2.getOption", "aria2.getFiles",
        ] {
            #expect(f.errorCode(method, [.string("0123456789abcdef")]) == 1, "\(method)")
            #expect(f.errorCode(method, [.string("nope")]) == 1, "\(method)")
            #expect(f.errorCode(method, []) == 1, "\(method)")
        }
    }

    @Test func options() throws {
        let f = try MethodsFixture()
        let g = f.add("o.bin")
        #expect(
            f.ok(
                "aria2.changeOption",
                [.string(g), .object([("max-download-limit", .string("1M")), ("out", .string("n.bin"))])])
                == .string("OK"))
        let o = f.ok("aria2.getOption", [.string(g)])
        #expect(o["max-download-limit"] == .string("1048576"))
        #expect(o["out"] == .string("n.bin"))
        #expect(
            f.errorCode("aria2.changeOption", [.string(g), .object([("header", .string("A: 1\r\nB: 2"))])]) == 1)
        #expect(
            f.ok(
                "aria2.changeGlobalOption",
                [.object([("max-concurrent-downloads", .string("3")), ("max-overall-download-limit", .string("2M"))])])
                == .string("OK"))
        let global = f.ok("aria2.getGlobalOption")
        #expect(global["max-concurrent-downloads"] == .string("3"))
        #expect(global["max-overall-download-limit"] == .string("2097152"))
        #expect(f.queue.settings.maxActive == 3)
        #expect(
            f.errorCode("aria2.changeGlobalOption", [.object([("max-concurrent-downloads", .string("0"))])]) == 1)
    }

    /// The tasks' default tries and time limits (aria2's global max-tries, retry-wait, timeout,
    /// connect-timeout): changed, answered by getGlobalOption and by getOption of a task that sets
    /// none, not by one that sets its own, stored for the next start, and refused out of range or with
    /// a fraction. Before, changeGlobalOption answered OK and changed nothing while getGlobalOption
    /// went on answering the defaults.
    @Test func taskRetryDefaultsAreChangedAndAnswered() throws {
        let f = try MethodsFixture()
        let own = f.add("own.bin")
        #expect(f.ok("aria2.changeOption", [.string(own), .object([("timeout", .string("9"))])]) == .string("OK"))
        let plain = f.add("plain.bin")
        let changes: [(String, String)] = [("max-tries", "2"), ("retry-wait", "3"), ("timeout", "4"), ("connect-timeout", "5")]
        #expect(f.ok("aria2.changeGlobalOption", [.object(changes.map { ($0.0, JSON.string($0.1)) })]) == .string("OK"))
        let global = f.ok("aria2.getGlobalOption")
        let plainOptions = f.ok("aria2.getOption", [.string(plain)])
        for (key, value) in changes {
            #expect(global[key] == .string(value), "\(key)")
            #expect(plainOptions[key] == .string(value), "\(key)")
        }
        #expect(f.ok("aria2.getOption", [.string(own)])["timeout"] == .string("9"))
        #expect(f.queue.settings.taskRetries.options.stallTimeout == 4)
        #expect(f.queue.storedGlobals().values[.connectTimeout] == 5)
        #expect(f.ok("aria2.changeGlobalOption", [.object([("max-tries", .string("0"))])]) == .string("OK"))
        #expect(f.queue.settings.taskRetries.maxTries == 0)
        for (key, bad) in [("timeout", "0"), ("timeout", "2.5"), ("retry-wait", "601"), ("max-tries", "-1"), ("connect-timeout", "x")] {
            #expect(f.errorCode("aria2.changeGlobalOption", [.object([(key, .string(bad))])]) == 1, "\(key) \(bad)")
        }
        #expect(f.ok("aria2.getGlobalOption")["timeout"] == .string("4"))
    }

    /// segget's speed-schedule: read, changed, refused when bad, and the limit in force follows it
    /// (a whole-day window, so that the clock does not matter); the hosts' cap follows
    /// max-connection-per-server.
    @Test func speedScheduleIsReadAndChanged() throws {
        let f = try MethodsFixture()
        #expect(f.ok("aria2.getGlobalOption")["speed-schedule"] == .string("none"))
        #expect(
            f.ok("aria2.changeGlobalOption", [.object([("speed-schedule", .string("00:00-24:00=1M"))])]) == .string("OK"))
        var global = f.ok("aria2.getGlobalOption")
        #expect(global["speed-schedule"] == .string("00:00-24:00=1M"))
        #expect(global["max-overall-download-limit"] == .string("1048576"))
        #expect(f.queue.overallSpeed.bytesPerSecond == 1 << 20)
        #expect(f.errorCode("aria2.changeGlobalOption", [.object([("speed-schedule", .string("9-5=1M"))])]) == 1)
        #expect(f.ok("aria2.getGlobalOption")["speed-schedule"] == .string("00:00-24:00=1M"))
        #expect(f.ok("aria2.changeGlobalOption", [.object([("speed-schedule", .string("none"))])]) == .string("OK"))
        global = f.ok("aria2.getGlobalOption")
        #expect(global["speed-schedule"] == .string("none") && global["max-overall-download-limit"] == .string("0"))
        #expect(f.queue.overallSpeed.bytesPerSecond == nil)
        #expect(f.ok("aria2.changeGlobalOption", [.object([("max-connection-per-server", .string("3"))])]) == .string("OK"))
        #expect(f.queue.hostBudget.maxPerHost == 3)
    }

    /// In aria2, split is connections per download and max-connection-per-server a per-host cap:
    /// changing one leaves the other.
    @Test func perServerDoesNotChangeSplit() throws {
        let f = try MethodsFixture()
        let before = f.ok("aria2.getGlobalOption")["split"]
        #expect(
            f.ok("aria2.changeGlobalOption", [.object([("max-connection-per-server", .string("4"))])]) == .string("OK"))
        let global = f.ok("aria2.getGlobalOption")
        #expect(global["max-connection-per-server"] == .string("4"))
        #expect(global["split"] == before)
        #expect(f.ok("aria2.changeGlobalOption", [.object([("split", .string("6"))])]) == .string("OK"))
        #expect(f.ok("aria2.getGlobalOption")["max-connection-per-server"] == .string("4"))
        #expect(f.ok("aria2.getGlobalOption")["split"] == .string("6"))

        let g = f.add("p.bin")
        #expect(f.ok("aria2.changeOption", [.string(g), .object([("split", .string("3"))])]) == .string("OK"))
        #expect(
            f.ok("aria2.changeOption", [.string(g), .object([("max-connection-per-server", .string("2"))])])
                == .string("OK"))
        let o = f.ok("aria2.getOption", [.string(g)])
        #expect(o["split"] == .string("3"))
        #expect(o["max-connection-per-server"] == .string("2"))
        #expect(
            f.errorCode("aria2.changeGlobalOption", [.object([("max-connection-per-server", .string("17"))])]) == 1
        )
    }

    /// Every value a string, booleans "true"/"false", and no blank for an option aria2 always answers.
    @Test func optionAnswersHaveAria2sShape() throws {
        let f = try MethodsFixture()
        let g = f.add("s.bin")
        for answer in [f.ok("aria2.getGlobalOption"), f.ok("aria2.getOption", [.string(g)])] {
            guard case .object(let members) = answer else {
                Issue.record("not an object")
                continue
            }
            for (key, value) in members {
                #expect(value.stringValue?.isEmpty == false, "\(key)")
            }
        }
        #expect(f.ok("aria2.getGlobalOption")["user-agent"] == .string("segget/\(seggetVersion)"))
    }

    @Test func daemonMethods() throws {
        let f = try MethodsFixture()
        #expect(f.ok("aria2.getVersion")["version"]?.stringValue?.hasPrefix("1.") == true)
        #expect(f.ok("aria2.getSessionInfo") == .object([("sessionId", .string("abc"))]))
        #expect(f.ok("aria2.saveSession") == .string("OK"))
        let methods = Set(f.ok("system.listMethods").arrayValue?.compactMap(\.stringValue) ?? [])
        for m in [
            "aria2.addUri", "aria2.tellStatus", "aria2.tellActive", "aria2.tellWaiting", "aria2.tellStopped",
            "aria2.getFiles", "aria2.getUris", "aria2.pause", "aria2.forcePause", "aria2.pauseAll",
            "aria2.forcePauseAll",
            "aria2.unpause", "aria2.unpauseAll", "aria2.remove", "aria2.forceRemove", "aria2.removeDownloadResult",
            "aria2.purgeDownloadResult", "aria2.changePosition", "aria2.getOption", "aria2.changeOption",
            "aria2.getGlobalOption", "aria2.changeGlobalOption", "aria2.getGlobalStat", "aria2.getVersion",
            "aria2.getSessionInfo", "aria2.saveSession", "aria2.shutdown", "aria2.forceShutdown",
            "system.multicall", "system.listMethods", "system.listNotifications",
        ] {
            #expect(methods.contains(m), "\(m) not listed")
        }
        #expect(f.ok("system.listNotifications").arrayValue?.count == 7, "aria2's six and segget.onLinkExpired")
        let g = f.add("s.bin")
        #expect(f.ok("aria2.getPeers", [.string(g)]) == .array([]))
        #expect(f.ok("aria2.getServers", [.string(g)]) == .array([]))
        #expect(f.errorCode("aria2.addTorrent", [.string("AAAA")]) == 1)
        #expect(f.errorCode("aria2.addMetalink", [.string("AAAA")]) == 1, "three zero bytes are no Metalink")
        #expect(f.errorCode("aria2.getBitTorrentPeers") == 1)
        #expect(f.ok("aria2.shutdown") == .string("OK"))
        #expect(f.ok("aria2.forceShutdown") == .string("OK"))
        #expect(f.shutdowns.calls.withLock { $0 } == [false, true])
    }

    @Test func multicallOverTheQueue() throws {
        let f = try MethodsFixture()
        let g = f.add("m.bin")
        let r = f.ok(
            "system.multicall",
            [
                .array([
                    .object([
                        ("methodName", .string("aria2.tellStatus")),
                        ("params", .array([.string("token:tok"), .string(g), .array([.string("status")])])),
                    ]),
                    .object([
                        ("methodName", .string("aria2.pause")), ("params", .array([.string("token:tok"), .string(g)])),
                    ]),
                    .object([("methodName", .string("aria2.pause")), ("params", .array([.string(g)]))]),
                ])
            ])
        #expect(r.arrayValue?[0] == .array([.object([("status", .string("waiting"))])]))
        #expect(r.arrayValue?[1] == .array([.string(g)]))
        #expect(r.arrayValue?[2]["message"] == .string("Unauthorized"))
        #expect(f.status(g) == "paused")
    }
}

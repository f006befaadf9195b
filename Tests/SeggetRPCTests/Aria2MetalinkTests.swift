import Glibc
import Segget
import SeggetQueue
import SeggetTestServer
import Synchronization
import Testing

@testable import SeggetRPC

/// aria2's `addMetalink` and `getServers`: a document in base64 becomes one task per file; an active
/// task lists the servers its connections fetch from.
@Suite(.serialized) struct Aria2MetalinkTests {
    @Test func addMetalinkMakesATaskPerFileWithItsURLsNameAndDigest() throws {
        let f = try MethodsFixture()
        let one = metalinkBytes(seed: 1, count: 300_000)
        let two = metalinkBytes(seed: 2, count: 5_000)
        let doc = metalinkXML([
            MetalinkTestFile(name: "one.iso", bytes: one, urls: ["http://127.0.0.1:9/b/one.iso", "http://127.0.0.1:9/a/one.iso"], priorities: [2, 1], pieceLength: 65_536),
            MetalinkTestFile(name: "two.txt", bytes: two, urls: ["http://127.0.0.1:9/two.txt"], priorities: [1], pieceLength: nil),
        ])
        let gids = f.ok("aria2.addMetalink", [.string(base64(Array(doc.utf8))), .object([("dir", .string("m"))])])
        let list = gids.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(list.count == 2 && Set(list).count == 2, "\(gids)")
        guard list.count == 2 else { return }
        #expect(f.status(list[0]) == "waiting" && f.status(list[1]) == "waiting")
        let uris = f.ok("aria2.getUris", [.string(list[0])]).arrayValue?.compactMap { $0["uri"]?.stringValue }
        #expect(uris == ["http://127.0.0.1:9/a/one.iso", "http://127.0.0.1:9/b/one.iso"], "by priority")
        let options = f.ok("aria2.getOption", [.string(list[0])])
        #expect(options["out"] == .string("one.iso"))
        #expect(options["checksum"]?.stringValue?.hasSuffix("=" + hex(sha256(one))) == true, "\(options)")
        #expect(f.ok("aria2.getOption", [.string(list[1])])["out"] == .string("two.txt"))
        #expect(f.ok("aria2.getFiles", [.string(list[0])]).arrayValue?.first?["path"]?.stringValue?.hasSuffix("/m/one.iso") == true)
    }

    /// A name with directories puts the file in them under the task's dir (as aria2c does), two files
    /// of one base name apart; the directory is confined to the root like any dir.
    @Test func addMetalinkKeepsTheDirectoriesOfANameUnderTheDir() throws {
        let f = try MethodsFixture()
        let doc = metalinkXML([
            MetalinkTestFile(name: "x86/boot.iso", bytes: [1, 2], urls: ["http://127.0.0.1:9/x86/boot.iso"], priorities: [1], pieceLength: nil),
            MetalinkTestFile(name: "arm/v8/boot.iso", bytes: [3], urls: ["http://127.0.0.1:9/arm/boot.iso"], priorities: [1], pieceLength: nil),
        ])
        let gids = f.ok("aria2.addMetalink", [.string(base64(Array(doc.utf8))), .object([("dir", .string("m"))])])
        let list = gids.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(list.count == 2, "\(gids)")
        guard list.count == 2 else { return }
        let paths = list.map { f.ok("aria2.getFiles", [.string($0)]).arrayValue?.first?["path"]?.stringValue ?? "" }
        #expect(paths[0].hasSuffix("/m/x86/boot.iso"), "\(paths)")
        #expect(paths[1].hasSuffix("/m/arm/v8/boot.iso"), "\(paths)")
        #expect(f.ok("aria2.getOption", [.string(list[1])])["out"] == .string("boot.iso"))
    }

    @Test func refusedDocumentsAddNothing() throws {
        let f = try MethodsFixture()
        let good = metalinkXML([MetalinkTestFile(name: "a", bytes: [1, 2, 3], urls: ["http://127.0.0.1:9/a"], priorities: [1], pieceLength: nil)])
        let entity = "<?xml version=\"1.0\"?><!DOCTYPE m [<!ENTITY x \"y\">]><metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><url>http://127.0.0.1:9/&x;</url></file></metalink>"
        let ftpOnly = "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><url>ftp://127.0.0.1/a</url></file></metalink>"
        let two = metalinkXML([
            MetalinkTestFile(name: "a", bytes: [1], urls: ["http://127.0.0.1:9/a"], priorities: [1], pieceLength: nil),
            MetalinkTestFile(name: "b", bytes: [2], urls: ["http://127.0.0.1:9/b"], priorities: [1], pieceLength: nil),
        ])
        #expect(f.errorCode("aria2.addMetalink", [.string(base64(Array(entity.utf8)))]) == 1)
        #expect(f.errorCode("aria2.addMetalink", [.string(base64(Array(ftpOnly.utf8)))]) == 1)
        #expect(f.errorCode("aria2.addMetalink", [.string("not base64!")]) == 1)
        #expect(f.errorCode("aria2.addMetalink", [.string(base64(Array(two.utf8))), .object([("out", .string("x"))])]) == 1)
        // One gid for several files' tasks: refused.
        #expect(f.errorCode("aria2.addMetalink", [.string(base64(Array(two.utf8))), .object([("gid", .string("00000000000000a1"))])]) == 1)
        #expect(f.errorCode("aria2.addMetalink", []) == 1)
        #expect(f.ok("aria2.tellWaiting", [.int(0), .int(10)]).arrayValue?.isEmpty == true, "nothing added")
        #expect(f.ok("aria2.addMetalink", [.string(base64(Array(good.utf8))), .object([("gid", .string("00000000000000a1"))])])
            == .array([.string("00000000000000a1")]))
    }

    /// A started queue: a Metalink of a file on two servers, one of them sending a corrupted copy.
    /// While it runs, getServers lists each fetching connection's URL and speed; the file ends
    /// identical (the piece hashes sent the bad server's piece elsewhere).
    /// An active task with no connection fetching (its server has not answered yet) has its file with
    /// no servers, as aria2 answers: `[]` made a client reading `result[0].servers` fail (exploratory
    /// run 11).
    @Test func getServersOfAnActiveTaskWithoutConnections() async throws {
        let silent = try TestServer()
        silent.addResource(name: "f.bin", bytes: metalinkBytes(seed: 8, count: 1 << 20))
        try silent.start()
        defer { silent.stop() }
        let root = makeTempDirectory()
        defer { removeTree(root) }
        let queue = try DownloadQueue(databasePath: root + "/q.sqlite", settings: QueueSettings(downloadRoot: root))
        let methods = Aria2Methods(queue: queue, policy: RPCPolicy(root: root, allowAnyDirectory: false), sessionID: "s", requestShutdown: { _ in })
        let rpc = RPCProcessor(secret: "tok", handler: methods)
        queue.start()
        let added = try rpc.call(method: "aria2.addUri", params: [.string("token:tok"), .array([.string(silent.url("f.bin", mode: .silent))])])
        let gid = try #require(added.stringValue)
        let status = try rpc.call(method: "aria2.tellStatus", params: [.string("token:tok"), .string(gid), .array([.string("status")])])
        #expect(status["status"]?.stringValue == "active")
        let servers = try rpc.call(method: "aria2.getServers", params: [.string("token:tok"), .string(gid)])
        #expect(servers == .array([.object([("index", .string("1")), ("servers", .array([]))])]), "\(servers)")
        await queue.shutdown(force: true)
    }

    @Test func getServersWhileActiveAndPiecesCheckedInTheDaemon() async throws {
        let body = metalinkBytes(seed: 7, count: 4 << 20)
        var bad = body
        for i in (1 << 20)..<((1 << 20) + 100_000) { bad[i] ^= 0x5A }
        let good = try TestServer()
        good.addResource(name: "f.bin", bytes: body, etag: "\"f\"")
        try good.start()
        let liar = try TestServer()
        liar.addResource(name: "f.bin", bytes: bad, etag: "\"f\"")
        try liar.start()
        defer { [good, liar].forEach { $0.stop() } }
        let root = makeTempDirectory()
        defer { removeTree(root) }
        var settings = QueueSettings(downloadRoot: root)
        settings.defaultConnections = 4
        let queue = try DownloadQueue(databasePath: root + "/q.sqlite", settings: settings)
        let methods = Aria2Methods(queue: queue, policy: RPCPolicy(root: root, allowAnyDirectory: false), sessionID: "s", requestShutdown: { _ in })
        let rpc = RPCProcessor(secret: "tok", handler: methods)
        queue.start()
        let urls = [good.url("f.bin", query: "rate=512k"), liar.url("f.bin", query: "rate=512k")]
        let doc = metalinkXML([MetalinkTestFile(name: "f.bin", bytes: body, urls: urls, priorities: [1, 2], pieceLength: 256 << 10)])
        let added = try rpc.call(method: "aria2.addMetalink", params: [.string("token:tok"), .string(base64(Array(doc.utf8)))])
        let gid = try #require(added.arrayValue?.first?.stringValue)
        var seen: JSON = .array([])
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            seen = try rpc.call(method: "aria2.getServers", params: [.string("token:tok"), .string(gid)])
            if let servers = seen.arrayValue?.first?["servers"]?.arrayValue, servers.count >= 2,
                servers.contains(where: { Int($0["downloadSpeed"]?.stringValue ?? "") ?? 0 > 0 })
            {
                break
            }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        let file = seen.arrayValue?.first
        #expect(file?["index"] == .string("1"), "\(seen)")
        let servers = file?["servers"]?.arrayValue ?? []
        #expect(servers.count >= 2, "\(seen)")
        for s in servers {
            #expect(urls.contains(s["uri"]?.stringValue ?? ""), "\(s)")
            #expect(s["currentUri"]?.stringValue?.hasPrefix("http://127.0.0.1:") == true, "\(s)")
            #expect(Int(s["downloadSpeed"]?.stringValue ?? "x") != nil, "\(s)")
        }
        #expect(servers.contains { Int($0["downloadSpeed"]?.stringValue ?? "") ?? 0 > 0 }, "\(seen)")
        var status = ""
        let end = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < end {
            let s = try rpc.call(method: "aria2.tellStatus", params: [.string("token:tok"), .string(gid), .array([.string("status"), .string("errorMessage")])])
            status = s["status"]?.stringValue ?? ""
            if status == "complete" || status == "error" { break }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(status == "complete")
        #expect(readAll(root + "/f.bin") == body, "identical after the bad server's piece was fetched again")
        #expect(liar.bodyBytesSent > 0, "the corrupting server served part of it")
        let after = try rpc.call(method: "aria2.getServers", params: [.string("token:tok"), .string(gid)])
        #expect(after == .array([]), "no servers once it is not active")
        await queue.shutdown(force: false)
    }
}

struct MetalinkTestFile {
    var name: String
    var bytes: [UInt8]
    var urls: [String]
    var priorities: [Int]
    var pieceLength: Int?
}

func metalinkXML(_ files: [MetalinkTestFile]) -> String {
    var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n"
    for f in files {
        xml += "<file name=\"\(f.name)\"><size>\(f.bytes.count)</size><hash type=\"sha-256\">\(hex(sha256(f.bytes)))</hash>\n"
        for (u, p) in zip(f.urls, f.priorities) { xml += "<url priority=\"\(p)\">\(u)</url>\n" }
        if let l = f.pieceLength {
            xml += "<pieces length=\"\(l)\" type=\"sha-256\">"
            var at = 0
            while at < f.bytes.count {
                xml += "<hash>\(hex(sha256(Array(f.bytes[at..<min(at + l, f.bytes.count)]))))</hash>"
                at += l
            }
            xml += "</pieces>\n"
        }
        xml += "</file>\n"
    }
    return xml + "</metalink>\n"
}

func sha256(_ bytes: [UInt8]) -> [UInt8] {
    let d = Digester(.sha256)
    d.update(bytes)
    return d.finalize()
}

func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
}

func base64(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    var out = ""
    var i = 0
    while i < bytes.count {
        let n = min(3, bytes.count - i)
        var v = UInt32(bytes[i]) << 16
        if n > 1 { v |= UInt32(bytes[i + 1]) << 8 }
        if n > 2 { v |= UInt32(bytes[i + 2]) }
        for k in 0..<4 { out.append(k <= n ? alphabet[Int(v >> UInt32(18 - 6 * k)) & 63] : "=") }
        i += 3
    }
    return out
}

/// Deterministic bytes (xorshift) for documents and served files.
func metalinkBytes(seed: UInt64, count: Int) -> [UInt8] {
    var x = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return (0..<count).map { _ in
        x ^= x << 13
        x ^= x >> 7
        x ^= x << 17
        return UInt8(truncatingIfNeeded: x)
    }
}

func readAll(_ path: String) -> [UInt8]? {
    guard let f = fopen(path, "rb") else { return nil }
    defer { fclose(f) }
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = fread(&buffer, 1, buffer.count, f)
        if n <= 0 { break }
        out += buffer[0..<n]
    }
    return out
}

import Testing

@testable import SeggetMetalink
import SeggetVerify

/// Builds Metalink 4 documents for the tests.
enum Meta4 {
    static let header = #"<?xml version="1.0" encoding="UTF-8"?>"#
    static func document(_ files: String, namespace: String = MetalinkDocument.namespace) -> [UInt8] {
        Array("\(header)\n<metalink xmlns=\"\(namespace)\">\n\(files)</metalink>\n".utf8)
    }
    static func file(
        _ name: String, size: Int64? = 1000, urls: [String] = ["http://127.0.0.1:1/a"], extra: String = ""
    ) -> String {
        let sizeLine = size.map { "<size>\($0)</size>" } ?? ""
        let urlLines = urls.enumerated().map { "<url priority=\"\($0.offset + 1)\">\($0.element)</url>" }.joined(separator: "\n")
        return "<file name=\"\(name)\">\(sizeLine)\n\(urlLines)\n\(extra)</file>\n"
    }
    static func pieces(_ hashes: [String], length: Int64, type: String = "sha-256") -> String {
        "<pieces length=\"\(length)\" type=\"\(type)\">" + hashes.map { "<hash>\($0)</hash>" }.joined() + "</pieces>"
    }
    static let sha = String(repeating: "ab", count: 32)
}

@Suite struct MetalinkParserTests {
    @Test func readsFilesURLsSizesHashesAndPieces() throws {
        let doc = Meta4.document("""
            <published>2026-11-29T00:00:00Z</published>
            <file name="big.iso">
              <size>3000</size>
              <hash type="sha-256">\(Meta4.sha)</hash>
              <hash type="md5">00112233445566778899aabbccddeeff</hash>
              <hash type="sha-3-256">ignored</hash>
              <url location="de" priority="2">http://de.example/big.iso</url>
              <url location="us" priority="1">https://us.example/big.iso</url>
              <url priority="3">ftp://ftp.example/big.iso</url>
              <url>http://last.example/big.iso</url>
              <metaurl mediatype="torrent">http://t.example/big.torrent</metaurl>
              \(Meta4.pieces([Meta4.sha, Meta4.sha, Meta4.sha], length: 1024))
            </file>
            """)
        let d = try MetalinkDocument(parsing: doc)
        #expect(d.files.count == 1)
        let f = d.files[0]
        #expect(f.name == "big.iso" && f.size == 3000)
        #expect(f.urls.map(\.url) == ["http://de.example/big.iso", "https://us.example/big.iso", "http://last.example/big.iso"])
        #expect(f.skippedURLs == 1)
        #expect(f.ordered().map(\.url) == ["https://us.example/big.iso", "http://de.example/big.iso", "http://last.example/big.iso"])
        #expect(f.ordered(preferring: "DE").first?.url == "http://de.example/big.iso")
        #expect(f.digests.count == 1 && f.digests[0].algorithm == .sha256)
        #expect(f.pieces?.count == 3 && f.pieces?.length == 1024 && f.pieces?.algorithm == .sha256)
    }

    @Test func severalFilesAndTheStrongestPieces() throws {
        let sha1 = String(repeating: "cd", count: 20)
        let doc = Meta4.document(
            Meta4.file("a.bin", size: 10, extra: Meta4.pieces([sha1], length: 16, type: "sha-1") + Meta4.pieces([Meta4.sha], length: 16))
                + Meta4.file("dir/b.bin", size: nil))
        let d = try MetalinkDocument(parsing: doc)
        #expect(d.files.map(\.name) == ["a.bin", "dir/b.bin"])
        #expect(d.files[0].pieces?.algorithm == .sha256)
        #expect(d.files[1].fileName == "b.bin" && d.files[1].size == nil && d.files[1].pieces == nil)
        #expect(d.files[0].subdirectory == nil && d.files[1].subdirectory == "dir")
    }

    /// RFC 5854 names may hold directories; two files of one base name in different directories are
    /// two files (aria2 saves both), the same name twice is refused.
    @Test func namesWithDirectoriesAreKeptApart() throws {
        let d = try MetalinkDocument(parsing: Meta4.document(
            Meta4.file("iso/x86/boot.iso") + Meta4.file("iso/arm/boot.iso") + Meta4.file("boot.iso")))
        #expect(d.files.map(\.subdirectory) == ["iso/x86", "iso/arm", nil])
        #expect(d.files.map(\.fileName) == ["boot.iso", "boot.iso", "boot.iso"])
        #expect(throws: MetalinkError.self) {
            try MetalinkDocument(parsing: Meta4.document(Meta4.file("iso/boot.iso") + Meta4.file("iso/boot.iso")))
        }
        // Which described file a local path is.
        #expect(d.file(for: "/tmp/out/iso/arm/boot.iso")?.name == "iso/arm/boot.iso")
        #expect(d.file(for: "iso/x86/boot.iso")?.name == "iso/x86/boot.iso")
        #expect(d.file(for: "boot.iso")?.name == "boot.iso")
        #expect(d.file(for: "x86/boot.iso")?.name == "boot.iso")  // the whole name "boot.iso" ends it
        #expect(d.file(for: "other.iso") == nil)
        let two = try MetalinkDocument(parsing: Meta4.document(Meta4.file("a/boot.iso") + Meta4.file("b/boot.iso")))
        #expect(two.file(for: "boot.iso") == nil, "two fit: neither is chosen")
        #expect(two.file(for: "c/b/boot.iso")?.name == "b/boot.iso")
        let one = try MetalinkDocument(parsing: Meta4.document(Meta4.file("a/boot.iso")))
        #expect(one.file(for: "renamed.iso")?.name == "a/boot.iso", "a document of one file describes it")
        for bad in ["iso//boot.iso", "iso/./boot.iso", "iso/../boot.iso", "iso/", "/iso/boot.iso", "iso\\boot.iso"] {
            #expect(throws: MetalinkError.self, "\(bad)") { try MetalinkDocument(parsing: Meta4.document(Meta4.file(bad))) }
        }
    }

    @Test func prefixedNamespaceAndCDATAAndComments() throws {
        let doc = Array("""
            <?xml version="1.0"?>
            <!-- a comment -->
            <m:metalink xmlns:m="urn:ietf:params:xml:ns:metalink" xmlns:x="urn:other">
              <m:file name="c.bin"><m:size>5</m:size><x:url>http://ignored.example/</x:url>
              <m:url><![CDATA[http://127.0.0.1:9/c.bin]]></m:url></m:file>
            </m:metalink>
            """.utf8)
        let d = try MetalinkDocument(parsing: doc)
        #expect(d.files[0].urls.map(\.url) == ["http://127.0.0.1:9/c.bin"])
    }

    /// Each hostile or inconsistent document is refused with a sentence naming the problem.
    @Test(arguments: [
        ("<?xml version=\"1.0\"?><!DOCTYPE m [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]><metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"&b;\"><url>http://x/</url></file></metalink>", "document type declaration"),
        ("<?xml version=\"1.0\"?><!DOCTYPE m SYSTEM \"file:///etc/passwd\"><metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"/>", "document type declaration"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><url>http://x/&ext;</url></file></metalink>", "not well-formed"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><url>http://x/</file></metalink>", "not well-formed"),
        ("<metalink version=\"3.0\" xmlns=\"http://www.metalinker.org/\"><files/></metalink>", "Metalink 3"),
        ("<feed xmlns=\"http://www.w3.org/2005/Atom\"/>", "not a Metalink 4"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"></metalink>", "describes no file"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><url>/relative/a</url><url>ftp://f/a</url></file></metalink>", "no http:// or https:// URL"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"../../etc/passwd\"><url>http://x/</url></file></metalink>", "not a safe relative path"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"/etc/passwd\"><url>http://x/</url></file></metalink>", "not a safe relative path"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file><url>http://x/</url></file></metalink>", "has no name"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><url>http://x/</url></file><file name=\"a\"><url>http://y/</url></file></metalink>", "twice"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><size>99999999999999999999999</size><url>http://x/</url></file></metalink>", "not a number of bytes"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><size>-5</size><url>http://x/</url></file></metalink>", "not a number of bytes"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><size>18014398509481984</size><url>http://x/</url></file></metalink>", "not a number of bytes"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><size>100</size><url>http://x/</url><hash type=\"sha-256\">abcd</hash></file></metalink>", "64 hex digits"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><size>5000</size><url>http://x/</url><pieces length=\"1024\" type=\"sha-256\"><hash>\(String(repeating: "0", count: 64))</hash></pieces></file></metalink>", "needs 5"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><url>http://x/</url><pieces length=\"1024\" type=\"sha-256\"><hash>\(String(repeating: "0", count: 64))</hash></pieces></file></metalink>", "not its size"),
        ("<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><size>5</size><url>http://x/</url><pieces length=\"0\" type=\"sha-256\"></pieces></file></metalink>", "no length"),
    ])
    func refusesHostileDocuments(_ text: String, _ says: String) {
        #expect {
            try MetalinkDocument.forDownload(parsing: Array(text.utf8))
        } throws: { error in
            "\(error)".contains(says)
        }
    }

    @Test func deepNestingIsRefused() {
        let open = String(repeating: "<x>", count: 100)
        let close = String(repeating: "</x>", count: 100)
        let doc = Meta4.document("<file name=\"a\"><url>http://x/</url>\(open)\(close)</file>")
        #expect(throws: MetalinkError.self) { try MetalinkDocument(parsing: doc) }
        var limits = MetalinkLimits()
        limits.depth = 200
        #expect(throws: Never.self) { try MetalinkDocument(parsing: doc, limits: limits) }
    }

    @Test func boundsOnBytesFilesURLsPiecesAndText() {
        var limits = MetalinkLimits()
        limits.documentBytes = 100
        #expect(throws: MetalinkError.self) { try MetalinkDocument(parsing: Meta4.document(Meta4.file("a")), limits: limits) }
        limits = MetalinkLimits()
        limits.files = 2
        let three = Meta4.document(Meta4.file("a") + Meta4.file("b") + Meta4.file("c"))
        #expect(throws: MetalinkError.self) { try MetalinkDocument(parsing: three, limits: limits) }
        limits = MetalinkLimits()
        limits.urlsPerFile = 2
        let urls = Meta4.document(Meta4.file("a", urls: ["http://a/", "http://b/", "http://c/"]))
        #expect(throws: MetalinkError.self) { try MetalinkDocument(parsing: urls, limits: limits) }
        limits = MetalinkLimits()
        limits.pieces = 2
        let pieces = Meta4.document(Meta4.file("a", size: 3000, extra: Meta4.pieces([Meta4.sha, Meta4.sha, Meta4.sha], length: 1024)))
        #expect(throws: MetalinkError.self) { try MetalinkDocument(parsing: pieces, limits: limits) }
        limits = MetalinkLimits()
        limits.textBytes = 64
        let long = Meta4.document(Meta4.file("a", urls: ["http://x/" + String(repeating: "a", count: 100)]))
        #expect(throws: MetalinkError.self) { try MetalinkDocument(parsing: long, limits: limits) }
    }

    @Test func aDescribingMetalinkMayListNoURL() throws {
        let doc = Meta4.document(Meta4.file("a", urls: []))
        #expect(try MetalinkDocument(parsing: doc).files[0].urls.isEmpty)
        #expect(throws: MetalinkError.self) { try MetalinkDocument.forDownload(parsing: doc) }
    }

    @Test func utf16AndNULBytesAreRefused() {
        var doc: [UInt8] = [0xFF, 0xFE]
        for b in Meta4.document(Meta4.file("a")) { doc += [b, 0] }
        #expect(throws: MetalinkError.self) { try MetalinkDocument(parsing: doc) }
    }

    @Test func namesInMessagesAreEscaped() {
        let doc = Meta4.document("<file name=\"a&#x202e;b\\c\"><url>ftp://x/</url></file>")
        #expect {
            try MetalinkDocument.forDownload(parsing: doc)
        } throws: { error in
            let text = "\(error)"
            return !text.unicodeScalars.contains { $0.value == 0x202E } && text.contains("'a\\u{202e}b\\\\c'")
        }
    }

    /// Random mutations of a valid document never crash the parser: each is read or refused.
    @Test func fuzzedDocumentsAreReadOrRefused() {
        let base = Meta4.document(
            Meta4.file("f.bin", size: 2048, urls: ["http://a/f", "https://b/f"], extra: Meta4.pieces([Meta4.sha, Meta4.sha], length: 1024)))
        var rng = SplitMix(seed: 40)
        let alphabet = Array("<>/&;\"'=!?[]xmlns:abc \n\u{0}#-".utf8)
        var read = 0, refused = 0
        for _ in 0..<3000 {
            var doc = base
            for _ in 0..<(1 + Int(rng.next() % 4)) {
                let at = Int(rng.next() % UInt64(doc.count))
                switch rng.next() % 3 {
                case 0: doc[at] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                case 1: doc.remove(at: at)
                default: doc.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: at)
                }
            }
            do {
                let d = try MetalinkDocument.forDownload(parsing: doc)
                #expect(!d.files.isEmpty && d.files.allSatisfy { !$0.urls.isEmpty })
                read += 1
            } catch {
                #expect(!error.message.isEmpty && error.message.hasSuffix("."))
                refused += 1
            }
        }
        #expect(read > 0 && refused > 0)
    }
}

/// A small deterministic generator for the fuzz test.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

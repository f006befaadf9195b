import Foundation
import Testing

@testable import Segget

/// The response heads that real servers sent (Apache, lighttpd, Caddy, h2o, nginx over HTTP/1.1 and
/// HTTP/2, Varnish, squid and a SOCKS5 proxy in front of nginx, moto's S3 server, Python's
/// http.server), recorded by `scripts/record-heads` into `Fixtures/server-heads.txt` as curl printed
/// them. Each is read line by line by both header readers, which must agree, and judged as the answer
/// to the range that was asked: a 206 is accepted, also when continued from an offset inside it (the
/// probe's held answer taken over by the fetch); a 200 to a range means "no ranges"; a plain GET is a
/// stream of the whole file.
@Suite struct RecordedServerHeadsTests {
    struct Record {
        var server: String
        var request: String
        /// The head's lines as received, each with its line ending.
        var lines: [Substring]
    }

    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/server-heads.txt")

    /// The records and the length of the file they were recorded for.
    static func load() throws -> (size: Int64, records: [Record]) {
        let text = try String(contentsOf: fixture, encoding: .utf8)
        var size: Int64 = 0
        var records: [Record] = []
        // Split after each "\n" so that every line keeps its "\r\n" as curl printed it. A Character
        // walk would see "\r\n" as one Character; the split is on the UTF-8 bytes.
        var start = text.startIndex
        var lines: [Substring] = []
        for i in text.utf8.indices where text.utf8[i] == UInt8(ascii: "\n") {
            let next = text.utf8.index(after: i)
            lines.append(text[start..<next])
            start = next
        }
        for line in lines {
            let bare = line.trimmingCharacters(in: .newlines)
            if bare.hasPrefix("# size ") {
                size = Int64(bare.dropFirst("# size ".count)) ?? 0
            } else if bare.hasPrefix("#") {
                continue
            } else if bare.hasPrefix("=== ") {
                let parts = bare.dropFirst(4).components(separatedBy: " | ")
                records.append(Record(server: parts[0], request: parts.count > 1 ? parts[1] : "", lines: []))
            } else if !records.isEmpty {
                records[records.count - 1].lines.append(line)
            }
        }
        return (size, records)
    }

    static func read(_ lines: [Substring], reference: Bool) -> ResponseHead {
        var head = ResponseHead()
        for line in lines {
            if reference { head.append(referenceLine: line) } else { head.append(line: line) }
        }
        return head
    }

    /// The bytes a record's request asked for ("range 0-1023", "range 5000-", "plain").
    static func asked(_ request: String, size: Int64) -> Range<Int64>? {
        guard request.hasPrefix("range ") else { return nil }
        let spec = request.dropFirst("range ".count).prefix { $0 != " " }
        let ends = spec.split(separator: "-", omittingEmptySubsequences: false)
        guard ends.count == 2, let first = Int64(ends[0]) else { return nil }
        let last = ends[1].isEmpty ? size - 1 : Int64(ends[1]) ?? -1
        return first..<(last + 1)
    }

    @Test func everyRecordedHeadIsReadAlikeAndJudgedAsAsked() throws {
        let (size, records) = try Self.load()
        #expect(size > 5000)
        var partial = 0, ignored = 0, streams = 0
        var http2Partial = Set<String>()
        for r in records {
            let fast = Self.read(r.lines, reference: false)
            let reference = Self.read(r.lines, reference: true)
            let label = "\(r.server) | \(r.request)"
            #expect(fast == reference, "\(label): the readers differ")
            #expect(fast.isComplete, "\(label): the head never ended")
            #expect(fast.framingProblem == nil, "\(label): \(String(describing: fast.framingProblem))")
            // The file's own validators: nothing changed between the requests.
            let etag = fast.unsafeRawValue("etag"), lastModified = fast.unsafeRawValue("last-modified")
            guard let range = Self.asked(r.request, size: size) else {
                let q = ResponseQuestion(
                    range: 0..<size, ranged: false, totalLength: size, etag: etag, lastModified: lastModified,
                    url: "http://recorded/")
                #expect(fast.status == 200, "\(label): plain GET answered \(fast.status)")
                #expect(ResponseVerdict(for: q, head: fast) == .accept, "\(label)")
                streams += 1
                continue
            }
            let q = ResponseQuestion(
                range: range, ranged: true, totalLength: size, etag: etag, lastModified: lastModified,
                url: "http://recorded/")
            let verdict = ResponseVerdict(for: q, head: fast)
            switch fast.status {
            case 206:
                partial += 1
                if fast.httpVersion.description.hasPrefix("HTTP/2") { http2Partial.insert(r.server) }
                #expect(verdict == .accept, "\(label): \(verdict)")
                for offset in [range.lowerBound + 1, range.lowerBound + Int64(range.count / 2), range.upperBound - 1] {
                    let continued = fast.continuing(from: offset, to: range.upperBound, total: size)
                    let q2 = ResponseQuestion(
                        range: offset..<range.upperBound, ranged: true, totalLength: size, etag: etag,
                        lastModified: lastModified, url: "http://recorded/")
                    #expect(ResponseVerdict(for: q2, head: continued) == .accept, "\(label) continued from \(offset)")
                    #expect(continued.framingProblem == nil, "\(label) continued from \(offset)")
                }
            case 200:
                ignored += 1
                guard case .rangesIgnored = verdict else {
                    Issue.record("\(label): a 200 to a range judged \(verdict)")
                    continue
                }
            default:
                Issue.record("\(label): status \(fast.status) to \(r.request)")
            }
        }
        // 18 servers and protocols, four requests each: every ranged server answered its three ranges
        // with 206, Python's http.server with 200; HTTP/2 answers came from four servers.
        #expect(records.count == 72, "\(records.count) records")
        #expect(
            partial == 51 && ignored == 3 && streams == 18,
            "206: \(partial), 200 to a range: \(ignored), plain: \(streams)")
        #expect(http2Partial.count == 4, "\(http2Partial.sorted())")
    }
}

import Glibc
import Synchronization
import SeggetTestServer
import Testing

/// A loopback HTTP/1.1 server that answers its first requests with `answers` in turn (bytes as
/// given, so a header may carry bytes that are not UTF-8, and closes the connection after each) and
/// every later one with a 404, one connection at a time, and records each request line's bytes.
final class ByteResponder: @unchecked Sendable {
    private let listener: Int32
    let port: Int
    private let lines = Mutex<[[UInt8]]>([])
    private let answers: [[UInt8]]
    private var thread: pthread_t?

    convenience init(first: [UInt8]) throws { try self.init(answers: [first]) }

    init(answers: [[UInt8]]) throws {
        self.answers = answers
        (listener, port) = try loopbackListener(backlog: 8)
        let box = Unmanaged.passRetained(self).toOpaque()
        var t = pthread_t()
        pthread_create(&t, nil, { ud in
            let me = Unmanaged<ByteResponder>.fromOpaque(ud!).takeRetainedValue()
            me.serve()
            return nil
        }, box)
        thread = t
    }

    var requestLines: [[UInt8]] { lines.withLock { $0 } }

    /// Stops accepting; the serving thread ends at its next `accept`.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        if let thread { pthread_join(thread, nil) }
        close(listener)
    }

    private func serve() {
        while true {
            let c = accept(listener, nil, nil)
            guard c >= 0 else { return }
            var head: [UInt8] = []
            var buf = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(c, &buf, buf.count)
                guard n > 0 else { break }
                head += buf[0..<n]
                if head.count >= 4, head.suffix(4) == [13, 10, 13, 10] { break }
            }
            if let end = head.firstIndex(of: 13) {
                let count = lines.withLock { l -> Int in
                    l.append(Array(head[..<end]))
                    return l.count
                }
                let answer = count <= answers.count ? answers[count - 1] : Array("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
                _ = answer.withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
            }
            close(c)
        }
    }
}

/// A redirect's `Location` is followed with the bytes the server sent: a line that is not UTF-8
/// is read as Latin-1 for messages, and its bytes from 0x80 up are percent-encoded as they are.
@Suite(.serialized) struct RedirectBytesTests {
    static func redirect(to location: [UInt8]) -> [UInt8] {
        Array("HTTP/1.1 302 Found\r\nLocation: ".utf8) + location + Array("\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
    }

    /// The bytes of each `Location`, and the request line that must follow it.
    static let cases: [([UInt8], String)] = [
        // A Latin-1 é (not UTF-8): asked as %E9, not as the UTF-8 of the character it shows as.
        (Array("/caf\u{E9}.bin".unicodeScalars.map { UInt8($0.value) }), "GET /caf%E9.bin HTTP/1.1"),
        // A UTF-8 é: its two bytes.
        (Array("/caf\u{E9}.bin".utf8), "GET /caf%C3%A9.bin HTTP/1.1"),
        // A space, as curl follows it.
        (Array("/a b.bin".utf8), "GET /a%20b.bin HTTP/1.1"),
    ]

    @Test(arguments: cases)
    func theLocationsBytesAreWhatIsAsked(location: [UInt8], expected: String) throws {
        let server = try ByteResponder(first: Self.redirect(to: location))
        defer { server.stop() }
        let dir = try TempDir(prefix: "segget-redirect-bytes")
        let r = try runSegget(args: ["--retries", "0", "-o", dir.path("f.bin"), "http://127.0.0.1:\(server.port)/start"], timeout: 30)
        #expect(r.exitCode == 4, "\(r.stderr)")
        let asked = server.requestLines.map { String(decoding: $0, as: UTF8.self).uppercased() }
        #expect(asked.count == 2 && asked[1] == expected.uppercased(), "\(asked) / \(r.stderr)")
        #expect(rawControls(in: r.stderr).isEmpty)
    }
}

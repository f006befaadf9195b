import Testing

@testable import SeggetCurl

@Suite struct Latin1Tests {
    /// Header bytes read as UTF-8 when they are valid UTF-8 and as Latin-1 otherwise; the ASCII
    /// shortcut gives the same string.
    @Test func decodesLikeTheReference() {
        let pieces: [[UInt8]] = [
            Array("Content-Length: 42".utf8), [0x0D, 0x0A], [0x20], [0x7F], [0x00], [0xC3, 0xA9], [0xE9], [0xFF],
            [0xCC, 0x81], [0x80], Array("HTTP/1.1 200 OK".utf8), [],
        ]
        var state: UInt64 = 0x5EED_0009
        for _ in 0..<5_000 {
            var bytes: [UInt8] = []
            for _ in 0..<4 {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                bytes += pieces[Int(state >> 33) % pieces.count]
            }
            let reference =
                String(validating: bytes, as: UTF8.self)
                ?? String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
            let decoded = bytes.withUnsafeBytes { decodingLatin1($0) }
            #expect(decoded == reference && decoded.utf8.elementsEqual(reference.utf8), "\(bytes)")
        }
        #expect([UInt8]([0x61, 0xE9]).withUnsafeBytes { decodingLatin1($0) } == "a\u{E9}")
    }
}

import Testing
@testable import Segget

/// `DerivedETag`: the wordings of `ETag`s that servers derive from a file's time and size, read from
/// the heads Debian 12's servers sent for one 1,048,577-byte file (`Fixtures/server-heads.txt`), and
/// what is not one of them.
@Suite struct DerivedETagTests {
    static let length: Int64 = 1_048_577
    /// Sun, 29 Nov 2026 03:05:23 GMT, the file's `Last-Modified` in those heads.
    static let modified: Int64 = 1_795_921_523

    func wording(_ etag: String, length: Int64 = length, modified: Int64 = modified) -> DerivedETag? {
        DerivedETag(etag, length: length, modified: modified)
    }

    @Test func theRecordedServersWordings() {
        #expect(parseIMFFixdate("Sun, 29 Nov 2026 03:05:23 GMT") == Self.modified)
        #expect(wording("\"6b0b9673-100001\"") == .mtimeSize)  // nginx 1.22, h2o 2.2
        #expect(wording("\"100001-6616190777da7\"") == .sizeMicroseconds)  // Apache 2.4
        #expect(wording("\"tp8twzmh35\"") == .base36)  // Caddy 2.6
    }

    /// A wording that decodes to another length or time says another version: none.
    @Test func anotherLengthOrTimeIsNone() {
        #expect(wording("\"6b0b9673-100001\"", length: Self.length - 1) == nil)
        #expect(wording("\"6b0b9673-100001\"", modified: Self.modified + 1) == nil)
        // nginx's copy of the file 8 s newer (varnish in front of nginx, recorded the same day).
        #expect(wording("\"6b0b967b-100001\"") == nil)
        #expect(wording("\"100001-6616190777da7\"", modified: Self.modified - 1) == nil)
        #expect(wording("\"tp8twzmh35\"", length: Self.length + 1) == nil)
        #expect(wording("\"tp8twzmh35\"", modified: Self.modified + 36) == nil)
    }

    /// Weak validators, content hashes, lighttpd's hash, Apache's with the inode, and what is not an
    /// `ETag` at all are none: such `ETag`s are compared as they stand.
    @Test func othersAreNone() {
        for etag in [
            "W/\"6b0b9673-100001\"", "\"4127956370\"", "\"7320ef4f18aa47976b083e749d3af305\"",
            "\"2a0c1f-100001-6616190777da7\"", "6b0b9673-100001", "\"\"", "\"-\"", "\"6b0b9673-\"",
            "\"6B0B9673-100001\"", "\"6b0b9673-100001-\"", "\"mh35\"", "\"zzzzzzzzzzzzzzzzzzzzmh35\"",
            "\"ffffffffffffffffffff-100001\"",
        ] {
            #expect(wording(etag) == nil, "\(etag)")
        }
    }
}

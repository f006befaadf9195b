import SeggetVerify

/// Where an expected digest came from, so that a mismatch says whom to doubt: the digest segget was
/// given (`--checksum`, a checksum file, `checksum=` in an input file, a Metalink file), one of the
/// server's fields (`Repr-Digest`, `Digest`, `Content-MD5`), or else a Metalink the server pointed
/// to. A digest given to segget is named first: the server's for the same algorithm is not checked.
struct DigestOrigin: Sendable {
    struct Named: Equatable {
        /// What the message says in brackets after the expected digest.
        let phrase: String
        /// The server's field, where the digest is the server's.
        let field: String?
    }

    private let given: [ExpectedDigest]
    private let fields: [(name: String, digests: [ExpectedDigest])]

    init(given: [ExpectedDigest], reprDigest: String?, digest: String?, contentMD5: String?) {
        self.given = given
        fields = [
            ("Repr-Digest", ServerDigests.parse(reprDigest: reprDigest, digest: nil, contentMD5: nil)),
            ("Digest", ServerDigests.parse(reprDigest: nil, digest: digest, contentMD5: nil)),
            ("Content-MD5", ServerDigests.parse(reprDigest: nil, digest: nil, contentMD5: contentMD5)),
        ]
    }

    func of(_ e: ExpectedDigest) -> Named {
        if given.contains(e) { return Named(phrase: "the digest segget was given", field: nil) }
        if let f = fields.first(where: { $0.digests.contains(e) }) {
            return Named(phrase: "from the server's \(f.name) field", field: f.name)
        }
        return Named(phrase: "from the Metalink the server pointed to", field: nil)
    }
}

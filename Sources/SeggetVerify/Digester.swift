import CCrypto

/// A digest algorithm segget can verify a download with.
///
/// The raw value is the lower-case name used in checksum specs (`sha256=HEX`) and on the command line.
public enum DigestAlgorithm: String, Sendable, CaseIterable {
    case sha256
    case md5
    /// SHA-1 and SHA-512: only as a Metalink names them (whole-file and piece hashes). `--checksum`,
    /// checksum files and server digest headers take SHA-256 and MD5 (`checkable`).
    case sha1
    case sha512

    /// The algorithms of `--checksum`, checksum files and servers' digest headers.
    public static let checkable: [DigestAlgorithm] = [.sha256, .md5]

    /// The length of a digest in bytes: 32 for SHA-256, 16 for MD5, 20 for SHA-1, 64 for SHA-512.
    public var digestLength: Int {
        switch self {
        case .sha256: 32
        case .md5: 16
        case .sha1: 20
        case .sha512: 64
        }
    }

    /// The name people write, for messages: "SHA-256", "MD5", "SHA-1" or "SHA-512".
    public var displayName: String {
        switch self {
        case .sha256: "SHA-256"
        case .md5: "MD5"
        case .sha1: "SHA-1"
        case .sha512: "SHA-512"
        }
    }

    /// The name in IANA's registry of hash function textual names, which Metalink and aria2's
    /// `checksum` option use: "sha-256", "md5", "sha-1", "sha-512".
    public var textualName: String {
        switch self {
        case .sha256: "sha-256"
        case .md5: "md5"
        case .sha1: "sha-1"
        case .sha512: "sha-512"
        }
    }

    /// The algorithm of IANA's textual `name` (any case), if segget computes it.
    public init?(textualName name: String) {
        guard let match = Self.allCases.first(where: { $0.textualName == name.lowercased() }) else { return nil }
        self = match
    }

    /// The checkable algorithm whose digests are `byteCount` bytes long, if exactly one is.
    init?(digestLength byteCount: Int) {
        guard let match = Self.checkable.first(where: { $0.digestLength == byteCount }) else { return nil }
        self = match
    }

    /// OpenSSL's description of the algorithm; a static object owned by libcrypto, never freed.
    ///
    /// The corresponding C functions are `EVP_sha256`, `EVP_md5`, `EVP_sha1` and `EVP_sha512`.
    var evpMessageDigest: OpaquePointer? {
        switch self {
        case .sha256: EVP_sha256()
        case .md5: EVP_md5()
        case .sha1: EVP_sha1()
        case .sha512: EVP_sha512()
        }
    }
}

/// An incremental digest over OpenSSL EVP. Not thread-safe; one owner at a time.
///
/// Feed bytes with `update` in pieces of any size, then call `finalize`. After `finalize` the digester
/// starts over, as if newly made, so one digester can hash several inputs in turn.
public final class Digester {
    /// The algorithm this digester computes.
    public let algorithm: DigestAlgorithm
    private let context: OpaquePointer

    /// Makes a digester for `algorithm`.
    ///
    /// Stops the program if OpenSSL cannot allocate or initialise a context: that means memory is exhausted
    /// or libcrypto is unusable (for instance a FIPS-only configuration refusing MD5), neither of which a
    /// caller could recover from. The corresponding C functions are `EVP_MD_CTX_new` and `EVP_DigestInit_ex`.
    public init(_ algorithm: DigestAlgorithm) {
        self.algorithm = algorithm
        Self.openSSLInitialised
        guard let context = EVP_MD_CTX_new() else {
            fatalError("OpenSSL could not allocate a digest context (out of memory)")
        }
        self.context = context
        start()
    }

    deinit {
        EVP_MD_CTX_free(context)
    }

    /// OpenSSL initialised, before its first use, to keep its state until the process is gone: a
    /// hashing thread may free its context while the process exits (as a writer freed a batch's TLS
    /// connections, issue 38), and OpenSSL's default exit handler would have freed that state first.
    private static let openSSLInitialised: Void = { _ = segget_crypto_without_atexit() }()

    /// Whether OpenSSL can still be used (false once it freed its global state); for `DigestAtExitTests`.
    public static var openSSLUsable: Bool { segget_crypto_usable() == 1 }

    /// Adds `bytes` to the digest.
    ///
    /// The corresponding C function is `EVP_DigestUpdate`.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        // An empty buffer may have a nil base address; there is nothing to add anyway.
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        guard EVP_DigestUpdate(context, base, bytes.count) == 1 else {
            fatalError("OpenSSL EVP_DigestUpdate failed for \(algorithm.displayName)")
        }
    }

    /// Adds `bytes` to the digest.
    ///
    /// The corresponding C function is `EVP_DigestUpdate`.
    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Returns the digest of everything added since the digester was made or last finalized, and starts over.
    ///
    /// The corresponding C function is `EVP_DigestFinal_ex`.
    public func finalize() -> [UInt8] {
        var length: UInt32 = 0
        let digest = [UInt8](unsafeUninitializedCapacity: Int(EVP_MAX_MD_SIZE)) { buffer, initialized in
            guard EVP_DigestFinal_ex(context, buffer.baseAddress, &length) == 1 else {
                fatalError("OpenSSL EVP_DigestFinal_ex failed for \(algorithm.displayName)")
            }
            initialized = Int(length)
        }
        start()
        return digest
    }

    /// (Re)initialises the context for `algorithm`; needed after `EVP_DigestFinal_ex`, which leaves it spent.
    private func start() {
        guard EVP_DigestInit_ex(context, algorithm.evpMessageDigest, nil) == 1 else {
            fatalError("OpenSSL could not initialise a \(algorithm.displayName) digest")
        }
    }
}

/// Formats bytes as lower-case hexadecimal, two digits per byte, as `sha256sum` prints them.
public func hexString(_ bytes: [UInt8]) -> String {
    let digits: [UInt8] = Array("0123456789abcdef".utf8)
    var characters: [UInt8] = []
    characters.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        characters.append(digits[Int(byte >> 4)])
        characters.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: characters, as: UTF8.self)
}

/// Parses an even-length string of hexadecimal digits (either case) into bytes; nil if it is anything else.
public func decodeHex(_ hex: Substring) -> [UInt8]? {
    let utf8 = Array(hex.utf8)
    guard utf8.count % 2 == 0 else { return nil }
    var result: [UInt8] = []
    result.reserveCapacity(utf8.count / 2)
    var index = 0
    while index < utf8.count {
        guard let high = hexValue(utf8[index]), let low = hexValue(utf8[index + 1]) else { return nil }
        result.append(high << 4 | low)
        index += 2
    }
    return result
}

/// The value of one ASCII hex digit, or nil.
func hexValue(_ character: UInt8) -> UInt8? {
    switch character {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
    default: nil
    }
}

/// A digest a download must match: an algorithm and the bytes it must produce.
public struct ExpectedDigest: Sendable, Equatable {
    /// The algorithm the digest was made with.
    public let algorithm: DigestAlgorithm
    /// The digest itself, exactly `algorithm.digestLength` bytes.
    public let bytes: [UInt8]

    /// The digest as lower-case hexadecimal.
    public var hex: String { hexString(bytes) }

    /// Makes an expected digest from raw bytes; nil unless there are exactly `algorithm.digestLength` of them.
    public init?(algorithm: DigestAlgorithm, bytes: [UInt8]) {
        guard bytes.count == algorithm.digestLength else { return nil }
        self.algorithm = algorithm
        self.bytes = bytes
    }

    /// Parses "sha256=HEX", "sha-256=HEX", "md5=HEX", any case; throws ChecksumSpecError with a one-sentence
    /// message saying what's wrong and the accepted forms.
    ///
    /// Surrounding white space is ignored, so a value pasted from a web page with a trailing newline works.
    public init(parsing spec: String) throws {
        let trimmed = spec.trimmingASCIIWhitespace()
        guard !trimmed.isEmpty else {
            throw ChecksumSpecError("The checksum is empty; \(ChecksumSpecError.acceptedForms).")
        }
        guard let equals = trimmed.firstIndex(of: "=") else {
            if decodeHex(trimmed) != nil {
                throw ChecksumSpecError(
                    "The checksum “\(trimmed.abbreviated)” does not name its algorithm; "
                        + "\(ChecksumSpecError.acceptedForms)."
                )
            }
            throw ChecksumSpecError(
                "The checksum “\(trimmed.abbreviated)” is not of the form ALGORITHM=HEX; "
                    + "\(ChecksumSpecError.acceptedForms)."
            )
        }
        let name = trimmed[..<equals].trimmingASCIIWhitespace()
        let hex = trimmed[trimmed.index(after: equals)...].trimmingASCIIWhitespace()
        guard let algorithm = DigestAlgorithm(specName: name) else {
            let shown = name.isEmpty ? "(none)" : "“\(name.abbreviated)”"
            throw ChecksumSpecError(
                "The checksum algorithm \(shown) is not supported; \(ChecksumSpecError.acceptedForms)."
            )
        }
        let expectedDigits = algorithm.digestLength * 2
        if let bad = hex.unicodeScalars.first(where: { !$0.isASCII || hexValue(UInt8($0.value)) == nil }) {
            throw ChecksumSpecError(
                "The \(algorithm.displayName) checksum contains “\(bad)”, which is not a hex digit; "
                    + "write \(expectedDigits) digits 0-9 and a-f after “\(name)=”."
            )
        }
        guard hex.utf8.count == expectedDigits, let digest = decodeHex(hex) else {
            throw ChecksumSpecError(
                "The \(algorithm.displayName) checksum has \(hex.utf8.count) hex \(hex.utf8.count == 1 ? "digit" : "digits") but needs "
                    + "\(expectedDigits); check that it was copied whole."
            )
        }
        self.algorithm = algorithm
        self.bytes = digest
    }
}

/// A checksum spec or checksum file that cannot be used, with a one-sentence explanation for the user.
public struct ChecksumSpecError: Error, CustomStringConvertible, Sendable {
    /// What is wrong and how to write it instead, as one sentence.
    public let description: String

    init(_ description: String) {
        self.description = description
    }

    static let acceptedForms = "write sha256=HEX (64 hex digits), sha-256=HEX or md5=HEX (32 hex digits)"
}

extension DigestAlgorithm {
    /// Reads the algorithm name of a checksum spec or BSD checksum line: "sha256", "SHA-256", "sha2-256", "md5".
    init?(specName name: Substring) {
        switch name.lowercased() {
        case "sha256", "sha-256", "sha2-256": self = .sha256
        case "md5": self = .md5
        default: return nil
        }
    }
}

extension StringProtocol {
    /// The text without leading and trailing ASCII spaces, tabs, carriage returns and line feeds.
    func trimmingASCIIWhitespace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
        let whole = self[...]
        guard let first = whole.firstIndex(where: { !isSpace($0) }),
            let last = whole.lastIndex(where: { !isSpace($0) })
        else { return Substring() }
        return Substring(whole[first...last])
    }

    /// The text cut to at most 80 characters, so a pasted page does not flood an error message.
    var abbreviated: String {
        count <= 80 ? String(self) : String(prefix(77)) + "..."
    }
}

import SeggetSystem
import SeggetVerify

/// The first bytes of the file that a probe kept (`ProbeResult.prefix`): in an array, or, for a file
/// the answer brings whole, in a `FilledBuffer` whose pages were mapped before the first byte came.
public struct ProbeBytes: Sendable, Equatable, ExpressibleByArrayLiteral {
    private enum Storage: Sendable {
        case array([UInt8])
        /// The buffer and how many of its bytes this value holds: a buffer only ever grows at its
        /// end, so the bytes a value holds never change after it was made.
        case filled(FilledBuffer, count: Int)
    }

    private let storage: Storage

    public init(_ bytes: [UInt8] = []) { storage = .array(bytes) }
    public init(arrayLiteral elements: UInt8...) { storage = .array(elements) }
    init(_ buffer: FilledBuffer) { storage = .filled(buffer, count: buffer.count) }

    public var count: Int {
        switch storage {
        case .array(let a): a.count
        case .filled(_, let count): count
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// Calls `body` with the bytes, valid only inside it.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        switch storage {
        case .array(let a):
            var result: Result<R, E>?
            a.withUnsafeBytes { raw in
                do throws(E) { result = .success(try body(raw)) } catch { result = .failure(error) }
            }
            return try result!.get()
        case .filled(let b, let count):
            defer { withExtendedLifetime(b) {} }
            return try body(UnsafeRawBufferPointer(rebasing: b.bytes.prefix(count)))
        }
    }

    public static func == (l: ProbeBytes, r: ProbeBytes) -> Bool {
        l.withUnsafeBytes { a in r.withUnsafeBytes { b in a.elementsEqual(b) } }
    }
}

/// The hasher keeps the probe's bytes by holding the value (`PrefixHasher.offer`), without a copy.
extension ProbeBytes: OwnedBytes {
    public func withBytes(_ body: (UnsafeRawBufferPointer) -> Void) {
        withUnsafeBytes { body($0) }
    }
}

/// Memory aligned for `O_DIRECT` I/O (see ``directIOAlignment``), freed with the object.
///
/// Direct reads and writes need the buffer's address, not only the file offset and length, on a block
/// boundary; Swift's allocator honours any power-of-two alignment.
public final class AlignedBuffer: @unchecked Sendable {
    /// The first byte; `count` bytes follow.
    public let base: UnsafeMutableRawPointer
    public let count: Int

    /// Allocates `count` uninitialized bytes starting at a multiple of `alignment`.
    public init(count: Int, alignment: Int = directIOAlignment) {
        base = UnsafeMutableRawPointer.allocate(byteCount: max(1, count), alignment: alignment)
        self.count = count
    }

    deinit { base.deallocate() }

    /// The whole buffer.
    public var bytes: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: base, count: count) }
}

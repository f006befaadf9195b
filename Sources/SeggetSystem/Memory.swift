import Glibc

/// Memory that is about to be written in full.
public enum Memory {
    /// Maps every page that lies wholly inside `buffer` now, writable, in one system call
    /// (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14), instead of taking a page fault for each page
    /// as its first byte is written: a fresh 1 MiB buffer costs 256 faults, each a trap into the
    /// kernel, about 0.3 ms in all on a virtual machine. The contents are unchanged. Returns false
    /// where the kernel does not (an older kernel): nothing is lost, the pages fault in as before.
    @discardableResult
    public static func prefault(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard let base = buffer.baseAddress else { return false }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (Int(bitPattern: base) + page - 1) / page * page
        let end = (Int(bitPattern: base) + buffer.count) / page * page
        guard end > start, let first = UnsafeMutableRawPointer(bitPattern: start) else { return false }
        return system_madvise(first, end - start, Int32(MADV_POPULATE_WRITE)) == 0
    }

    /// Has the allocator keep what the process frees, up to `trimAbove` bytes at the top of its heap,
    /// for the allocations that follow, and serve blocks below `mmapBelow` bytes from that heap
    /// (`mallopt`: `M_TRIM_THRESHOLD`, `M_MMAP_THRESHOLD`). By default glibc maps a block of 128 KiB
    /// or more on its own and hands the heap's top back once 128 KiB of it is free (both thresholds
    /// then move with what was freed), so a process that allocates and frees the same buffers file
    /// after file (libcurl's 512 KiB receive buffer for each request, a small file's bytes) takes
    /// fresh pages again and again: a page fault for each 4 KiB and the page zeroed, which on a
    /// virtual machine is dearer still. For a process that lives as long as a batch.
    public static func keepFreedMemory(trimAbove: Int = 32 << 20, mmapBelow: Int = 4 << 20) {
        system_mallopt(system_M_TRIM_THRESHOLD, Int32(clamping: trimAbove))
        system_mallopt(system_M_MMAP_THRESHOLD, Int32(clamping: mmapBelow))
    }
}

/// Bytes written once, in order, up to a capacity fixed in advance, into memory that is mapped
/// before the first byte arrives: a buffer that will be filled whole (a small file that one answer
/// brings) pays for its pages in one go rather than a page fault per 4 KiB.
///
/// From `hugeFrom` bytes the memory is an anonymous mapping of its own on 2 MiB boundaries, offered
/// to the kernel for a transparent huge page (`MADV_HUGEPAGE`): one page, one fault, one charge,
/// where 1 MiB in 4 KiB pages took 256 (0.6 ms against 0.15 ms on this project's VM). It holds up
/// to 2 MiB of memory for as long as it lives, so it is for buffers that are filled and let go
/// soon after. Where the kernel gives no huge page, it is a prefaulted mapping like any other.
public final class FilledBuffer: @unchecked Sendable {
    /// The capacity from which the memory is a mapping offered for huge pages.
    public static let hugeFrom = 512 << 10
    static let hugePage = 2 << 20

    public let capacity: Int
    public private(set) var count = 0
    private let base: UnsafeMutableRawPointer
    /// The whole mapping (to unmap), or nil for memory from the allocator.
    private let mapping: (start: UnsafeMutableRawPointer, length: Int)?

    public init(capacity: Int) {
        self.capacity = capacity
        let huge = Self.hugePage
        let rounded = (capacity + huge - 1) / huge * huge
        if capacity >= Self.hugeFrom, let start = system_mapAnonymous(rounded + huge) {
            // One huge page more than needed, so that a 2 MiB boundary lies inside.
            let aligned = (Int(bitPattern: start) + huge - 1) / huge * huge
            base = UnsafeMutableRawPointer(bitPattern: aligned)!
            mapping = (start, rounded + huge)
            _ = system_madvise(base, rounded, Int32(MADV_HUGEPAGE))
        } else {
            base = UnsafeMutableRawPointer.allocate(byteCount: max(1, capacity), alignment: 16)
            mapping = nil
        }
        Memory.prefault(UnsafeMutableRawBufferPointer(start: base, count: capacity))
    }

    deinit {
        if let mapping { system_munmap(mapping.start, mapping.length) } else { base.deallocate() }
    }

    /// Appends `bytes`; false (and nothing appended) when they do not fit.
    public func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count <= capacity - count else { return false }
        if let from = bytes.baseAddress { (base + count).copyMemory(from: from, byteCount: bytes.count) }
        count += bytes.count
        return true
    }

    /// The bytes appended so far; valid while this object lives.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
}

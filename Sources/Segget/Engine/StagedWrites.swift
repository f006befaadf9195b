#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SeggetJournal
import SeggetVerify

/// Writes received bytes to the data file through one staging buffer per connection.
///
/// Why: on Linux, writing through the page cache costs CPU for every new page (allocation, zeroing of
/// partly written blocks, the copy, later writeback). On the 2-core VM the benchmarks run on that was
/// about 2.5 CPU-seconds per GiB, more than the whole network side. `O_DIRECT` writes go from an
/// aligned user buffer straight to the device: about 0.1 CPU-seconds per GiB, and nothing is left dirty
/// for the final `fdatasync`.
///
/// How: a connection copies what libcurl hands it into its buffer, which maps a window of the file
/// starting at a 4 KiB boundary. A full buffer is written with one aligned `O_DIRECT` `pwrite`. The
/// engine flushes a buffer completely before it marks a chunk written, records a progress slot, or
/// lets the connection's position be used by anyone else; so "bytes before the flushed position are in
/// the file" is what the journal and the progress slots rely on, exactly as with direct `pwrite`s.
///
/// Pieces that do not cover a whole 4 KiB block (a range starting or ending inside a block: the file's
/// end, or a chunk size that is not a multiple of 4 KiB) go through the ordinary descriptor. A block is
/// therefore never written both ways within a run. If the file system refuses `O_DIRECT` (at open or on
/// the first write) everything goes through the ordinary descriptor, still in large writes.
final class StagedWriter {
    static let alignment = directAlignment

    /// The ordinary descriptor (page cache).
    let data: BlockStorage
    private(set) var directFD: Int32 = -1
    let bufferSize: Int

    var isDirect: Bool { directFD >= 0 }
    /// Called with every run of bytes once it is in the file (to feed the hasher's memory window).
    var onFlush: ((UnsafeRawBufferPointer, Int64) -> Void)?

    init(data: BlockStorage, direct: Bool, bufferSize: Int = 256 << 10) {
        self.data = data
        self.bufferSize = bufferSize
        if direct, let file = data as? PosixFile { directFD = Self.openDirect(file) }
    }

    deinit {
        if directFD >= 0 { _ = close(directFD) }
    }

    /// Opens a second descriptor on the same file with `O_DIRECT`, through `/proc/self/fd`, so that it
    /// is the same inode whatever happened to the path. Returns -1 where that is not possible.
    private static func openDirect(_ file: PosixFile) -> Int32 {
        guard let flag = directOpenFlag else { return -1 }
        let fd = open("/proc/self/fd/\(file.fd)", O_RDWR | O_CLOEXEC | flag)
        guard fd >= 0 else { return -1 }
        var a = stat(), b = stat()
        guard fstat(fd, &a) == 0, fstat(file.fd, &b) == 0, a.st_dev == b.st_dev, a.st_ino == b.st_ino else {
            _ = close(fd)
            return -1
        }
        return fd
    }

    func makeBuffer() -> Staging { Staging(capacity: bufferSize) }

    /// Appends `count` bytes for file offset `offset`, which must be where the buffer's data ends (or
    /// anything, when it is empty). Writes the buffer out whenever it fills; returns true if it did.
    @inline(__always)
    func append(_ s: Staging, _ ptr: UnsafeRawPointer, count: Int, at offset: Int64) throws(Errno) -> Bool {
        if s.start == s.end {
            s.window = offset & ~Int64(Self.alignment - 1)
            s.start = offset
            s.end = offset
        }
        precondition(offset == s.end, "staged bytes must be contiguous")
        var p = ptr
        var left = count
        var flushed = false
        while left > 0 {
            let room = Int(s.window + Int64(s.capacity) - s.end)
            let n = min(room, left)
            memcpy(s.base + Int(s.end - s.window), p, n)
            s.end += Int64(n)
            p += n
            left -= n
            if s.end == s.window + Int64(s.capacity) {
                try flush(s)
                flushed = true
            }
        }
        return flushed
    }

    /// Writes everything staged in `s` to the file and empties it.
    func flush(_ s: Staging) throws(Errno) {
        guard s.start < s.end else { return }
        let a = Int64(Self.alignment)
        var from = s.start
        if isDirect {
            let bodyStart = (from + a - 1) / a * a
            let bodyEnd = s.end / a * a
            if bodyStart < bodyEnd {
                if bodyStart > from {
                    try writeBuffered(s, from..<bodyStart)
                }
                from = try writeDirect(s, bodyStart..<bodyEnd)
            }
        }
        if from < s.end { try writeBuffered(s, from..<s.end) }
        onFlush?(UnsafeRawBufferPointer(start: s.base + Int(s.start - s.window), count: Int(s.end - s.start)), s.start)
        s.window = s.end / a * a
        s.start = s.end
    }

    /// Forgets what is staged (a cancelled duplicate whose chunk another connection finished).
    func discard(_ s: Staging) {
        s.start = s.end
    }

    private func writeBuffered(_ s: Staging, _ r: Range<Int64>) throws(Errno) {
        try data.write(UnsafeRawBufferPointer(start: s.base + Int(r.lowerBound - s.window), count: r.count), at: r.lowerBound)
    }

    /// Writes the aligned range with `O_DIRECT`; returns where it got. On `EINVAL` (a file system that
    /// accepts the flag but not the I/O) it stops using `O_DIRECT` and returns the start, so the caller
    /// writes the rest through the page cache.
    private func writeDirect(_ s: Staging, _ r: Range<Int64>) throws(Errno) -> Int64 {
        var at = r.lowerBound
        while at < r.upperBound {
            let n = pwrite(directFD, s.base + Int(at - s.window), Int(r.upperBound - at), off_t(at))
            if n > 0 {
                at += Int64(n)
                if at % Int64(Self.alignment) != 0 { return at }
                continue
            }
            let e = n == 0 ? EIO : errno
            if e == EINTR { continue }
            if e == EINVAL {
                _ = close(directFD)
                directFD = -1
                return at
            }
            throw Errno(rawValue: e)
        }
        return at
    }
}

/// One connection's staging buffer: a window of the file starting at a 4 KiB boundary, holding the
/// bytes `start..<end` (file offsets) not yet written.
final class Staging {
    let base: UnsafeMutableRawPointer
    let capacity: Int
    /// File offset of `base[0]`, a multiple of 4 KiB.
    var window: Int64 = 0
    var start: Int64 = 0
    var end: Int64 = 0

    init(capacity: Int) {
        var p: UnsafeMutableRawPointer?
        precondition(posix_memalign(&p, StagedWriter.alignment, capacity) == 0 && p != nil, "out of memory")
        base = p!
        self.capacity = capacity
    }

    deinit { free(base) }

    var isEmpty: Bool { start == end }
}

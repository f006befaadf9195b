@testable import SeggetJournal

/// SplitMix64: a small, fast, seedable generator, so that every trial can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Counts storage operations across all disks of one machine and fails the chosen one, which is the
/// moment the process dies (the operation does not happen). Every later operation fails too.
final class CrashClock {
    private(set) var operations = 0
    var crashAt: Int?
    private(set) var hasCrashed = false

    func tick() throws(Errno) {
        if hasCrashed { throw .ioError }
        operations += 1
        if let crashAt, operations >= crashAt {
            hasCrashed = true
            throw .ioError
        }
    }

    /// The process restarted: storage works again, and no crash is armed.
    func restart() {
        hasCrashed = false
        crashAt = nil
    }
}

/// A disk with a page cache: what the process reads and writes (`cache`) and what survives a power cut
/// (`durableImage`).
///
/// Writes land in the cache and dirty its pages. `sync()` writes every dirty page back. Like a kernel's
/// writeback, the disk also writes random dirty pages back on its own, at random times, with their
/// content at that time. `powerCut()` is adversarial: each dirty page is lost, written back whole, or
/// torn (only a random part of it reaches the disk), and then the cache is gone.
/// A `kill -9` is nothing at all here: the page cache survives the process.
final class SimulatedDisk: BlockStorage {
    static let pageSize = 16

    private(set) var durableImage: [UInt8]
    private(set) var cache: [UInt8]
    private var dirty: [Bool]
    private var sizeIsDirty = false
    private var rng: SplitMix64
    private let clock: CrashClock
    /// The chance, out of 256, that a write is followed by the background writeback of one dirty page.
    private let writebackOdds: UInt8

    init(contents: [UInt8], clock: CrashClock, seed: UInt64, writebackOdds: UInt8 = 64) {
        durableImage = contents
        cache = contents
        dirty = Array(repeating: false, count: SimulatedDisk.pages(contents.count))
        rng = SplitMix64(seed: seed)
        self.clock = clock
        self.writebackOdds = writebackOdds
    }

    private static func pages(_ length: Int) -> Int { (length + pageSize - 1) / pageSize }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int {
        let start = Int(offset)
        guard start < cache.count else { return 0 }
        let n = min(buffer.count, cache.count - start)
        for k in 0..<n { buffer[k] = cache[start + k] }
        return n
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno) {
        try clock.tick()
        let start = Int(offset)
        if start + bytes.count > cache.count { resize(to: start + bytes.count) }
        for k in 0..<bytes.count { cache[start + k] = bytes[k] }
        if !bytes.isEmpty {
            for page in (start / Self.pageSize)...((start + bytes.count - 1) / Self.pageSize) { dirty[page] = true }
        }
        if UInt8.random(in: 0...255, using: &rng) < writebackOdds { writeBackOneDirtyPage() }
    }

    func sync() throws(Errno) {
        try clock.tick()
        flushSize()
        for page in dirty.indices where dirty[page] { writeBack(page: page) }
    }

    func size() throws(Errno) -> Int64 { Int64(cache.count) }

    func truncate(to length: Int64) throws(Errno) {
        try clock.tick()
        resize(to: Int(length))
    }

    /// The power fails: a random part of the dirty state reaches the disk, the rest is lost.
    func powerCut() {
        // The new length may or may not have reached the disk.
        if sizeIsDirty && Bool.random(using: &rng) { flushSize() }
        for page in dirty.indices where dirty[page] {
            switch UInt8.random(in: 0..<4, using: &rng) {
            case 0, 1: break  // lost
            case 2: writeBack(page: page)
            default: writeBack(page: page, torn: true)
            }
        }
        cache = durableImage
        dirty = Array(repeating: false, count: Self.pages(cache.count))
        sizeIsDirty = false
    }

    private func resize(to length: Int) {
        if length < cache.count {
            cache.removeLast(cache.count - length)
        } else {
            cache += [UInt8](repeating: 0, count: length - cache.count)
        }
        let pages = Self.pages(length)
        if pages < dirty.count { dirty.removeLast(dirty.count - pages) } else {
            dirty += [Bool](repeating: false, count: pages - dirty.count)
        }
        sizeIsDirty = true
    }

    private func flushSize() {
        guard sizeIsDirty else { return }
        sizeIsDirty = false
        if durableImage.count > cache.count {
            durableImage.removeLast(durableImage.count - cache.count)
        } else {
            // Extended space reads as zeros until its pages are written back.
            durableImage += [UInt8](repeating: 0, count: cache.count - durableImage.count)
        }
    }

    private func writeBackOneDirtyPage() {
        // Probe a few random pages rather than list the dirty ones: cheap, and just as arbitrary.
        guard !dirty.isEmpty else { return }
        for _ in 0..<4 {
            let page = Int.random(in: 0..<dirty.count, using: &rng)
            if dirty[page] {
                writeBack(page: page)
                return
            }
        }
    }

    /// Copies a page (or, torn, a random run of its bytes) from the cache to the disk.
    private func writeBack(page: Int, torn: Bool = false) {
        var start = page * Self.pageSize
        var end = min(start + Self.pageSize, cache.count)
        // A page past the disk's recorded length cannot be written back until the length is.
        guard end <= durableImage.count else { return }
        if torn && end - start > 1 {
            let a = Int.random(in: start..<end, using: &rng)
            let b = Int.random(in: start..<end, using: &rng)
            start = min(a, b)
            end = max(a, b) + 1
        } else {
            dirty[page] = false
        }
        for k in start..<end { durableImage[k] = cache[k] }
    }
}

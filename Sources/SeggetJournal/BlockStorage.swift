/// Random-access storage: the real file, or a simulated disk in tests.
///
/// The journal needs nothing more than this, which is what lets the tests replace the disk with one
/// that loses unsynced writes the way a power cut does.
public protocol BlockStorage: AnyObject {
    /// Reads up to `buffer.count` bytes at `offset`; returns fewer only at end of file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno) -> Int
    /// Writes all of `bytes` at `offset`, or throws.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(Errno)
    /// Makes every write so far durable (`fdatasync`).
    func sync() throws(Errno)
    /// The current length in bytes.
    func size() throws(Errno) -> Int64
    /// Sets the length, cutting off or zero-extending.
    func truncate(to length: Int64) throws(Errno)
}

extension BlockStorage {
    /// Writes all of `bytes` at `offset`.
    public func write(_ bytes: [UInt8], at offset: Int64) throws(Errno) {
        // withUnsafeBytes is rethrows-untyped; carry the typed error out by hand.
        let result: Result<Void, Errno> = bytes.withUnsafeBytes { buffer in
            do throws(Errno) {
                try write(buffer, at: offset)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// Reads up to `count` bytes at `offset`; the array is shorter only at end of file.
    public func read(count: Int, at offset: Int64) throws(Errno) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let result: Result<Int, Errno> = bytes.withUnsafeMutableBytes { buffer in
            do throws(Errno) {
                return .success(try read(into: buffer, at: offset))
            } catch {
                return .failure(error)
            }
        }
        let n = try result.get()
        if n < count { bytes.removeLast(count - n) }
        return bytes
    }
}

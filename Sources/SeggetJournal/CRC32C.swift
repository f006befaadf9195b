/// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF), as
/// used by iSCSI, ext4 and SCTP. `CRC32C.checksum("123456789")` is 0xE3069283.
///
/// The journal keeps one per finished chunk so that a resume can vouch for the bytes it keeps. Slicing
/// by 8 (eight 256-entry tables, eight bytes per step) computed 1,230–1,720 MiB/s on the 2-core VM
/// (`swiftc -O`, 256 MiB, best of 5, other builds running), against 150 MiB/s a byte at a time.
public enum CRC32C {
    /// `tables[t * 256 + b]`: the CRC of byte `b` followed by `t` zero bytes.
    private static let tables: [UInt32] = {
        var t = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = c & 1 != 0 ? 0x82F6_3B78 ^ (c >> 1) : c >> 1 }
            t[n] = c
        }
        for n in 0..<256 {
            for k in 1..<8 {
                let previous = t[(k - 1) * 256 + n]
                t[k * 256 + n] = t[Int(previous & 0xFF)] ^ (previous >> 8)
            }
        }
        return t
    }()

    /// The checksum of `bytes`.
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        update(0, bytes)
    }

    /// The checksum of `bytes`.
    public static func checksum<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        if let crc = bytes.withContiguousStorageIfAvailable({ update(0, UnsafeRawBufferPointer($0)) }) { return crc }
        return Array(bytes).withUnsafeBytes { update(0, $0) }
    }

    /// The checksum of the bytes whose checksum is `crc`, followed by `bytes`: a running checksum can be
    /// continued piece by piece. `update(0, …)` starts one.
    public static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard var p = bytes.baseAddress, !bytes.isEmpty else { return crc }
        var left = bytes.count
        var c = ~crc
        tables.withUnsafeBufferPointer { t in
            // Byte by byte up to an 8-byte boundary, then 8 bytes per step, then the tail.
            while left > 0 && UInt(bitPattern: p) & 7 != 0 {
                c = t[Int((c ^ UInt32(p.load(as: UInt8.self))) & 0xFF)] ^ (c >> 8)
                p += 1
                left -= 1
            }
            while left >= 8 {
                let word = UInt64(littleEndian: p.load(as: UInt64.self)) ^ UInt64(c)
                c = t[7 * 256 + Int(word & 0xFF)] ^ t[6 * 256 + Int((word >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((word >> 16) & 0xFF)] ^ t[4 * 256 + Int((word >> 24) & 0xFF)]
                    ^ t[3 * 256 + Int((word >> 32) & 0xFF)] ^ t[2 * 256 + Int((word >> 40) & 0xFF)]
                    ^ t[1 * 256 + Int((word >> 48) & 0xFF)] ^ t[Int(word >> 56)]
                p += 8
                left -= 8
            }
            while left > 0 {
                c = t[Int((c ^ UInt32(p.load(as: UInt8.self))) & 0xFF)] ^ (c >> 8)
                p += 1
                left -= 1
            }
        }
        return ~c
    }
}

// Small, self-contained SHA-256 and MD5 so that the test server needs no library; they only have to
// be correct (checked against sha256sum/md5sum in the tests), not fast.

/// SHA-256 (FIPS 180-4), fed incrementally.
///
/// Written with raw pointers and no helper calls because tests run debug builds, where array
/// subscripts and non-inlined calls made a first version hash at only ~3 MB/s.
final class SHA256Hasher {
    private let state = UnsafeMutablePointer<UInt32>.allocate(capacity: 8)
    private let w = UnsafeMutablePointer<UInt32>.allocate(capacity: 64)
    private let k = UnsafeMutablePointer<UInt32>.allocate(capacity: 64)
    private let pending = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
    private var pendingCount = 0
    private var totalBytes: UInt64 = 0

    private static let initial: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]
    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    init() {
        for i in 0..<8 { state[i] = Self.initial[i] }
        for i in 0..<64 { k[i] = Self.roundConstants[i] }
    }

    deinit {
        state.deallocate()
        w.deallocate()
        k.deallocate()
        pending.deallocate()
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        feedBlocks(base, bytes.count, pending: pending, pendingCount: &pendingCount, total: &totalBytes) { compress($0) }
    }

    func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    func finalize() -> [UInt8] {
        let bitLength = totalBytes &* 8
        var tail: [UInt8] = [0x80]
        while (pendingCount + tail.count) % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        update(tail)
        var out: [UInt8] = []
        for i in 0..<8 { for shift in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: state[i] >> UInt32(shift))) } }
        return out
    }

    private func compress(_ block: UnsafePointer<UInt8>) {
        let w = self.w
        let k = self.k
        var i = 0
        while i < 16 {
            w[i] = UInt32(block[i &* 4]) << 24 | UInt32(block[i &* 4 &+ 1]) << 16 | UInt32(block[i &* 4 &+ 2]) << 8
                | UInt32(block[i &* 4 &+ 3])
            i &+= 1
        }
        while i < 64 {
            let x = w[i &- 15]
            let y = w[i &- 2]
            let s0 = (x >> 7 | x << 25) ^ (x >> 18 | x << 14) ^ (x >> 3)
            let s1 = (y >> 17 | y << 15) ^ (y >> 19 | y << 13) ^ (y >> 10)
            w[i] = w[i &- 16] &+ s0 &+ w[i &- 7] &+ s1
            i &+= 1
        }
        var a = state[0], b = state[1], c = state[2], d = state[3]
        var e = state[4], f = state[5], g = state[6], h = state[7]
        i = 0
        while i < 64 {
            let s1 = (e >> 6 | e << 26) ^ (e >> 11 | e << 21) ^ (e >> 25 | e << 7)
            let ch = (e & f) ^ (~e & g)
            let t1 = h &+ s1 &+ ch &+ k[i] &+ w[i]
            let s0 = (a >> 2 | a << 30) ^ (a >> 13 | a << 19) ^ (a >> 22 | a << 10)
            let maj = (a & b) ^ (a & c) ^ (b & c)
            h = g; g = f; f = e; e = d &+ t1
            d = c; c = b; b = a; a = t1 &+ s0 &+ maj
            i &+= 1
        }
        state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
        state[4] &+= e; state[5] &+= f; state[6] &+= g; state[7] &+= h
    }
}

/// MD5 (RFC 1321), fed incrementally; only for `Content-MD5`. Same debug-speed style as SHA-256.
final class MD5Hasher {
    private let state = UnsafeMutablePointer<UInt32>.allocate(capacity: 4)
    private let m = UnsafeMutablePointer<UInt32>.allocate(capacity: 16)
    private let k = UnsafeMutablePointer<UInt32>.allocate(capacity: 64)
    private let s = UnsafeMutablePointer<UInt32>.allocate(capacity: 64)
    private let pending = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
    private var pendingCount = 0
    private var totalBytes: UInt64 = 0

    private static let shifts: [UInt32] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
        5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
        4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
        6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ]
    private static let sines: [UInt32] = [
        0xd76a_a478, 0xe8c7_b756, 0x2420_70db, 0xc1bd_ceee, 0xf57c_0faf, 0x4787_c62a, 0xa830_4613, 0xfd46_9501,
        0x6980_98d8, 0x8b44_f7af, 0xffff_5bb1, 0x895c_d7be, 0x6b90_1122, 0xfd98_7193, 0xa679_438e, 0x49b4_0821,
        0xf61e_2562, 0xc040_b340, 0x265e_5a51, 0xe9b6_c7aa, 0xd62f_105d, 0x0244_1453, 0xd8a1_e681, 0xe7d3_fbc8,
        0x21e1_cde6, 0xc337_07d6, 0xf4d5_0d87, 0x455a_14ed, 0xa9e3_e905, 0xfcef_a3f8, 0x676f_02d9, 0x8d2a_4c8a,
        0xfffa_3942, 0x8771_f681, 0x6d9d_6122, 0xfde5_380c, 0xa4be_ea44, 0x4bde_cfa9, 0xf6bb_4b60, 0xbebf_bc70,
        0x289b_7ec6, 0xeaa1_27fa, 0xd4ef_3085, 0x0488_1d05, 0xd9d4_d039, 0xe6db_99e5, 0x1fa2_7cf8, 0xc4ac_5665,
        0xf429_2244, 0x432a_ff97, 0xab94_23a7, 0xfc93_a039, 0x655b_59c3, 0x8f0c_cc92, 0xffef_f47d, 0x8584_5dd1,
        0x6fa8_7e4f, 0xfe2c_e6e0, 0xa301_4314, 0x4e08_11a1, 0xf753_7e82, 0xbd3a_f235, 0x2ad7_d2bb, 0xeb86_d391,
    ]

    init() {
        state[0] = 0x6745_2301
        state[1] = 0xefcd_ab89
        state[2] = 0x98ba_dcfe
        state[3] = 0x1032_5476
        for i in 0..<64 {
            k[i] = Self.sines[i]
            s[i] = Self.shifts[i]
        }
    }

    deinit {
        state.deallocate()
        m.deallocate()
        k.deallocate()
        s.deallocate()
        pending.deallocate()
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        feedBlocks(base, bytes.count, pending: pending, pendingCount: &pendingCount, total: &totalBytes) { compress($0) }
    }

    func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    func finalize() -> [UInt8] {
        let bitLength = totalBytes &* 8
        var tail: [UInt8] = [0x80]
        while (pendingCount + tail.count) % 64 != 56 { tail.append(0) }
        // MD5 stores the length little-endian, unlike SHA-256.
        for shift in stride(from: 0, through: 56, by: 8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        update(tail)
        var out: [UInt8] = []
        for i in 0..<4 { for shift in [0, 8, 16, 24] { out.append(UInt8(truncatingIfNeeded: state[i] >> UInt32(shift))) } }
        return out
    }

    private func compress(_ block: UnsafePointer<UInt8>) {
        let m = self.m
        var i = 0
        while i < 16 {
            m[i] = UInt32(block[i &* 4]) | UInt32(block[i &* 4 &+ 1]) << 8 | UInt32(block[i &* 4 &+ 2]) << 16
                | UInt32(block[i &* 4 &+ 3]) << 24
            i &+= 1
        }
        var a = state[0], b = state[1], c = state[2], d = state[3]
        i = 0
        while i < 64 {
            var f: UInt32
            let g: Int
            if i < 16 {
                f = (b & c) | (~b & d); g = i
            } else if i < 32 {
                f = (d & b) | (~d & c); g = (5 &* i &+ 1) & 15
            } else if i < 48 {
                f = b ^ c ^ d; g = (3 &* i &+ 5) & 15
            } else {
                f = c ^ (b | ~d); g = (7 &* i) & 15
            }
            f = f &+ a &+ k[i] &+ m[g]
            a = d; d = c; c = b
            b = b &+ (f << s[i] | f >> (32 &- s[i]))
            i &+= 1
        }
        state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
    }
}

/// Splits input into 64-byte blocks for `compress`, carrying a partial block in `pending`.
private func feedBlocks(
    _ base: UnsafePointer<UInt8>, _ count: Int, pending: UnsafeMutablePointer<UInt8>, pendingCount: inout Int,
    total: inout UInt64, compress: (UnsafePointer<UInt8>) -> Void
) {
    total &+= UInt64(count)
    var offset = 0
    if pendingCount > 0 {
        let take = min(64 - pendingCount, count)
        (pending + pendingCount).update(from: base, count: take)
        pendingCount += take
        offset = take
        if pendingCount == 64 {
            compress(UnsafePointer(pending))
            pendingCount = 0
        }
    }
    while count - offset >= 64 {
        compress(base + offset)
        offset += 64
    }
    if offset < count {
        pending.update(from: base + offset, count: count - offset)
        pendingCount = count - offset
    }
}

enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i]
            let b1 = i + 1 < bytes.count ? bytes[i + 1] : 0
            let b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 0x0f) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 0x3f)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

enum Hex {
    static func encode(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

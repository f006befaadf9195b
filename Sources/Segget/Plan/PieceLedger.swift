import SeggetVerify

/// How a file's pieces (a Metalink's piece hashes) line up with its chunks (the journal's and the
/// scheduler's unit). What is checked, and fetched again as a whole, is a group: the bytes between
/// two offsets that both a chunk and a piece start at (multiples of both lengths). A new download
/// chooses its chunk size so that a group is one piece with its chunks or one chunk with its pieces
/// (`chunkSize(pieceLength:requested:)`); a partial download that an earlier run cut in other chunks
/// gets larger groups. A piece that fails its hash never takes a verified group's bytes with it.
struct PiecePlan: Equatable {
    let pieces: PieceHashes
    let plan: ChunkPlan
    /// The bytes of every group but the last.
    let groupLength: Int64

    /// Nil when the pieces do not cover `plan`'s length exactly.
    init?(pieces: PieceHashes, plan: ChunkPlan) {
        guard pieces.fits(size: plan.totalLength) else { return nil }
        self.pieces = pieces
        self.plan = plan
        let (l, c) = (pieces.length, plan.chunkSize)
        let lcm = l.multipliedReportingOverflow(by: c / Self.gcd(l, c))
        groupLength = lcm.overflow ? max(1, plan.totalLength) : max(1, min(lcm.partialValue, max(1, plan.totalLength)))
    }

    /// A chunk size close to `requested` that lines up with pieces of `pieceLength`: a divisor of
    /// it (at least 16 KiB, else the piece itself) when the pieces are longer, a multiple when shorter.
    static func chunkSize(pieceLength l: Int64, requested c: Int64) -> Int64 {
        if l <= c { return l * max(1, c / l) }
        var n = (l + c - 1) / c
        while l / n >= 16 << 10 {
            if l % n == 0 { return l / n }
            n += 1
        }
        return l
    }

    static func gcd(_ a: Int64, _ b: Int64) -> Int64 { b == 0 ? a : gcd(b, a % b) }

    var groupCount: Int { plan.totalLength == 0 ? 0 : Int((plan.totalLength - 1) / groupLength + 1) }
    func group(ofChunk k: Int) -> Int { Int(plan.byteRange(ofChunk: k).lowerBound / groupLength) }
    func byteRange(ofGroup g: Int) -> Range<Int64> {
        let start = Int64(g) * groupLength
        return start..<min(start + groupLength, plan.totalLength)
    }
    func chunks(ofGroup g: Int) -> Range<Int> {
        let r = byteRange(ofGroup: g)
        return plan.chunk(containing: r.lowerBound)..<(plan.chunk(containing: r.upperBound - 1) + 1)
    }
    func pieces(ofGroup g: Int) -> Range<Int> {
        let r = byteRange(ofGroup: g)
        return pieces.piece(containing: r.lowerBound)..<(pieces.piece(containing: r.upperBound - 1) + 1)
    }
}

/// What the piece checks decided, as a pure value: which groups wait for bytes, are being hashed or
/// are verified; which sources wrote each chunk; which sources are demoted. Events in, decisions out.
struct PieceLedger {
    enum State: Equatable { case waiting, hashing, verified }

    let geometry: PiecePlan
    private(set) var states: [State]
    /// Chunks whose bytes are in the file and not yet verified.
    private var written: [Bool]
    /// Per chunk, the sources (bit i: source i) that wrote bytes into it since it was last reopened.
    private var writers: [UInt64]
    /// Per source: pieces it took part in that failed, while others did too.
    private var strikes: [Int]
    private(set) var demoted: [Bool]
    /// Per group: how many times it failed.
    private var failures: [Int]
    private(set) var verifiedGroups = 0
    /// Every piece that failed its hash, in the order they failed (a piece may appear twice).
    private(set) var failedPieces: [Int] = []

    /// The most times one group may fail before the download gives up on it.
    let maxFailures: Int

    init(geometry: PiecePlan, sources: Int) {
        self.geometry = geometry
        states = Array(repeating: .waiting, count: geometry.groupCount)
        written = Array(repeating: false, count: geometry.plan.chunkCount)
        writers = Array(repeating: 0, count: geometry.plan.chunkCount)
        strikes = Array(repeating: 0, count: max(1, sources))
        demoted = Array(repeating: false, count: max(1, sources))
        failures = Array(repeating: 0, count: geometry.groupCount)
        maxFailures = max(3, sources + 1)
    }

    var allVerified: Bool { verifiedGroups == states.count }

    /// Source `source` wrote bytes into chunk `k` (the engine's body callback: kept cheap).
    mutating func wrote(chunk k: Int, source: Int) {
        if source < 64 { writers[k] |= 1 << UInt64(source) }
    }

    /// Chunk `k`'s bytes are in the file. Returns its group when that group is now complete and due
    /// for hashing.
    mutating func inFile(chunk k: Int) -> Int? {
        written[k] = true
        let g = geometry.group(ofChunk: k)
        guard states[g] == .waiting, geometry.chunks(ofGroup: g).allSatisfy({ written[$0] }) else { return nil }
        states[g] = .hashing
        return g
    }

    /// Group `g` matched its hashes: its chunks count as in the file.
    mutating func verified(_ g: Int) -> Range<Int> {
        if states[g] != .verified { verifiedGroups += 1 }
        states[g] = .verified
        return geometry.chunks(ofGroup: g)
    }

    /// What follows a group's failed check.
    struct Failure: Equatable {
        /// Chunks to fetch again.
        var reopen: Range<Int>
        /// Sources to give no more work, newly.
        var demote: [Int]
        /// Every source that wrote into the group.
        var writers: [Int]
        /// The download must stop: the group failed too often, or no source is left.
        var giveUp: String?
    }

    /// Group `g` failed (its `bad` pieces did not match). A group that one source wrote alone demotes
    /// that source; one that several wrote gives each a strike, and a second strike demotes. Sources
    /// already demoted take the blame without striking the others.
    mutating func failed(_ g: Int, bad: [Int]) -> Failure {
        states[g] = .waiting
        failures[g] += 1
        failedPieces += bad
        let chunks = geometry.chunks(ofGroup: g)
        var mask: UInt64 = 0
        for k in chunks {
            mask |= writers[k]
            writers[k] = 0
            written[k] = false
        }
        let sources = (0..<demoted.count).filter { mask & (1 << UInt64($0)) != 0 }
        var newly: [Int] = []
        if !sources.contains(where: { demoted[$0] }) {
            if sources.count == 1 {
                newly = sources
            } else {
                for s in sources {
                    strikes[s] += 1
                    if strikes[s] >= 2 { newly.append(s) }
                }
            }
        }
        for s in newly { demoted[s] = true }
        var giveUp: String?
        if !demoted.contains(false) {
            giveUp = "every server of the file served bytes that failed their piece hashes"
        } else if failures[g] >= maxFailures {
            giveUp = "piece \(bad.first ?? geometry.pieces(ofGroup: g).lowerBound) failed its hash \(failures[g]) times"
        }
        return Failure(reopen: chunks, demote: newly, writers: sources, giveUp: giveUp)
    }

    /// Source `s` was demoted for another reason (it failed): it is not blamed again.
    mutating func demote(_ s: Int) {
        if s < demoted.count { demoted[s] = true }
    }

    /// Chunk `k`, counted as written, is fetched again for another reason (a resume's check).
    mutating func reopened(chunk k: Int) {
        written[k] = false
        writers[k] = 0
        let g = geometry.group(ofChunk: k)
        if states[g] == .verified { verifiedGroups -= 1 }
        states[g] = .waiting
    }
}

import Benchmark
import Segget
// Not products of the root package: these two modules are reachable only because SwiftPM puts every
// built module of a dependency on the search path. See README.md ("Products") for the proper fix.
import SeggetJournal
import SeggetVerify

// Micro-benchmarks for the pure, hot parts of segget. Each benchmark's body does a fixed amount of
// work per iteration (named in the benchmark's name), so throughput = iterations per second.

private let mebibyte = 1 << 20

/// Deterministic bytes (xorshift), so that runs hash the same data.
private func pattern(_ count: Int) -> [UInt8] {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    var out = [UInt8](repeating: 0, count: count)
    for i in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        out[i] = UInt8(truncatingIfNeeded: state >> 24)
    }
    return out
}

private func header(chunks: Int) -> JournalHeader {
    JournalHeader(
        url: "https://example.com/releases/some-large-image-2026.11.iso", finalURL: "https://cdn.example.com/a/b/some-large-image-2026.11.iso",
        totalLength: Int64(chunks) << 20, chunkSize: 1 << 20, etag: "\"5f3a-61c0b2d4e8f00\"",
        lastModified: "Sat, 21 Nov 2026 07:00:00 GMT", bootID: "3f2b1c9e-8d7a-4e6f-9a0b-1c2d3e4f5a6b",
        createdAt: 1_795_000_000)
}

/// A bitmap of `count` chunks with every `stride`-th one set, starting at `offset`.
private func bitmap(_ count: Int, stride: Int, offset: Int) -> ChunkBitmap {
    var b = ChunkBitmap(count: count)
    var k = offset
    while k < count {
        b.set(k)
        k += stride
    }
    return b
}

/// Drives a Scheduler to completion as the fetch loop would: connections finish their in-flight chunk
/// at four different speeds, idle ones take free runs, then steal, then race duplicates in the end game.
/// Returns the number of chunk completions (duplicates included), to keep the optimiser honest.
func simulateScheduler(chunks: Int, connections: Int) -> Int {
    let plan = ChunkPlan(totalLength: Int64(chunks) << 20, chunkSize: 1 << 20)
    var s = Scheduler(plan: plan, connections: connections)
    var current = [Int?](repeating: nil, count: connections)
    for w in 0..<connections { current[w] = s.run(of: w)?.lowerBound }
    var completions = 0
    var tick = 0
    while !s.isComplete {
        tick += 1
        precondition(tick < 100 * chunks + 1000, "the simulated download does not finish")
        for w in 0..<connections {
            if current[w] == nil {
                switch s.nextAssignment(for: w, allowDuplicates: true, remainingSeconds: { Double($0 % 4 + 1) }) {
                case .run(let r)?, .stolen(let r, _, _)?: current[w] = r.lowerBound
                case .duplicate(let chunk, _)?: current[w] = chunk
                case nil: continue
                }
            }
            guard tick % (1 + w % 4) == 0, let k = current[w] else { continue }
            for loser in s.chunkFinished(k, by: w) { current[loser] = nil }
            completions += 1
            current[w] = s.run(of: w)?.lowerBound
        }
    }
    return completions
}

let benchmarks: @Sendable () -> Void = {
    // (cpuTotal is left out: its resolution here is 10 ms, coarser than most of these bodies.)
    let timeAndThroughput: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal]
    Benchmark.defaultConfiguration = .init(
        metrics: timeAndThroughput, warmupIterations: 3, maxDuration: .seconds(3), maxIterations: 100_000)

    // MARK: Digester: 1 MiB per iteration, so throughput (per second) reads as MiB/s.

    let block = pattern(mebibyte)
    for algorithm in DigestAlgorithm.allCases {
        Benchmark("Digester \(algorithm.displayName) update 1 MiB") { benchmark in
            let d = Digester(algorithm)
            for _ in benchmark.scaledIterations {
                block.withUnsafeBytes { d.update($0) }
            }
            blackHole(d.finalize())
        }
    }
    // Both at once, as a download with sha256= and md5= (or a server Content-MD5) hashes.
    Benchmark("Digester SHA-256 + MD5 update 1 MiB") { benchmark in
        let a = Digester(.sha256)
        let b = Digester(.md5)
        for _ in benchmark.scaledIterations {
            block.withUnsafeBytes {
                a.update($0)
                b.update($0)
            }
        }
        blackHole(a.finalize() + b.finalize())
    }

    // MARK: Journal codec

    for chunks in [1024, 1 << 20] {
        let h = header(chunks: chunks)
        let written = bitmap(chunks, stride: 3, offset: 0)
        let durable = bitmap(chunks, stride: 6, offset: 0)
        let encoded = JournalCodec.encode(header: h, written: written, durable: durable)
        Benchmark("JournalCodec encode \(chunks) chunks") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(JournalCodec.encode(header: h, written: written, durable: durable))
            }
        }
        Benchmark("JournalCodec decode \(chunks) chunks") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try JournalCodec.decode(encoded))
            }
        }
    }

    // MARK: ChunkBitmap

    Benchmark("ChunkBitmap set all 1048576 chunks") { benchmark in
        for _ in benchmark.scaledIterations {
            var b = ChunkBitmap(count: 1 << 20)
            for k in 0..<(1 << 20) { b.set(k) }
            blackHole(b.setCount)
        }
    }
    let odd = bitmap(1 << 20, stride: 2, offset: 1)
    let third = bitmap(1 << 20, stride: 3, offset: 0)
    Benchmark("ChunkBitmap union 1048576 chunks") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(odd.union(third).setCount)
        }
    }
    Benchmark("ChunkBitmap firstUnset scan 1048576 chunks, last unset") { benchmark in
        var b = ChunkBitmap(count: 1 << 20)
        for k in 0..<((1 << 20) - 1) { b.set(k) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(b.firstUnset(from: 0))
        }
    }

    // MARK: Scheduler

    let gib = ChunkPlan(totalLength: 1 << 30, chunkSize: 1 << 20)
    Benchmark("Scheduler init 1 GiB / 1 MiB x 64 connections") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(Scheduler(plan: gib, connections: 64))
        }
    }
    Benchmark("Scheduler full simulated run 1024 chunks x 64 connections") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(simulateScheduler(chunks: 1024, connections: 64))
        }
    }
    Benchmark("Scheduler full simulated run 1024 chunks x 8 connections") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(simulateScheduler(chunks: 1024, connections: 8))
        }
    }

    // MARK: ContentRange: 1,000 parses per iteration.

    let headers = (0..<1000).map { i in "bytes \(i << 20)-\(((i + 1) << 20) - 1)/1073741824" }
    Benchmark("ContentRange parse x1000") { benchmark in
        for _ in benchmark.scaledIterations {
            var sum: Int64 = 0
            for h in headers {
                sum &+= ContentRange(parsing: h)?.byteCount ?? 0
            }
            blackHole(sum)
        }
    }
}

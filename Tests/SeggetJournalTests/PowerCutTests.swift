import Testing
@testable import SeggetJournal

/// A deliberate bug in how progress is recorded, to show that the checker can fail.
enum RecorderFlaw: CaseIterable, Sendable {
    /// The correct recorder: `Journal` as the engine uses it.
    case none
    /// Sets the durable bit together with the written bit, before any data sync.
    case durableBitWithWrittenBit
    /// Takes the checkpoint's snapshot after the data sync instead of before it.
    case snapshotAfterDataSync
    /// Completes checkpoints without syncing the data file.
    case checkpointWithoutDataSync
    /// Ignores reboots: always presents the first boot's ID, so the written bitmap is always trusted.
    case trustWrittenAfterReboot
    /// Writes durable bits without first syncing the chunk checksums written since the last sync.
    case durableBitBeforeChecksumSync
}

/// What one simulated download went through.
struct TrialReport {
    var violations: [String] = []
    var powerCuts = 0
    var kills = 0
    /// Trusted chunks checked against the disk after a power cut.
    var trustedAfterPowerCut = 0
    /// Chunks written before a power cut that the resume did not trust (and so fetches again).
    var refetchedAfterPowerCut = 0
    /// Resumes after kill -9 whose trusted bitmap equalled the dead process's written bitmap.
    var exactResumes = 0
    /// Reopens that found the journal missing or damaged (a torn create or header) and started over.
    var startOvers = 0
    var completed = false
}

/// One download of a random file through a journal on simulated disks, with crashes.
///
/// Each run ("epoch") opens the journal, checks what it trusts against the data the disk really holds,
/// fetches the rest in random order with pieces of up to four chunks interleaved, checkpoints at random
/// moments (with more writes between snapshot, data sync and completion), and dies at a random storage
/// operation: by `kill -9` (the page cache survives, the boot ID stays) or by a power cut (an adversarial
/// part of the cache reaches the disk, the boot ID changes). After the last crash the download runs to
/// completion, then the power is cut once more, and a final resume must trust every chunk.
func runTrial(seed: UInt64, flaw: RecorderFlaw) -> TrialReport {
    var rng = SplitMix64(seed: seed)
    var report = TrialReport()
    let chunkCount = Int.random(in: 1...40, using: &rng)
    let chunkSize = Int64.random(in: 1...24, using: &rng)
    let totalLength = Int64(chunkCount - 1) * chunkSize + Int64.random(in: 1...chunkSize, using: &rng)
    let expected = (0..<totalLength).map { _ in UInt8.random(in: 0...255, using: &rng) }
    // The old contents of the preallocated file differ from the right data at every byte, so a claimed
    // chunk that is not on disk can never pass by luck.
    let garbage = expected.map { $0 ^ UInt8.random(in: 1...255, using: &rng) }
    let expectedCRCs = (0..<chunkCount).map { chunk in
        CRC32C.checksum(expected[(chunk * Int(chunkSize))..<min(expected.count, (chunk + 1) * Int(chunkSize))])
    }
    let clock = CrashClock()
    let data = SimulatedDisk(contents: garbage, clock: clock, seed: rng.next())
    var journalDisk = SimulatedDisk(contents: [], clock: clock, seed: rng.next())
    let template = JournalHeader(
        url: "https://example.com/f", finalURL: "https://cdn.example.com/f", totalLength: totalLength,
        chunkSize: chunkSize, etag: "\"v1\"", lastModified: nil, bootID: "boot-0", createdAt: 0)

    var boot = 0
    var created = false
    var crashesLeft = Int.random(in: 1...4, using: &rng)
    /// The written bitmap of the process that died, and whether the death was a power cut.
    var lastDeath: (written: ChunkBitmap?, powerCut: Bool)?
    var finalCheck = false

    func violation(_ text: String) {
        report.violations.append("seed \(seed): \(text)")
    }

    while true {
        clock.restart()
        if crashesLeft > 0 {
            clock.crashAt = clock.operations + Int.random(in: 1...(chunkCount * 6 + 20), using: &rng)
        }
        let bootID = flaw == .trustWrittenAfterReboot ? "boot-0" : "boot-\(boot)"
        var journal: Journal?

        do throws(Errno) {
            // Open, or create on the first run and whenever the journal cannot be trusted at all.
            var trusted = ChunkBitmap(count: chunkCount)
            if created {
                do {
                    let opened = try Journal.open(storage: journalDisk, currentBootID: bootID)
                    journal = opened.journal
                    trusted = opened.trusted
                } catch .io(let error) {
                    throw error
                } catch {
                    report.startOvers += 1
                }
            }
            if journal == nil {
                // As `Journal.create(path:)` does: a new, empty file, written without a sync (the first
                // checkpoint syncs it before any durable bit).
                journalDisk = SimulatedDisk(contents: [], clock: clock, seed: rng.next())
                journal = try Journal(creatingOn: journalDisk, header: template.with(bootID: bootID), syncing: false)
                created = true
            }
            guard let journal else { return report }
            if flaw == .durableBitBeforeChecksumSync { journal.syncsChecksumsBeforeDurableBits = false }

            // The guarantee: every trusted chunk's exact data is on the disk the process now sees.
            for chunk in trusted.setIndices {
                let range = template.byteRange(ofChunk: chunk)
                let slice = Int(range.lowerBound)..<Int(range.upperBound)
                let how = lastDeath?.powerCut == true ? "a power cut" : "kill -9"
                if !data.cache[slice].elementsEqual(expected[slice]) {
                    violation("after \(how), chunk \(chunk) is trusted but its data is not on disk")
                }
                // And the checksum a resume checks the data against is the right one, so a resume keeps it.
                if journal.chunkCRCs[chunk] != expectedCRCs[chunk] {
                    violation("after \(how), chunk \(chunk) is trusted but its checksum on disk is \(journal.chunkCRCs[chunk])")
                }
            }
            if let death = lastDeath, let before = death.written {
                if death.powerCut {
                    report.trustedAfterPowerCut += trusted.setCount
                    report.refetchedAfterPowerCut += before.setCount - trusted.intersectionCount(before)
                } else if flaw == .none {
                    // kill -9: exact resume, nothing finished is fetched again, nothing unfinished is trusted.
                    if trusted == before { report.exactResumes += 1 } else {
                        violation("after kill -9, trusted \(trusted.setIndices) but \(before.setIndices) were written")
                    }
                }
            }
            if finalCheck {
                if flaw == .none && !trusted.isComplete {
                    violation("a finished, checkpointed download lost chunks in a power cut")
                }
                report.completed = trusted.isComplete
                return report
            }
            lastDeath = nil

            try fetch(
                journal: journal, trusted: trusted, data: data, expected: expected, crcs: expectedCRCs, flaw: flaw,
                rng: &rng)
            // Finished without dying: cut the power once more; a final resume must trust everything.
            lastDeath = (journal.written, true)
            data.powerCut()
            journalDisk.powerCut()
            report.powerCuts += 1
            boot += 1
            finalCheck = true
        } catch {
            // The process died at the armed operation (perhaps while reopening for the final check,
            // which then has to wait until the download is finished again).
            finalCheck = false
            let powerCut = Bool.random(using: &rng)
            lastDeath = (journal?.written, powerCut)
            if powerCut {
                data.powerCut()
                journalDisk.powerCut()
                report.powerCuts += 1
                boot += 1
            } else {
                report.kills += 1
            }
            crashesLeft -= 1
        }
    }
}

/// Fetches every chunk not in `trusted` the way the engine does, recording progress with the flaw.
private func fetch(
    journal: Journal, trusted: ChunkBitmap, data: SimulatedDisk, expected: [UInt8], crcs: [UInt32],
    flaw: RecorderFlaw, rng: inout SplitMix64
) throws(Errno) {
    let header = journal.header
    var remaining = (0..<header.chunkCount).filter { !trusted[$0] }.shuffled(using: &rng)
    var inFlight: [(chunk: Int, next: Int64)] = []
    let connections = Int.random(in: 1...4, using: &rng)
    var snapshot: CheckpointSnapshot?
    var dataSynced = false

    func completeCheckpoint(_ taken: CheckpointSnapshot) throws(Errno) {
        // The flaw takes its snapshot only now, after the data sync, so it includes unsynced chunks.
        try journal.completeCheckpoint(flaw == .snapshotAfterDataSync ? journal.beginCheckpoint() : taken)
    }
    func fullCheckpoint() throws(Errno) {
        let taken = journal.beginCheckpoint()
        if flaw != .checkpointWithoutDataSync { try data.sync() }
        try completeCheckpoint(taken)
    }

    while !remaining.isEmpty || !inFlight.isEmpty {
        while inFlight.count < connections, let chunk = remaining.popLast() {
            inFlight.append((chunk, header.byteRange(ofChunk: chunk).lowerBound))
        }
        let action = Int.random(in: 0..<100, using: &rng)
        if action < 75 {
            // A piece of one connection's chunk arrives and is written.
            let k = Int.random(in: 0..<inFlight.count, using: &rng)
            let end = header.byteRange(ofChunk: inFlight[k].chunk).upperBound
            let length = Int64.random(in: 1...(end - inFlight[k].next), using: &rng)
            let start = Int(inFlight[k].next)
            try data.write(Array(expected[start..<(start + Int(length))]), at: inFlight[k].next)
            inFlight[k].next += length
            if inFlight[k].next == end {
                let chunk = inFlight[k].chunk
                inFlight.remove(at: k)
                try journal.markWritten(chunk: chunk, crc: crcs[chunk])
                if flaw == .durableBitWithWrittenBit { try writeDurableBitAtOnce(journal, chunk) }
            }
        } else if action < 90 {
            // One step of a checkpoint whose data sync runs "elsewhere", with writes in between.
            if let taken = snapshot {
                if !dataSynced {
                    if flaw != .checkpointWithoutDataSync { try data.sync() }
                    dataSynced = true
                } else {
                    try completeCheckpoint(taken)
                    snapshot = nil
                }
            } else {
                snapshot = journal.beginCheckpoint()
                dataSynced = false
            }
        } else if action < 93 {
            try fullCheckpoint()
        }
    }
    try fullCheckpoint()
}

/// The `durableBitWithWrittenBit` flaw: pokes the chunk's durable bit straight into the journal file.
private func writeDurableBitAtOnce(_ journal: Journal, _ chunk: Int) throws(Errno) {
    let offset = JournalCodec.durableBitmapOffset(header: journal.header) + Int64(ChunkBitmap.byteIndex(ofChunk: chunk))
    let storage = journal.storageForTesting
    let current = try storage.read(count: 1, at: offset)
    try storage.write([(current.first ?? 0) | UInt8(1 << (chunk & 7))], at: offset)
}

extension ChunkBitmap {
    func intersectionCount(_ other: ChunkBitmap) -> Int {
        zip(bytes, other.bytes).reduce(0) { $0 + ($1.0 & $1.1).nonzeroBitCount }
    }
}

@Suite("Power cuts and kill -9")
struct PowerCutTests {
    @Test func trustedChunksAreAlwaysOnDiskAndKillIsExact() {
        let clock = ContinuousClock()
        let start = clock.now
        var total = TrialReport()
        let trials: UInt64 = 3000
        for seed in 1...trials {
            let report = runTrial(seed: seed, flaw: .none)
            total.violations += report.violations
            total.powerCuts += report.powerCuts
            total.kills += report.kills
            total.trustedAfterPowerCut += report.trustedAfterPowerCut
            total.refetchedAfterPowerCut += report.refetchedAfterPowerCut
            total.exactResumes += report.exactResumes
            total.startOvers += report.startOvers
            if report.completed { total.completed = true } else {
                total.violations.append("seed \(seed): the download never completed")
            }
            if total.violations.count > 20 { break }
        }
        let elapsed = clock.now - start
        #expect(total.violations.isEmpty, "\(total.violations.prefix(20).joined(separator: "\n"))")
        // The trials must exercise what they claim to: many power cuts that really lost written chunks,
        // many chunks trusted across them, many exact resumes after kill -9.
        #expect(total.powerCuts > Int(trials))
        #expect(total.refetchedAfterPowerCut > Int(trials))
        #expect(total.trustedAfterPowerCut > Int(trials) * 5)
        #expect(total.exactResumes > Int(trials) / 3)
        // A gross slowdown only: 3000 trials take about 2 s here and 4 s with every core busy; a
        // slower, loaded runner must not fail the test for it.
        #expect(elapsed < .seconds(30), "\(elapsed)")
        print("power-cut trials: \(trials), power cuts \(total.powerCuts), kills \(total.kills), "
            + "trusted after power cut \(total.trustedAfterPowerCut), refetched \(total.refetchedAfterPowerCut), "
            + "exact kill -9 resumes \(total.exactResumes), start-overs \(total.startOvers), \(elapsed)")
    }

    @Test(arguments: RecorderFlaw.allCases.filter { $0 != .none })
    func theCheckerCatchesAFlawedRecorder(_ flaw: RecorderFlaw) {
        var found: TrialReport?
        for seed in UInt64(1)...2000 {
            let report = runTrial(seed: seed, flaw: flaw)
            if !report.violations.isEmpty {
                found = report
                break
            }
        }
        #expect(found != nil, "the flawed recorder \(flaw) passed every trial")
        if let found { print("\(flaw) caught: \(found.violations[0])") }
    }
}

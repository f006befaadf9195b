import Testing

@testable import SeggetQueue
@testable import SeggetRPC

func snapshot(_ status: TaskStatus, gid: UInt64 = 0xabc, path: String? = "/dl/f.bin") -> TaskSnapshot {
    TaskSnapshot(
        id: TaskID(gid), urls: ["http://h/f.bin", "http://m/f.bin"], status: status, options: TaskOptions(), path: path,
        directory: "/dl", totalLength: 1000, completedLength: 400, downloadSpeed: 50, connections: 3,
        grantedConnections: 3, grantedSpeed: nil, pieceLength: 1 << 20, numPieces: 1, bitfield: "80",
        errorCode: status == .error ? 3 : nil, errorMessage: status == .error ? "Resource not found" : nil,
        failure: nil, position: 0, createdAt: 0, finishedAt: nil)
}

/// aria2's getPaginationRange and the reversal for negative offsets, transcribed independently
/// from its description, to compare `page` against on every small case.
func aria2Page(size: Int, offset: Int, num: Int) -> [Int] {
    var offset = offset
    var num = num
    var reverse = false
    if offset < 0 {
        reverse = true
        let temp = offset + size
        if temp < 0 { return [] }
        offset = temp - (num - 1)
        if offset < 0 {
            offset = 0
            num = temp + 1
        }
    } else if size <= offset {
        return []
    }
    let last = min(size, offset + num)
    guard offset < last else { return [] }
    let range = Array(offset..<last)
    return reverse ? range.reversed() : range
}

@Suite struct Aria2StatusTests {
    let fullKeys = [
        "gid", "status", "totalLength", "completedLength", "uploadLength", "downloadSpeed", "uploadSpeed",
        "connections", "pieceLength", "numPieces", "dir", "files",
    ]

    /// The keys aria2c 1.36.0 answered for an HTTP download of known length in each state (beside
    /// `fullKeys`): never numSeeders or seeder; errorCode and errorMessage only once stopped.
    @Test(arguments: [
        (TaskStatus.active, ["bitfield"]), (.waiting, ["bitfield"]), (.paused, ["bitfield"]),
        (.complete, ["bitfield", "errorCode", "errorMessage"]), (.removed, ["bitfield", "errorCode", "errorMessage"]),
        (.error, ["bitfield", "errorCode", "errorMessage"]),
    ])
    func presenceFollowsAria2(_ status: TaskStatus, _ extra: [String]) {
        guard case .object(let members) = Aria2Status.render(snapshot(status)) else {
            Issue.record("not an object")
            return
        }
        #expect(Set(members.map(\.0)) == Set(fullKeys + extra), "\(status)")
    }

    @Test func noBitfieldWhileTheLengthIsUnknown() {
        var s = snapshot(.active)
        s.totalLength = 0
        s.numPieces = 0
        s.bitfield = nil
        #expect(Aria2Status.render(s)["bitfield"] == nil)
        #expect(Aria2Status.render(s)["numPieces"] == .string("0"))
    }

    /// aria2c: a removed download answers errorCode 31 and an empty errorMessage, its URI "used".
    @Test func removedLooksLikeAria2s() {
        let r = Aria2Status.render(snapshot(.removed))
        #expect(r["errorCode"] == .string("31"))
        #expect(r["errorMessage"] == .string(""))
        #expect(r["files"]?.arrayValue?.first?["uris"]?.arrayValue?.first?["status"] == .string("used"))
        #expect(Aria2Status.render(snapshot(.complete))["errorMessage"] == .string(""))
    }

    @Test func uriStatusFollowsTheFirstStart() {
        var fresh = snapshot(.paused)
        fresh.completedLength = 0
        #expect(Aria2Status.uris(fresh).arrayValue?.map { $0["status"] } == [.string("waiting"), .string("waiting")])
        #expect(
            Aria2Status.uris(snapshot(.paused)).arrayValue?.map { $0["status"] } == [
                .string("used"), .string("waiting"),
            ])
        #expect(
            Aria2Status.uris(snapshot(.active)).arrayValue?.map { $0["status"] } == [.string("used"), .string("used")])
        var failedAtOnce = snapshot(.error)
        failedAtOnce.completedLength = 0
        #expect(Aria2Status.uris(failedAtOnce).arrayValue?.first?["status"] == .string("used"))
    }

    @Test(arguments: [TaskStatus.active, .waiting, .paused, .error, .complete, .removed])
    func everyKeyPresentAndEveryValueAString(_ status: TaskStatus) {
        let r = Aria2Status.render(snapshot(status))
        guard case .object(let members) = r else { Issue.record("not an object"); return }
        for key in fullKeys { #expect(r[key] != nil, "\(key) missing for \(status)") }
        for (key, value) in members where key != "files" {
            guard case .string = value else { Issue.record("\(key) is not a string"); continue }
        }
        #expect(r["gid"] == .string("0000000000000abc"))
        #expect(r["status"] == .string(status.rawValue))
    }

    @Test func activeFigures() {
        let r = Aria2Status.render(snapshot(.active))
        #expect(r["totalLength"] == .string("1000"))
        #expect(r["completedLength"] == .string("400"))
        #expect(r["downloadSpeed"] == .string("50"))
        #expect(r["connections"] == .string("3"))
        #expect(r["uploadLength"] == .string("0"))
        #expect(r["pieceLength"] == .string("1048576"))
        #expect(r["bitfield"] == .string("80"))
        #expect(r["errorCode"] == nil)
    }

    @Test func pausedShowsNoSpeed() {
        let r = Aria2Status.render(snapshot(.paused))
        #expect(r["downloadSpeed"] == .string("0"))
        #expect(r["connections"] == .string("0"))
    }

    @Test func errorCarriesCodeAndMessage() {
        let r = Aria2Status.render(snapshot(.error))
        #expect(r["errorCode"] == .string("3"))
        #expect(r["errorMessage"] == .string("Resource not found"))
        #expect(Aria2Status.render(snapshot(.complete))["errorCode"] == .string("0"))
    }

    @Test func files() {
        let f = Aria2Status.render(snapshot(.active))["files"]?.arrayValue?.first
        #expect(f?["index"] == .string("1"))
        #expect(f?["path"] == .string("/dl/f.bin"))
        #expect(f?["length"] == .string("1000"))
        #expect(f?["completedLength"] == .string("400"))
        #expect(f?["selected"] == .string("true"))
        #expect(f?["uris"]?.arrayValue?.count == 2)
        #expect(
            f?["uris"]?.arrayValue?.first == .object([("uri", .string("http://h/f.bin")), ("status", .string("used"))]))
        var fresh = snapshot(.waiting, path: nil)
        fresh.completedLength = 0
        let unnamed = Aria2Status.render(fresh)["files"]?.arrayValue?.first
        #expect(unnamed?["path"] == .string(""))
        #expect(unnamed?["uris"]?.arrayValue?.first?["status"] == .string("waiting"))
    }

    @Test func keysFilter() {
        let r = Aria2Status.render(snapshot(.active), keys: ["status", "gid", "nonsense"])
        #expect(r == .object([("gid", .string("0000000000000abc")), ("status", .string("active"))]))
        #expect(Aria2Status.render(snapshot(.active), keys: []) == Aria2Status.render(snapshot(.active)))
    }

    @Test func pageMatchesAria2OnEverySmallCase() {
        for size in 0...9 {
            for offset in -12...12 {
                for num in 0...12 {
                    #expect(
                        Aria2Status.page(size: size, offset: offset, num: num)
                            == aria2Page(size: size, offset: offset, num: num),
                        "size \(size) offset \(offset) num \(num)")
                }
            }
        }
    }

    @Test func pageExamples() {
        #expect(Aria2Status.page(size: 5, offset: 0, num: 1000) == [0, 1, 2, 3, 4])
        #expect(Aria2Status.page(size: 5, offset: -1, num: 1000) == [4, 3, 2, 1, 0])
        #expect(Aria2Status.page(size: 5, offset: -1, num: 2) == [4, 3])
        #expect(Aria2Status.page(size: 5, offset: -2, num: 2) == [3, 2])
        #expect(Aria2Status.page(size: 5, offset: 3, num: 1) == [3])
        #expect(Aria2Status.page(size: 5, offset: 5, num: 1) == [])
        #expect(Aria2Status.page(size: 5, offset: -6, num: 3) == [])
    }
}

@Suite struct PieceMapTests {
    let mib: Int64 = 1 << 20

    /// aria2c's answers for a 20,000,000-byte file: 4 pieces done, then all of it.
    @Test func matchesAria2cExamples() {
        #expect(PieceMap.pieceCount(totalLength: 20_000_000) == 20)
        #expect(PieceMap.bitfield(finished: [0..<4 * mib + 5000], totalLength: 20_000_000) == "f00000")
        #expect(PieceMap.bitfield(finished: [0..<20_000_000], totalLength: 20_000_000) == "fffff0")
    }

    @Test func piecesNeedEveryByte() {
        let total = 10 * mib
        #expect(PieceMap.bitfield(finished: [], totalLength: total) == "0000")
        #expect(PieceMap.bitfield(finished: [mib..<3 * mib, 9 * mib..<total], totalLength: total) == "6040")
        #expect(PieceMap.bitfield(finished: [mib / 2..<3 * mib], totalLength: total) == "6000")
        #expect(PieceMap.bitfield(finished: [0..<mib - 1], totalLength: total) == "0000")
        // A short last piece is set once its own bytes are there.
        #expect(PieceMap.bitfield(finished: [8 * mib..<8 * mib + 10], totalLength: 8 * mib + 10) == "0080")
        #expect(PieceMap.bitfield(finished: [], totalLength: 0) == nil)
    }
}

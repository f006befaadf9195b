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
        "connections", "numSeeders", "pieceLength", "numPieces", "dir", "files",
    ]

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
        let unnamed = Aria2Status.render(snapshot(.waiting, path: nil))["files"]?.arrayValue?.first
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

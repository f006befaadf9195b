import Foundation
import Segget
import SeggetQueue
import Testing

@testable import SeggetRPC

/// aria2c 1.36.0's answers, recorded from a real `aria2c --enable-rpc` (defaults, HOME and --dir of
/// that run): `getGlobalOption`, and `getOption` for a download added with no options.
func aria2Fixture(_ name: String) throws -> [String: String] {
    let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    let data = try Data(contentsOf: directory.appendingPathComponent(name))
    return try JSONDecoder().decode([String: String].self, from: data)
}

@Suite struct Aria2OptionTableTests {
    let context = Aria2OptionTable.Context(settings: QueueSettings(downloadRoot: "/srv/dl"), rpcPort: 6800)

    func keys(_ answer: JSON) -> [String] {
        guard case .object(let members) = answer else { return [] }
        return members.map(\.0)
    }

    @Test func globalAnswerHasAria2sKeySet() throws {
        let aria2 = try aria2Fixture("aria2-global-options.json")
        #expect(aria2.count == 128)
        let ours = keys(Aria2OptionTable.global(context))
        #expect(Set(ours) == Set(aria2.keys).union(Aria2OptionTable.addedSince1_36).union(Aria2OptionTable.seggetOnly))
        #expect(ours.count == 129 + Aria2OptionTable.seggetOnly.count)
        #expect(ours.count == Set(ours).count)
        #expect(ours == ours.sorted())
    }

    @Test func downloadAnswerHasAria2sKeySet() throws {
        let aria2 = try aria2Fixture("aria2-task-options.json")
        #expect(aria2.count == 75)
        let ours = keys(Aria2OptionTable.download(.init(options: TaskOptions(), directory: "/srv/dl"), context))
        #expect(Set(ours) == Set(aria2.keys))
    }

    /// The options aria2 answers only once set are answered the same way, and then only per download.
    @Test func setOnlyOptionsAppearWhenSet() throws {
        let aria2 = try aria2Fixture("aria2-global-options.json")
        let setOnly = Aria2OptionTable.entries.filter { !$0.global }.map(\.name)
        #expect(setOnly == ["all-proxy", "checksum", "header", "out", "referer"])
        for name in setOnly { #expect(aria2[name] == nil) }
        let o = TaskOptions(
            outputName: "o", headers: ["A: 1"], referer: "http://r/", proxy: "http://p:1",
            checksums: [try ExpectedDigest(parsing: "md5=00000000000000000000000000000000")])
        let answer = Aria2OptionTable.download(.init(options: o, directory: "/srv/dl"), context)
        for name in setOnly { #expect(answer[name] != nil, "\(name)") }
    }

    /// Where aria2's default is "true" or "false", segget's answer is "true" or "false" too: the
    /// front-ends' dropdowns have exactly those two choices.
    @Test func booleansStayBooleans() throws {
        let aria2 = try aria2Fixture("aria2-global-options.json")
        guard case .object(let members) = Aria2OptionTable.global(context) else { return }
        for (key, value) in members where aria2[key] == "true" || aria2[key] == "false" {
            #expect(value == .string("true") || value == .string("false"), "\(key)")
        }
    }

    /// Where aria2 answers a number, so does segget (the front-ends' inputs are typed).
    @Test func numbersStayNumbers() throws {
        let aria2 = try aria2Fixture("aria2-global-options.json")
        guard case .object(let members) = Aria2OptionTable.global(context) else { return }
        for (key, value) in members where Int64(aria2[key] ?? "x") != nil {
            #expect(Int64(value.stringValue ?? "x") != nil, "\(key): \(value)")
        }
    }

    @Test func mappedOptionsReadSeggetsSettings() {
        var settings = QueueSettings(downloadRoot: "/srv/dl")
        settings.maxActive = 3
        settings.defaultConnections = 6
        settings.maxConnectionsPerServer = 2
        settings.maxOverallSpeed = 1000
        let g = Aria2OptionTable.global(.init(settings: settings, rpcPort: 7000, listenAll: true))
        #expect(g["dir"] == .string("/srv/dl"))
        #expect(g["max-concurrent-downloads"] == .string("3"))
        #expect(g["split"] == .string("6"))
        #expect(g["max-connection-per-server"] == .string("2"))
        #expect(g["max-overall-download-limit"] == .string("1000"))
        #expect(g["user-agent"] == .string("segget/\(seggetVersion)"))
        #expect(g["rpc-listen-port"] == .string("7000"))
        #expect(g["rpc-listen-all"] == .string("true"))
        let engine = DownloadOptions()
        #expect(g["max-tries"] == .string(String(engine.retries + 1)))
        #expect(g["connect-timeout"] == .string(String(Int(engine.transfer.connectTimeout))))
        #expect(g["piece-length"] == .string("1048576"))
        #expect(g["continue"] == .string("true"))
    }

    /// Every fixed value says why; every mapping is used, once each but for the schema's per-file
    /// options, which are all in the table under their aria2 names.
    @Test func tableIsComplete() {
        var mapped: [Aria2OptionTable.Mapping] = []
        for entry in Aria2OptionTable.entries {
            switch entry.source {
            case .fixed(_, let why): #expect(!why.isEmpty, "\(entry.name)")
            case .mapped(let m): mapped.append(m)
            }
        }
        let others = mapped.filter { $0 != .perFile }
        #expect(
            others.sorted { $0.rawValue < $1.rawValue }
                == Aria2OptionTable.Mapping.allCases.filter { $0 != .perFile }.sorted { $0.rawValue < $1.rawValue })
        #expect(mapped.count - others.count == OptionSchema.all.count)
        let perFile = Aria2OptionTable.entries.filter { $0.source == .mapped(.perFile) }.map(\.name)
        #expect(Set(perFile) == Set(OptionSchema.all.map(\.key)))
    }
}

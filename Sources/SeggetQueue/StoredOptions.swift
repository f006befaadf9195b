import Segget
import SeggetVerify

/// A task's options as the queue stores them (the `options` column): a JSON object keyed by
/// ``OptionSchema``'s keys (aria2's names), each value the text the option reads back, an array for a
/// repeatable option, and `"v"`, the version of this shape. Reading one back runs every value through
/// its option's check again, so a row never holds what an RPC client could not have sent.
///
/// ```
/// {"all-proxy":"http://127.0.0.1:3128","header":["X-One: 1"],"split":"12","v":1}
/// ```
struct StoredOptions: Codable, Equatable {
    /// The shape written now; a row with a higher `v` was written by a later segget and is refused.
    static let version = 1

    var options: FileOptions

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ s: String) { stringValue = s }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(_ options: FileOptions) { self.options = options }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(Self.version, forKey: Key("v"))
        for spec in OptionSchema.all {
            let values = spec.values(options)
            if values.isEmpty { continue }
            if spec.repeatable {
                try c.encode(values, forKey: Key(spec.key))
            } else {
                try c.encode(values[values.count - 1], forKey: Key(spec.key))
            }
        }
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        let v = try c.decode(Int.self, forKey: Key("v"))
        guard v == Self.version else {
            throw OptionError(
                key: "v",
                message: "of shape \(v), not this segget's \(Self.version) (written by a newer segget?)")
        }
        var fields: [(key: String, values: [String])] = []
        for key in c.allKeys where key.stringValue != "v" {
            guard let spec = OptionSchema.spec(key.stringValue) else {
                throw OptionError(key: key.stringValue, message: "an option this segget does not know (written by a newer segget?)")
            }
            let values =
                spec.repeatable
                ? try c.decode([String].self, forKey: key) : [try c.decode(String.self, forKey: key)]
            fields.append((key.stringValue, values))
        }
        // Schema order, so that the result does not depend on the JSON's key order.
        let order = Dictionary(uniqueKeysWithValues: OptionSchema.all.enumerated().map { ($1.key, $0) })
        fields.sort { order[$0.key, default: 0] < order[$1.key, default: 0] }
        options = try FileOptions(fields: fields)
    }
}

/// Migration 3: the options column from the synthesized JSON of schema 2's `TaskOptions` (field
/// names, one checksum string, no version) to ``StoredOptions``.
enum OptionsMigration {
    /// Schema 2's `TaskOptions`, field for field, as it was encoded.
    struct Version2: Decodable {
        var directory: String?
        var outputName: String?
        var headers: [String] = []
        var userAgent: String?
        var referer: String?
        var proxy: String?
        var connections: Int?
        var maxConnectionsPerServer: Int?
        var maxSpeed: Int64?
        var checksum: String?

        var options: FileOptions {
            get throws {
                FileOptions(
                    directory: directory, outputName: outputName, headers: headers, userAgent: userAgent,
                    referer: referer, proxy: proxy, connections: connections, maxSpeed: maxSpeed,
                    checksums: try checksum.map { [try ExpectedDigest(parsing: $0)] } ?? [],
                    maxConnectionsPerServer: maxConnectionsPerServer)
            }
        }
    }
}

import Segget
import SeggetQueue

/// aria2's `addMetalink` and `getServers` over the queue.
extension Aria2Methods {
    /// aria2's `addMetalink(metalink[, options[, position]])`: `metalink` is a Metalink 4 document in
    /// base64, as aria2 takes it. Each file it describes becomes a task of its own (its URLs by
    /// priority, the first the main one and the rest mirrors; saved under the document's name for it;
    /// its SHA-256 or MD5 digest as the task's checksum; its piece hashes checked while it downloads);
    /// the answer is their GIDs in the document's order. A document segget refuses (see
    /// `MetalinkDocument`) adds nothing and answers aria2's code-1 failure saying why; so does an
    /// `out` option with a document of several files.
    func addMetalink(_ p: [JSON]) throws(RPCError) -> JSON {
        guard case .string(let text)? = p.first else {
            throw .invalidParams("addMetalink takes a Metalink document in base64 first.")
        }
        let files: [MetalinkDownload]
        do {
            files = try MetalinkSource.downloads(base64: text)
        } catch {
            throw .failed(error.message)
        }
        let parsed = try Aria2TaskOptions.parse(p.count > 1 ? p[1] : nil, policy: policy)
        var position: Int?
        if p.count > 2 {
            guard let v = p[2].intValue, v >= 0 else { throw .invalidParams("position must be a non-negative integer.") }
            position = Int(v)
        }
        if parsed.options.outputName != nil && files.count > 1 {
            throw .failed("option out names one file, and the Metalink describes \(files.count); nothing was added.")
        }
        if parsed.gid != nil && files.count > 1 {
            throw .failed("option gid names one task, and the Metalink describes \(files.count) files (a task each); nothing was added.")
        }
        var gids: [JSON] = []
        for (i, file) in files.enumerated() {
            var options = parsed.options
            if options.outputName == nil {
                options.outputName = file.name
                // Its directories under the task's dir, confined to the root as any dir is.
                if file.subdirectory != nil {
                    options.directory = try Aria2TaskOptions.confineDirectory(
                        file.directory(under: options.directory ?? policy.root) ?? policy.root, policy: policy)
                }
            }
            let given = Set(options.checksums.map(\.algorithm))
            if let digest = DigestAlgorithm.checkable.lazy.compactMap({ a in file.checksums.first { $0.algorithm == a } }).first,
                !given.contains(digest.algorithm)
            {
                options.checksums.append(digest)
            }
            let add = options
            let paused = parsed.paused
            let at = position.map { $0 + i }
            let gid = parsed.gid
            let id = try run {
                try queue.add(urls: [file.url] + file.mirrors, options: add, paused: paused, position: at, pieces: file.pieces, id: gid)
            }
            gids.append(.string(id.gid))
        }
        return .array(gids)
    }

    /// aria2's `getServers(gid)`: for an active task, its file (index 1) and each connection that is
    /// fetching: `uri` (the task's URL it came from), `currentUri` (the URL fetched now, after
    /// redirects) and `downloadSpeed` (bytes per second, a string as aria2 writes numbers). An active
    /// task with no connection fetching (probing, waiting for its host's slot, retrying) has its file
    /// with no servers, as aria2 answers (a client reads `result[0].servers` of every active task); a
    /// task that is not active answers an empty list.
    func servers(_ t: TaskSnapshot) -> JSON {
        guard t.status == .active else { return .array([]) }
        var servers: [JSON] = []
        for c in queue.connections(t.id) ?? [] where c.state != .idle {
            guard let current = c.source, !current.isEmpty else { continue }
            servers.append(.object([
                ("uri", .string(Self.givenURI(current, of: t.urls))), ("currentUri", .string(current)),
                ("downloadSpeed", .string(String(Int64(max(0, c.bytesPerSecond))))),
            ]))
        }
        return .array([.object([("index", .string("1")), ("servers", .array(servers))])])
    }

    /// Which of the task's URLs a connection fetching `current` came from: the same URL, else one on
    /// the same host, else the first (the main URL, which redirected elsewhere).
    static func givenURI(_ current: String, of urls: [String]) -> String {
        if urls.contains(current) { return current }
        func host(_ u: String) -> String {
            let rest = u.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
            return rest.count > 2 ? rest[2].lowercased() : ""
        }
        return urls.first { host($0) == host(current) } ?? urls.first ?? current
    }
}

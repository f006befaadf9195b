import Glibc
import Segget
import SeggetRPC
import SeggetSystem

/// The daemon's RPC token file (mode 0600 in the state directory): made on the daemon's first start,
/// read by the client verbs. What its contents and permissions must be is `RPCToken`'s decision.
enum TokenFile {
    /// `$XDG_STATE_HOME/segget/rpc-secret`, else `~/.local/state/segget/rpc-secret`.
    static func defaultPath() -> String {
        RPCToken.defaultPath(
            xdgStateHome: getenv("XDG_STATE_HOME").map { String(cString: $0) },
            home: getenv("HOME").map { String(cString: $0) })
    }

    /// The token in the file at `path`, or nil when there is no file. Throws a sentence when the file is
    /// there but unusable: a symbolic link or another kind of file, readable by others, or not one token.
    static func load(_ path: String) throws(SeggetError) -> String? {
        let fd: FileDescriptor
        do {
            fd = try .open(path, .readOnly, options: [.closeOnExec, .noFollow])
        } catch .noSuchFileOrDirectory {
            return nil
        } catch .tooManySymbolicLinkLevels {
            throw SeggetError(.fileSystem, RPCToken.Problem.notARegularFile.describe(path: path))
        } catch {
            throw SeggetError(.fileSystem, "Cannot read the token file \(path): \(error).")
        }
        defer { fd.close() }
        do {
            let status = try fd.status()
            guard status.kind == .regular else {
                throw SeggetError(.fileSystem, RPCToken.Problem.notARegularFile.describe(path: path))
            }
            if let problem = RPCToken.check(permissions: status.permissions) {
                throw SeggetError(.fileSystem, problem.describe(path: path))
            }
            let bytes = try fd.readToEnd(limit: RPCToken.maxLength + 2)
            switch RPCToken.parse(bytes) {
            case .success(let token): return token
            case .failure(let problem): throw SeggetError(.fileSystem, problem.describe(path: path))
            }
        } catch let error as SeggetError {
            throw error
        } catch {
            throw SeggetError(.fileSystem, "Cannot read the token file \(path): \(error).")
        }
    }

    /// The token in the file at `path`, made first (with its directory, mode 0700) when there is none.
    /// A new file appears whole under its name, mode 0600: written unnamed and linked in, so that a
    /// client reading at the same moment never sees half of it, and two daemons starting at once agree.
    static func loadOrCreate(_ path: String) throws(SeggetError) -> (token: String, created: Bool) {
        if let token = try load(path) { return (token, false) }
        let directory = FileSystem.directoryName(of: path)
        Daemon.makeDirectories(directory, mode: 0o700)
        let token = RPCToken.generate()
        do {
            do {
                let file = try PosixFile.createUnnamed(inDirectory: directory, permissions: 0o600)
                defer { file.close() }
                try file.write(Array((token + "\n").utf8), at: 0)
                try file.sync()
                try file.link(as: path)
            } catch .notSupported {
                // No O_TMPFILE here: create the name exclusively; a reader may then see it empty for a moment.
                let fd = try FileDescriptor.open(
                    path, .writeOnly, options: [.create, .exclusiveCreate, .noFollow, .closeOnExec],
                    permissions: 0o600)
                defer { fd.close() }
                try fd.writeAll(token + "\n")
                try fd.sync()
            }
            try? FileSystem.syncDirectory(directory)
        } catch .fileExists {
            // Another daemon made it first: use that one.
            if let other = try load(path) { return (other, false) }
            throw SeggetError(
                .fileSystem, "The token file \(path) appeared and vanished again; start the daemon again.")
        } catch {
            throw SeggetError(
                .fileSystem,
                "Cannot create the token file \(path): \(error). Give --rpc-secret-file for another place, or --rpc-secret."
            )
        }
        return (token, true)
    }

    /// Whether `host` names this machine's loopback: only then do the client verbs send the local token.
    static func isLoopback(_ host: String) -> Bool {
        let name = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return HostPolicy.loopback.admits(name)
    }
}

import Segget
import SeggetSystem

/// The checks a task's URLs and options must pass before the queue accepts them. Requests may come
/// from a network client, so anything that could write outside the download root or inject header
/// lines is refused with a sentence that says what to change.
enum OptionRules {
    /// Refuses bad URLs and option values that need no file system to judge.
    static func check(urls: [String], options: TaskOptions) throws(QueueError) {
        guard !urls.isEmpty else {
            throw QueueError(.badOption, "No URL was given; add at least one http:// or https:// URL.")
        }
        for url in urls {
            let lower = url.lowercased()
            guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
                throw QueueError(
                    .badOption,
                    "The URL “\(shown(url))” is not an http:// or https:// URL; only those can be downloaded.")
            }
            guard !url.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) else {
                throw QueueError(
                    .badOption, "The URL “\(shown(url))” contains spaces or control characters; percent-encode them.")
            }
            // A URL with no host, or an IPv6 literal left open (`http://[bad`), was accepted and
            // failed only when its task started (exploratory run 8); aria2 refuses it when added.
            guard let parts = URLParts(url), !parts.host.isEmpty,
                !parts.host.hasPrefix("[") || (parts.host.hasSuffix("]") && parts.host.count > 2)
            else {
                throw QueueError(.badOption, "The URL “\(shown(url))” names no host that can be reached; check it.")
            }
        }
        // The values went through OptionSchema when they arrived as text (RPC, input file, command
        // line); a library caller's values meet the same checks here.
        do {
            _ = try options.validated()
        } catch {
            throw QueueError(.badOption, error.message)
        }
    }

    static func checkNoLineBreak(_ value: String, what: String) throws(QueueError) {
        if value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) {
            throw QueueError(
                .badOption,
                "\(what) contains a line break or NUL character, which could forge extra header lines; remove it.")
        }
    }

    /// Long or odd values are cut for messages.
    static func shown(_ s: String) -> String {
        let clean = String(s.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
        return clean.count > 80 ? String(clean.prefix(77)) + "…" : clean
    }
}

/// Where a task's file may go: the directory option resolved against the download root, with every
/// symbolic link followed, and refused when it ends up outside the root (unless any is allowed).
struct DirectoryPolicy: Sendable {
    /// The download root, resolved (realpath).
    let root: String
    let allowAnyDirectory: Bool

    /// Resolves the root, creating it when missing.
    init(root: String, allowAnyDirectory: Bool) throws(QueueError) {
        guard !root.isEmpty else { throw QueueError(.badOption, "The download root is empty; give a directory.") }
        if !DirectoryPolicy.isDirectory(root) {
            do throws(QueueError) { try DirectoryPolicy.makeDirectories(root) } catch {
                throw QueueError(
                    .badOption, "The download root \(root) does not exist and could not be created: \(error.message)")
            }
        }
        do {
            self.root = try FileSystem.realPath(root)
        } catch {
            throw QueueError(.badOption, "The download root \(root) cannot be resolved: \(error).")
        }
        self.allowAnyDirectory = allowAnyDirectory
    }

    /// The absolute, resolved directory for `requested` (relative paths are relative to the root;
    /// nil is the root). Parts that do not exist yet are checked by name and created later with
    /// ``prepare(_:)``, which checks again.
    func resolve(_ requested: String?) throws(QueueError) -> String {
        guard let requested, !requested.isEmpty else { return root }
        guard !requested.utf8.contains(0) else {
            throw QueueError(.badOption, "The directory contains a NUL character.")
        }
        try OptionRules.checkNoLineBreak(requested, what: "The directory")
        let absolute = requested.hasPrefix("/") ? requested : root + "/" + requested
        // Resolve the longest prefix that exists (following links), then append the rest literally.
        var components = absolute.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        var missing: [String] = []
        var resolved: String?
        while resolved == nil {
            let prefix = "/" + components.joined(separator: "/")
            switch Result(catching: { () throws(Errno) in try FileSystem.realPath(prefix) }) {
            case .success(let r):
                resolved = r
            case .failure(.noSuchFileOrDirectory) where !components.isEmpty:
                missing.insert(components.removeLast(), at: 0)
            case .failure(let error):
                throw QueueError(.badOption, "The directory \(requested) cannot be resolved: \(error).")
            }
        }
        for part in missing where part == ".." || part == "." {
            throw QueueError(
                .badOption,
                "The directory \(requested) goes through “\(part)” below a directory that does not exist; give a plain path."
            )
        }
        let base = resolved ?? "/"
        let full = missing.isEmpty ? base : (base == "/" ? "" : base) + "/" + missing.joined(separator: "/")
        guard allowAnyDirectory || Self.isInside(full, root: root) else {
            throw QueueError(
                .badOption,
                "The directory \(requested) resolves to \(full), which is outside the download root \(root); choose a directory inside it (the daemon must be started with permission to write anywhere else)."
            )
        }
        return full
    }

    /// Creates the directory (and parents) and checks that, links followed, it is still allowed.
    func prepare(_ directory: String) throws(QueueError) -> String {
        try Self.makeDirectories(directory)
        return try resolve(directory)
    }

    static func isInside(_ path: String, root: String) -> Bool {
        if root == "/" { return true }
        return path == root || path.hasPrefix(root + "/")
    }

    static func realPath(_ path: String) -> String? {
        try? FileSystem.realPath(path)
    }

    static func isDirectory(_ path: String) -> Bool {
        FileSystem.isDirectory(path)
    }

    /// mkdir -p, its failure in the words the command line uses (a symbolic link to nothing is said
    /// as such, not as a file that "exists but is not a directory").
    static func makeDirectories(_ path: String) throws(QueueError) {
        do {
            try FileSystem.makeDirectories(path)
        } catch {
            // "could not create …" starts a sentence; a path is given as it is written.
            let said = error.description
            throw QueueError(.storage, (said.hasPrefix("could ") ? "C" + said.dropFirst() : said) + ".")
        }
    }
}

import Testing

/// What the `segget` binary loads when it starts, read from the dynamic loader's own report
/// (`LD_DEBUG=libs`, on stderr).
@Suite struct LibraryLoadingTests {
    /// A download's process does not load SQLite: only the daemon's queue uses it, and it is loaded
    /// when the first database is opened (`SQLiteLibrary`), not at every start. libcurl is in the
    /// same report, so the report itself is known to work.
    @Test func sqliteIsNotLoadedAtStart() throws {
        let p = try SpawnedProcess(
            executable: try SpawnedProcess.seggetPath(), arguments: ["--version"], environment: ["LD_DEBUG": "libs"])
        let o = p.wait(timeout: 60)
        #expect(o.exitCode == 0, "\(o.stderr)")
        #expect(o.stderr.contains("libcurl.so"), "the loader's report: \(o.stderr.prefix(2000))")
        #expect(!o.stderr.contains("libsqlite3"), "SQLite was loaded at start: \(o.stderr.prefix(4000))")
    }
}

import Foundation
import SeggetVerify
import Testing

/// A finished download run again with a checksum the first run did not have (exploratory run 4):
/// it was refused as a file in the way ("already exists; pass --force"), so checking it meant
/// downloading it again. Now the file is read from disk and checked: a match is done (exit 0, no
/// byte fetched), a mismatch is exit 6 with the file kept as it was.
@Suite(.serialized) struct FinishedChecksumTests {
    @Test func aFinishedFileIsCheckedAgainstANewChecksumRatherThanRefused() throws {
        let body = cliTestBytes(700_000, seed: 41)
        let server = try startCLITestServer(["f.bin": body])
        defer { server.stop() }
        let dir = try CLITempDir()
        let out = dir.path("f.bin")
        let first = try SeggetCLI.run(["-q", "-o", out, server.url("f.bin")])
        #expect(first.exitCode == 0, "\(first.stderr)")
        func inode() throws -> Int? { try FileManager.default.attributesOfItem(atPath: out)[.systemFileNumber] as? Int }
        let firstInode = try #require(try inode())

        let sent = server.bodyBytesSent
        let checked = try SeggetCLI.run(["--checksum", "sha256=\(sha256Text(body))", "-o", out, server.url("f.bin")])
        #expect(checked.exitCode == 0, "\(checked.stderr)")
        #expect(checked.stderr.contains("was already completed by an earlier run"), "\(checked.stderr)")
        #expect(server.bodyBytesSent - sent <= 1, "sent \(server.bodyBytesSent - sent) body bytes")
        #expect(try inode() == firstInode)
        #expect(fileMatches(out, body))

        // The same again: still done.
        let again = try SeggetCLI.run(["-q", "--checksum", "sha256=\(sha256Text(body))", "-o", out, server.url("f.bin")])
        #expect(again.exitCode == 0, "\(again.stderr)")

        // Another file's checksum: exit 6, and the file is as it was.
        let wrong = try SeggetCLI.run(["-q", "--checksum", "sha256=\(String(repeating: "0", count: 64))", "-o", out, server.url("f.bin")])
        #expect(wrong.exitCode == 6, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("SHA-256 mismatch"), "\(wrong.stderr)")
        #expect(wrong.stderr.contains("without this checksum") && wrong.stderr.contains("--force"), "\(wrong.stderr)")
        #expect(try inode() == firstInode)
        #expect(fileMatches(out, body))
    }
}

@testable import Segget
import SeggetSystem
import Testing

/// `OtherURLResume.judge`: a partial download from another URL continues only where something shows
/// the same file; equal validators never do on their own.
struct OtherURLResumeRuleTests {
    static let journal = "https://files.example/r1/img.bin?X-Amz-Signature=aa&X-Amz-Expires=60"

    static func judge(
        _ url: String, journal: String = journal, declared: [String] = [], checked: Bool = false, renewed: Bool = false
    ) -> OtherURLResume {
        OtherURLResume.judge(journalURL: journal, url: url, declared: declared, bytesChecked: checked, renewed: renewed)
    }

    @Test func theSameURLIsTheSameURL() {
        #expect(Self.judge(Self.journal) == .sameURL)
        // The journal keeps the URL with its credentials redacted.
        #expect(Self.judge("https://u:secret@h.example/x", journal: "https://h.example/x") == .sameURL)
    }

    @Test(arguments: [
        "https://files.example/r1/img.bin?X-Amz-Signature=bb&X-Amz-Expires=600",  // a fresh signature
        "https://files.example/r1/img.bin",  // no query
        "https://FILES.example/r1/img.bin?x=1#part",  // host case, fragment
        "http://files.example/r1/img.bin?X-Amz-Signature=cc",  // the other scheme
        "https://user:pw@files.example/r1/img.bin?s=1",  // credentials
    ])
    func theSameResourceWithAnotherQueryContinues(url: String) {
        #expect(Self.judge(url) == .sameResource)
    }

    @Test(arguments: [
        "https://files.example/r2/img.bin?X-Amz-Signature=aa&X-Amz-Expires=60",  // another path: the report's case
        "https://files.example/r1/img.bin/",  // a trailing slash is another path
        "https://files.example/R1/img.bin",  // paths are case-sensitive
        "https://mirror.example/r1/img.bin",  // another host
        "https://files.example:8443/r1/img.bin",  // another port
        "https://files.example/r1/",
    ])
    func anythingElseIsUnprovenWithoutEvidence(url: String) {
        #expect(Self.judge(url) == .unproven)
        // Each kind of evidence makes it continue, in this order of precedence.
        #expect(Self.judge(url, renewed: true) == .renewedLink)
        #expect(Self.judge(url, declared: [url, Self.journal]) == .declaredSameFile)
        #expect(Self.judge(url, checked: true) == .bytesChecked)
        // A declared URL list that does not hold the journal's URL says nothing.
        #expect(Self.judge(url, declared: [url, "https://files.example/r3/img.bin"]) == .unproven)
    }

    @Test func aDeclaredURLMatchesWithItsCredentialsRedacted() {
        let journal = "https://a.example/f.iso"
        #expect(Self.judge("https://b.example/g.iso", journal: journal, declared: ["https://me:pw@a.example/f.iso"]) == .declaredSameFile)
    }

    @Test func onlyContinuingJudgmentsCarryANoticeReason() {
        #expect(OtherURLResume.sameURL.reason == nil)
        #expect(OtherURLResume.unproven.reason == nil)
        #expect(OtherURLResume.renewedLink.reason == nil)
        for j in [OtherURLResume.sameResource, .declaredSameFile, .bytesChecked] { #expect(j.reason != nil) }
    }

    @Test func resourceKeys() {
        #expect(ResourceKey("https://[::1]:8080/a?b") == ResourceKey("http://[::1]:8080/a"))
        #expect(ResourceKey("https://[::1]:8080/a") != ResourceKey("https://[::1]/a"))
        #expect(ResourceKey("https://h.example") == ResourceKey("https://h.example/?q"))
        #expect(ResourceKey.difference("http://127.0.0.1:8/a", "http://localhost:8/a") == "its host differs")
        #expect(ResourceKey.difference("http://[::1]:8/a", "http://[0:0::1]:8/a") == "its host differs")
        #expect(ResourceKey.difference("http://h:8/a", "http://h:9/a") == "its port differs")
        #expect(ResourceKey.difference("http://h/r1/a", "http://h/r2/a") == "its path differs")
        #expect(ResourceKey("https://h.example")?.path == "/")
        #expect(ResourceKey("https://a@b@h.example:1/p")?.host == "h.example")
        #expect(ResourceKey("https://a@b@h.example:1/p")?.port == "1")
        #expect(ResourceKey("not a url") == nil)
        #expect(ResourceKey("https:///path") == nil)
    }
}

/// The message for a data file that could not be created (exploratory run 4: a small file, saved
/// without a part file, was reported as "permission denied writing NAME.segget-part").
struct CreateMessageTests {
    @Test func permissionDeniedNamesTheDirectoryAndTheFinalName() {
        let paths = PartialDownload.Paths(final: "/srv/ro/small.bin")
        for e in [Errno.permissionDenied, .notPermitted] {
            let m = PartialDownload.createMessage(paths, e)
            #expect(m == "permission denied creating files in /srv/ro (to save /srv/ro/small.bin); choose another directory with -d or -o.", "\(m)")
            #expect(!m.contains(".segget-part"))
        }
        #expect(PartialDownload.createMessage(paths, .noSuchFileOrDirectory).contains("does not exist"))
    }
}

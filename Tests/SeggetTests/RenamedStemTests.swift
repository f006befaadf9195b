import SeggetJournal
import Testing
@testable import Segget

/// Which earlier run's partial download a download whose server renamed the file takes over.
@Suite struct RenamedStemTests {
    private func header(_ url: String, at createdAt: Int64) -> JournalHeader {
        JournalHeader(
            url: url, finalURL: url, totalLength: 10, chunkSize: 4, etag: "\"e\"", lastModified: nil,
            bootID: "b", createdAt: createdAt)
    }

    @Test func onlyTheSameURLsJournalUnderAnotherName() {
        let url = "https://h/get?id=7"
        let journals = [
            (stem: "a-1.bin", header: header("https://h/get?id=8", at: 5)),
            (stem: "a-2.bin", header: header(url, at: 3)),
        ]
        #expect(PartialDownload.renamedStem(own: "a-3.bin", url: url, journals: journals) == "a-2.bin")
        // Its own name is not another's, and another URL's is never taken.
        #expect(PartialDownload.renamedStem(own: "a-2.bin", url: url, journals: journals) == nil)
        #expect(PartialDownload.renamedStem(own: "a-3.bin", url: "https://h/get?id=9", journals: journals) == nil)
        #expect(PartialDownload.renamedStem(own: "x", url: url, journals: []) == nil)
    }

    @Test func theNewestOfSeveralAndTheURLComparedWithoutCredentials() {
        let journals = [
            (stem: "r-1.bin", header: header("https://u:p@h/f", at: 10)),
            (stem: "r-2.bin", header: header("https://h/f", at: 30)),
            (stem: "r-3.bin", header: header("https://h/f", at: 20)),
        ]
        #expect(PartialDownload.renamedStem(own: "r-4.bin", url: "https://u:secret@h/f", journals: journals) == "r-2.bin")
        #expect(PartialDownload.renamedStem(own: "r-2.bin", url: "https://h/f", journals: journals) == "r-3.bin")
    }
}

import Testing
@testable import SeggetJournal

@Suite("Boot ID")
struct BootIDTests {
    @Test func bootIDIsReadable() {
        let id = Journal.currentBootID()
        #expect(!id.isEmpty)
        #expect(id == Journal.currentBootID())
        #expect(!id.contains("\n"))
    }
}

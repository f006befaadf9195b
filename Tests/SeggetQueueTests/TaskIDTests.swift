import Testing

@testable import SeggetQueue

@Suite struct TaskIDTests {
    @Test func gidRoundTrip() {
        let id = TaskID(0x2089_b05e_cafe_0001)
        #expect(id.gid == "2089b05ecafe0001")
        #expect(TaskID(gid: id.gid) == id)
        #expect(TaskID(1).gid == "0000000000000001")
        #expect(TaskID(gid: "2089B05ECAFE0001") == id)
        #expect(TaskID(gid: "0000000000000000") == nil)
        #expect(TaskID(gid: "2089b05ecafe001") == nil)
        #expect(TaskID(gid: "2089b05ecafe000g") == nil)
        #expect(TaskID(gid: "+089b05ecafe0001") == nil)
    }
}

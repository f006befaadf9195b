import SeggetSystem
import Testing

@Suite struct SharedLibraryTests {
    /// A symbol of a library loaded at run time is found, and calling it through its address works.
    @Test func aSymbolIsFoundAndCallable() throws {
        let libc = try SharedLibrary(name: "libc.so.6")
        let address = try libc.symbol("strlen")
        let strlen = unsafeBitCast(address, to: (@convention(c) (UnsafePointer<CChar>) -> Int).self)
        #expect(strlen("segget") == 6)
    }

    /// A library that is not there, or a symbol that a library lacks, is an error with the loader's
    /// message, which names what was missing.
    @Test func missingLibrariesAndSymbolsSayWhat() {
        #expect {
            _ = try SharedLibrary(name: "libsegget-no-such-library.so.9")
        } throws: { error in
            (error as? SharedLibraryError)?.message.contains("libsegget-no-such-library.so.9") == true
        }
        #expect {
            _ = try SharedLibrary(name: "libc.so.6").symbol("segget_no_such_symbol")
        } throws: { error in
            (error as? SharedLibraryError)?.message.contains("segget_no_such_symbol") == true
        }
    }
}

import Glibc

/// A shared library loaded while segget runs rather than when it starts, for what only some runs
/// need. Loaded once and kept for the life of the process (never unloaded).
///
/// The corresponding C functions are `dlopen`, `dlsym` and `dlerror`.
public final class SharedLibrary: @unchecked Sendable {
    private let handle: UnsafeMutableRawPointer

    /// Loads `name` (a file name the dynamic loader searches for, such as "libsqlite3.so.0") with
    /// every symbol bound now; throws the loader's message where it cannot.
    public init(name: String) throws(SharedLibraryError) {
        guard let h = dlopen(name, RTLD_NOW | RTLD_LOCAL) else {
            throw SharedLibraryError(library: name, symbol: nil, message: Self.lastError())
        }
        handle = h
    }

    /// The address of `name` in the library; throws where the library has no such symbol.
    public func symbol(_ name: String) throws(SharedLibraryError) -> UnsafeMutableRawPointer {
        _ = dlerror()
        guard let p = dlsym(handle, name) else {
            throw SharedLibraryError(library: nil, symbol: name, message: Self.lastError())
        }
        return p
    }

    private static func lastError() -> String {
        dlerror().map { String(cString: $0) } ?? "unknown error"
    }
}

/// A library that could not be loaded, or a symbol it lacks, with the dynamic loader's message.
public struct SharedLibraryError: Error, CustomStringConvertible, Sendable {
    public let library: String?
    public let symbol: String?
    public let message: String
    public var description: String { message }
}

// swift-tools-version: 6.0
import PackageDescription

/// Release builds of the package's own Swift targets reach the metadata of the generic types they use
/// (`[Int: Probed]`, `Result<ProbeResult, SeggetError>`, …) through direct accessor calls rather than
/// by mangled name: the runtime otherwise demangles each name and looks up each of its conformances
/// (a scan of the binary's 4,900 conformance records) the first time, at every start of the process:
/// 0.4 ms of a 1 MiB download's 13 (issue 24). The price is a little code size.
let startupSettings: [SwiftSetting] = [
    .unsafeFlags(
        ["-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors"],
        .when(platforms: [.linux], configuration: .release)),
]

let package = Package(
    name: "segget",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "Segget", targets: ["Segget"]),
        .library(name: "SeggetVerify", targets: ["SeggetVerify"]),
        .library(name: "SeggetJournal", targets: ["SeggetJournal"]),
        .library(name: "SeggetMetalink", targets: ["SeggetMetalink"]),
        .library(name: "SeggetQueue", targets: ["SeggetQueue"]),
        .executable(name: "segget", targets: ["segget"]),
        .executable(name: "segget-testserver", targets: ["segget-testserver"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        // libcurl through typed, non-variadic wrappers (the only C the project has).
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // The libcurl driver: easy and multi handles with named, checked setters, write decisions as an
        // enum, and one loop that runs the transfers of several downloads. The only importer of CCurl.
        .target(name: "SeggetCurl", dependencies: ["CCurl", "CCrypto"], swiftSettings: startupSettings),
        // OpenSSL libcrypto: EVP digests for the verifier, and OpenSSL's initialisation for both.
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // The system layer: Errno, the syscalls (the only libc I/O), files with direct I/O, locks, threads.
        // Extended attributes (`<sys/xattr.h>`, header-only), for the system layer.
        .systemLibrary(name: "CXattr"),
        .target(name: "SeggetSystem", dependencies: ["CXattr"], swiftSettings: startupSettings),
        // Digests: hashing, checksum specs, server digest headers.
        .target(name: "SeggetVerify", dependencies: ["CCrypto", "SeggetSystem"], swiftSettings: startupSettings),
        // The resume journal: chunk bitmap, on-disk codec, checkpoint discipline.
        // CRC-32C with the CPU's crc32 instruction where it has one (header-only C, no flags).
        .systemLibrary(name: "CCRC32C"),
        .target(name: "SeggetJournal", dependencies: ["CCRC32C", "SeggetSystem"], swiftSettings: startupSettings),
        // libxml2's reader, declared here and loaded when the first Metalink is read (not linked: see its
        // shim.h); the package libxml2.
        .systemLibrary(name: "CLibXML2"),
        // Metalink 4 documents (RFC 5854) read into values, with hostile documents refused. The only
        // importer of CLibXML2.
        .target(name: "SeggetMetalink", dependencies: ["CLibXML2", "SeggetSystem", "SeggetVerify"], swiftSettings: startupSettings),
        // The engine: probe, plan, fetch, storage, download orchestration.
        .target(
            name: "Segget", dependencies: ["SeggetCurl", "SeggetSystem", "SeggetVerify", "SeggetJournal", "SeggetMetalink"],
            swiftSettings: startupSettings),
        // SQLite for the download queue's durable state: its header only (libsqlite3-dev); the
        // library is loaded when the first database is opened, not linked (see its shim.h).
        .systemLibrary(name: "CSQLite"),
        // A durable download manager: scheduling, connection and speed budgets, SQLite state.
        .target(name: "SeggetQueue", dependencies: ["Segget", "SeggetSystem", "SeggetJournal", "SeggetVerify", "CSQLite"], swiftSettings: startupSettings),
        // The command line for Swift's `CommandLine`, kept from the C library's start-up call instead
        // of the static runtime's reading of /proc/self/maps before main (see its argv.c).
        .target(name: "CStartup"),
        .executableTarget(
            name: "segget",
            dependencies: [
                "Segget", "SeggetSystem", "SeggetVerify", "SeggetQueue", "SeggetRPC", "CStartup",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: startupSettings,
            // A release binary starts in half the CPU time with its relative relocations packed
            // (DT_RELR, glibc 2.36+): the static Swift runtime's 94,000 of them are 1.3 MB of
            // `.rela.dyn` that the loader reads and applies at every start, where a 1 MiB
            // download takes a few milliseconds. GNU gold cannot pack them; lld, which ships with
            // the Swift toolchain, can. Still a position-independent executable.
            // Two more cuts to the loader's work at every start (issue 24: 1.4 ms of a 1 MiB
            // download's 15): `--no-export-dynamic` undoes the `-export-dynamic` of
            // `-static-stdlib`, which put 13,900 of the package's symbols in the dynamic table
            // (every library's lookups search it first; nothing looks them up: no dlsym, no
            // plugins), and build-support/static-libstdc++ makes `-lstdc++` take the archive,
            // so libstdc++.so.6 and its 3,000 symbol relocations are gone; the same directory
            // makes the driver's `-lgcc_s` take the unwinder from libgcc_eh.a, so libgcc_s.so.1 and
            // its constructor's CPUID questions (each a trip to the hypervisor on a VM) are gone
            // too: `segget --version` in 7.05-7.23 ms against 7.32-7.40 (`perf stat -r 200`).
            linkerSettings: [
                .unsafeFlags(
                    ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                     "-Xlinker", "--no-export-dynamic",
                     "-L\(Context.packageDirectory)/build-support/static-libstdc++"],
                    .when(platforms: [.linux], configuration: .release)),
            ]
        ),
        // aria2-compatible JSON-RPC over HTTP and WebSocket for `segget daemon`, on SwiftNIO.
        .target(
            name: "SeggetRPC",
            dependencies: [
                "Segget",
                "SeggetQueue",
                "SeggetSystem",
                "SeggetVerify",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ],
            swiftSettings: startupSettings
        ),
        // An HTTP/1.1 server that misbehaves on purpose, for tests, demos and benchmarks.
        .target(name: "SeggetTestServer"),
        .executableTarget(name: "segget-testserver", dependencies: ["SeggetTestServer"]),
        // Runs the engine's policy over seeded simulated networks and prints the table (docs/simulator.md).
        .executableTarget(name: "segget-sim", dependencies: ["Segget"]),
        // A program using the library's async API (docs/library.md); built so that it never rots.
        .executableTarget(name: "segget-example", dependencies: ["Segget"], path: "Examples/ProgressDownload"),
        // A program using the queue (docs/queue.md); the durability tests kill -9 it.
        .executableTarget(name: "segget-queue-example", dependencies: ["SeggetQueue"], path: "Examples/QueueDownload"),

        // Fixtures/: response heads of real servers (scripts/record-heads), read by path.
        .testTarget(
            name: "SeggetTests", dependencies: ["Segget", "SeggetCurl", "SeggetJournal", "SeggetSystem", "SeggetVerify"],
            exclude: ["Fixtures"]),
        .testTarget(name: "SeggetCurlTests", dependencies: ["SeggetCurl", "SeggetTestServer"]),
        .testTarget(name: "SeggetSystemTests", dependencies: ["SeggetSystem"]),
        .testTarget(name: "SeggetVerifyTests", dependencies: ["SeggetVerify"]),
        .testTarget(name: "SeggetJournalTests", dependencies: ["SeggetJournal"]),
        .testTarget(name: "SeggetMetalinkTests", dependencies: ["SeggetMetalink", "SeggetVerify"]),
        // Fixtures/: a queue database written by an earlier segget, for the migration test, read by path.
        .testTarget(
            name: "SeggetQueueTests", dependencies: ["SeggetQueue", "Segget", "SeggetVerify", "SeggetTestServer"], exclude: ["Fixtures"]),
        // Fixtures/: aria2c 1.36.0's own getGlobalOption and getOption answers, read by path.
        .testTarget(
            name: "SeggetRPCTests",
            dependencies: ["SeggetRPC", "SeggetQueue", "Segget", "SeggetTestServer", .product(name: "NIOCore", package: "swift-nio")],
            exclude: ["Fixtures"]
        ),
        // The command line parsed in-process: option groups, argument types, the options they build.
        .testTarget(
            name: "SeggetCLITests",
            dependencies: [
                "segget", "Segget", "SeggetVerify", "SeggetRPC", "CStartup", "SeggetTestServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "SeggetIntegrationTests",
            dependencies: ["Segget", "SeggetCurl", "SeggetJournal", "SeggetVerify", "SeggetTestServer"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

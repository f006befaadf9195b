// swift-tools-version: 6.1
// Micro-benchmarks for segget's hot pure code, kept out of the main package so that its build (and
// CI's) stays fast. Run: cd Benchmarks/micro && swift package benchmark
import PackageDescription

let package = Package(
    name: "segget-micro",
    platforms: [.macOS(.v13)],
    dependencies: [
        // The repository root; its identity follows the checkout directory name, so name it explicitly.
        .package(name: "segget", path: "../.."),
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "SeggetMicro",
            dependencies: [
                .product(name: "Segget", package: "segget"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/SeggetMicro",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ]
)

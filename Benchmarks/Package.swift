// swift-tools-version:6.1
//
// Storage micro-benchmarks for Halcyon, kept out of the root package so that the
// main build and the test command never compile the harness.
//
// Run from this folder:  swift package --disable-sandbox benchmark
// (see README.md). The root package is a path dependency; only its HalcyonCache
// product (and what that needs) is built, in release mode.
import PackageDescription

let package = Package(
    name: "HalcyonBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        // Named: a path dependency's identity is otherwise its folder's name, which differs
        // between checkouts (main, a worktree, CI's clone); the product is looked up by it.
        .package(name: "Halcyon", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // package-benchmark finds its targets under Benchmarks/<Name>/.
        .executableTarget(
            name: "StorageBenchmarks",
            dependencies: [
                .product(name: "HalcyonCache", package: "Halcyon"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/StorageBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)

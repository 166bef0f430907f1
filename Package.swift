// swift-tools-version:6.0
//
// Halcyon: a local cache daemon. The targets fix the direction of dependencies;
// each uses only those listed before it:
//
//   HalcyonVersion             the release number (the VERSION file's), for --version and server.info
//   CJansson, CHalcyonSystem   C shims (jansson; GNU-only syscalls such as O_NOATIME, utimensat, SO_PEERCRED;
//                              the vector byte scans: CRC32C, the reply writer's plain-string check)
//   CJemalloc                  jemalloc, the daemon's malloc (linked into halcyond only)
//   HalcyonSupport             what every layer may use: the `Locked` box, the monotonic clock, `Immortal`
//   HalcyonJSON                JSON values over libjansson and the fast reply writer (no cache, no sockets)
//   HalcyonCache               the storage engine: disk tier, memory tier, hybrid cache, CallbackQueue
//                              (no JSON, no sockets)
//   HalcyonUpstream            a RESP3 client for Redis and Valkey on SwiftNIO: codec, connections,
//                              cluster slots and redirects, client tracking (no cache, no JSON)
//   HalcyonUpstreamTier        the storage engine's `Upstream.Tier` over HalcyonUpstream: the
//                              metadata layout and scripts kept in Redis
//   HalcyonRPC                 JSON-RPC 2.0: envelopes, errors, the method table and handlers (no sockets, no files)
//   HalcyonServer              the SwiftNIO Unix-socket transport, connections, delivery, lifecycle,
//                              metrics (swift-metrics, Prometheus text) and log formats; it also builds the
//                              upstream tier of `--upstream`
//   halcyond, halcyon          thin executables: the daemon and the command-line client
//
// The targets after them are for tests, fuzzing and benchmarks only.
import Foundation
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
]

// ThreadSanitizer brings its own malloc, and jemalloc's would fight it: a daemon built for
// ThreadSanitizer (scripts/tsan-daemon sets this) links the system's malloc instead.
let daemonMalloc: [Target.Dependency] =
    ProcessInfo.processInfo.environment["HALCYON_SYSTEM_MALLOC"] == nil ? ["CJemalloc"] : []

let package = Package(
    name: "Halcyon",
    products: [
        .executable(name: "halcyond", targets: ["halcyond"]),
        .executable(name: "halcyon", targets: ["halcyon"]),
        .library(name: "HalcyonCache", targets: ["HalcyonCache"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/swift-extras/swift-extras-base64.git", from: "1.2.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // The release number both executables print for --version (checked against the
        // VERSION file and the Python package by a test).
        .target(name: "HalcyonVersion", swiftSettings: swiftSettings),
        .systemLibrary(
            name: "CJansson",
            path: "Sources/CJansson",
            pkgConfig: "jansson",
            providers: [.apt(["libjansson-dev"])]
        ),
        .target(name: "CHalcyonSystem", path: "Sources/CHalcyonSystem"),
        // The daemon's malloc (halcyond only): see Sources/halcyond/Allocator.swift.
        .systemLibrary(
            name: "CJemalloc",
            path: "Sources/CJemalloc",
            pkgConfig: "jemalloc",
            providers: [.apt(["libjemalloc-dev"])]
        ),
        // The lock and the clock every layer may use (Locked, MonotonicClock); libc only.
        .target(name: "HalcyonSupport", swiftSettings: swiftSettings),
        .target(
            name: "HalcyonJSON",
            dependencies: [
                "CJansson", "CHalcyonSystem",
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HalcyonCache",
            dependencies: [
                "CHalcyonSystem", "HalcyonSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HalcyonUpstream",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HalcyonUpstreamTier",
            dependencies: [
                "HalcyonUpstream", "HalcyonCache", "HalcyonSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HalcyonRPC",
            dependencies: ["HalcyonJSON", "HalcyonCache", "HalcyonSupport"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HalcyonServer",
            dependencies: [
                "HalcyonRPC", "HalcyonCache", "HalcyonJSON", "CHalcyonSystem", "HalcyonVersion", "HalcyonSupport",
                "HalcyonUpstream", "HalcyonUpstreamTier",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "halcyond",
            dependencies: [
                "HalcyonServer", "HalcyonVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ] + daemonMalloc,
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "halcyon",
            dependencies: [
                "HalcyonJSON", "CHalcyonSystem", "HalcyonVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings,
            // The CLI starts once per shell call: a release build links the Swift runtime in,
            // which takes a third off each start (Benchmarks/RESULTS.md, "A shell call").
            // ArgumentParser brings FoundationEssentials, whose static archive needs these.
            linkerSettings: [
                .unsafeFlags(["-static-stdlib"], .when(configuration: .release)),
                .linkedLibrary("_FoundationCollections", .when(configuration: .release)),
                .linkedLibrary("_FoundationCShims", .when(configuration: .release)),
                .linkedLibrary("swiftSynchronization", .when(configuration: .release)),
            ]
        ),
        // What several test targets share: the test client, the daemon and CLI launchers (one
        // way to find the built binaries), an in-process dispatcher over a real cache, the
        // seeded generator, an in-memory upstream tier.
        .target(
            name: "HalcyonTestSupport",
            dependencies: ["HalcyonJSON", "HalcyonCache", "HalcyonRPC", "HalcyonSupport"],
            path: "Tests/HalcyonTestSupport",
            swiftSettings: swiftSettings
        ),
        // The request parser and dispatcher under fuzzing: `RequestFuzzer` checks one input;
        // `halcyon-fuzz` is libFuzzer's entry point when scripts/fuzz builds it with
        // -sanitize=fuzzer -DFUZZING, and a corpus replayer otherwise.
        .target(
            name: "HalcyonFuzzing",
            dependencies: ["HalcyonRPC", "HalcyonJSON", "HalcyonCache", "HalcyonSupport"],
            path: "Tests/HalcyonFuzzing",
            swiftSettings: swiftSettings
        ),
        // libFuzzer's `LLVMFuzzerRunDriver`, declared for halcyon-fuzz's fuzzing build.
        .target(name: "CFuzzerDriver", path: "Tests/CFuzzerDriver"),
        .executableTarget(
            name: "halcyon-fuzz",
            dependencies: ["HalcyonFuzzing", "CFuzzerDriver"],
            path: "Tests/HalcyonFuzzer",
            swiftSettings: swiftSettings
        ),
        // The hot-path scanner against jansson: `ScannerFuzzer` checks one input (it needs
        // HalcyonJSON only, so the fuzzing build is small); `halcyon-scanner-fuzz` is
        // libFuzzer's entry point when scripts/fuzz-scanner builds it with -sanitize=fuzzer
        // -DFUZZING, a corpus replayer otherwise.
        .target(
            name: "HalcyonScannerFuzzing",
            dependencies: ["HalcyonJSON"],
            path: "Tests/HalcyonScannerFuzzing",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "halcyon-scanner-fuzz",
            dependencies: ["HalcyonScannerFuzzing", "CFuzzerDriver"],
            path: "Tests/HalcyonScannerFuzzer",
            swiftSettings: swiftSettings
        ),
        // The RESP3 decoder under fuzzing, like HalcyonFuzzing for the request parser:
        // `RESP3Fuzzer` checks one input; `halcyon-resp3-fuzz` is libFuzzer's entry point when
        // scripts/fuzz-resp3 builds it with -sanitize=fuzzer -DFUZZING, a corpus replayer otherwise.
        .target(
            name: "HalcyonUpstreamFuzzing",
            dependencies: ["HalcyonUpstream", .product(name: "NIOCore", package: "swift-nio")],
            path: "Tests/HalcyonUpstreamFuzzing",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "halcyon-resp3-fuzz",
            dependencies: ["HalcyonUpstreamFuzzing", "CFuzzerDriver"],
            path: "Tests/HalcyonUpstreamFuzzer",
            swiftSettings: swiftSettings
        ),
        // Benchmarks/upstream.sh's client side (pipelined GETs through HalcyonUpstream).
        .executableTarget(
            name: "upstream-bench",
            dependencies: [
                "HalcyonUpstream",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/upstream",
            exclude: ["redis_py_bench.py"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HalcyonUpstreamTests",
            dependencies: [
                "HalcyonUpstream", "HalcyonUpstreamTier", "HalcyonUpstreamFuzzing", "HalcyonCache", "HalcyonSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HalcyonJSONTests",
            dependencies: ["HalcyonJSON", "CJansson", "CHalcyonSystem", "HalcyonTestSupport", "HalcyonScannerFuzzing"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HalcyonCacheTests", dependencies: ["HalcyonCache", "HalcyonSupport", "HalcyonTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HalcyonRPCTests",
            dependencies: ["HalcyonRPC", "HalcyonJSON", "HalcyonCache", "HalcyonFuzzing", "HalcyonTestSupport", "HalcyonSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HalcyonServerTests",
            dependencies: [
                "HalcyonServer", "HalcyonRPC", "HalcyonJSON", "HalcyonCache", "CHalcyonSystem", "HalcyonTestSupport", "HalcyonVersion",
                "HalcyonSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The command-line client's own logic (durations, escaping, options, output, top's
        // arithmetic), through `@testable import` of the executable target.
        .testTarget(name: "HalcyonCLITests", dependencies: ["halcyon", "HalcyonJSON"], swiftSettings: swiftSettings),
    ]
)

// swift-tools-version:6.0
//
// The transport floor: a SwiftNIO server that answers halcyond's protocol lines without a
// cache behind them (see Sources/TransportFloor/main.swift). Kept out of the root package so
// that the main build and the test command never compile it; `Benchmarks/transport_floor.sh`
// builds and runs it.
import PackageDescription

let package = Package(
    name: "TransportFloor",
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "TransportFloor",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)

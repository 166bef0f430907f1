// swift-tools-version:6.0
//
// The transport floors: a SwiftNIO server that answers halcyond's protocol lines without a
// cache behind them (Sources/TransportFloor), the same server on epoll without SwiftNIO
// (Sources/EpollFloor, on Sources/EpollLoop), both with the replies of Sources/FloorReplies;
// and halcyond's memory hits on that epoll loop (Sources/EpollHalcyon, over the root
// package's HalcyonCache). Kept out of the root package so that the main build and the test
// command never compile them; `Benchmarks/transport_floor.sh` builds and runs them.
import PackageDescription

let package = Package(
    name: "TransportFloor",
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // Named: a path dependency's identity is otherwise its folder's name (see
        // Benchmarks/Package.swift).
        .package(name: "Halcyon", path: "../.."),
    ],
    targets: [
        .target(name: "FloorReplies", swiftSettings: [.swiftLanguageMode(.v6)]),
        .executableTarget(
            name: "TransportFloor",
            dependencies: [
                "FloorReplies",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(name: "CEpoll"),
        .target(name: "EpollLoop", dependencies: ["CEpoll", "FloorReplies"], swiftSettings: [.swiftLanguageMode(.v6)]),
        .executableTarget(
            name: "EpollFloor",
            dependencies: ["FloorReplies", "EpollLoop"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "EpollHalcyon",
            dependencies: ["EpollLoop", "FloorReplies", .product(name: "HalcyonCache", package: "Halcyon")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)

// Entry point read by package-benchmark's plugin: it calls `benchmarks` once to
// register every benchmark, then runs the ones asked for on the command line.
import Benchmark

let benchmarks: @Sendable () -> Void = {
    // Wall clock and throughput for every benchmark; malloc counts because an
    // allocation per operation is the usual reason a cache path is slow.
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 3,
        maxDuration: .seconds(2),
        maxIterations: 1_000
    )
    registerDiskBenchmarks()
    registerMemoryBenchmarks()
}

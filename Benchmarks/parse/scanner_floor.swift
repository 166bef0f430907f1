// What one request line costs to parse in the daemon's JSON layer, through jansson
// (`JSONValue.parse`, `json_loadb` with the daemon's flags) and through the hot-path
// scanner (`JSONScanner.scan`, into a flat document that reads as the same tree), then freed. Five interleaved
// rounds per shape; the median of each. Timed in the thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID), so other work on a shared machine does not count. Built with HalcyonJSON's sources by
// scanner_floor.sh (swiftc -O), so it needs no package build.

import Foundation
import HalcyonJSON

func setLine(_ valueBytes: Int) -> [UInt8] {
    Array(#"{"jsonrpc":"2.0","id":12345,"method":"cache.set","params":{"key":"key:1234","value":""#.utf8)
        + [UInt8](repeating: UInt8(ascii: "x"), count: valueBytes) + Array(#""}}"#.utf8)
}

let shapes: [(String, [UInt8], Int)] = [
    ("ping", Array(#"{"jsonrpc":"2.0","id":12345,"method":"server.ping"}"#.utf8), 100_000),
    ("get", Array(#"{"jsonrpc":"2.0","id":12345,"method":"cache.get","params":{"key":"key:1234"}}"#.utf8), 100_000),
    ("set 100 B", setLine(100), 50_000),
    ("set 100 B, ttl", Array(#"{"jsonrpc":"2.0","id":12345,"method":"cache.set","params":{"key":"key:1234","value":""#.utf8)
        + [UInt8](repeating: UInt8(ascii: "x"), count: 100) + Array(#"","ttl":{"seconds":60},"toDisk":false}}"#.utf8), 50_000),
    ("set 4 KiB", setLine(4096), 5_000),
    ("set 64 KiB", setLine(65536), 300),
]

func threadCPUNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

func nanosecondsPerLine(_ line: [UInt8], _ iterations: Int, scanner: Bool) -> Double {
    line.withUnsafeBytes { bytes in
        let start = threadCPUNanoseconds()
        var kept = 0
        for _ in 0..<iterations {
            if scanner {
                if case .parsed(let document) = JSONScanner.scan(bytes) {
                    kept &+= withExtendedLifetime(document) { document.root.count }
                }
            } else if case .success(let tree) = JSONValue.parse(bytes) {
                kept &+= tree.count
            }
        }
        precondition(kept == iterations * 4 || kept == iterations * 3, "every line parsed: \(kept)")
        return Double(threadCPUNanoseconds() - start) / Double(iterations)
    }
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

print("| line | bytes | jansson ns | scanner ns | jansson / scanner |")
print("|---|---:|---:|---:|---:|")
for (name, line, iterations) in shapes {
    var jansson: [Double] = []
    var scanner: [Double] = []
    for _ in 0..<5 {
        jansson.append(nanosecondsPerLine(line, iterations, scanner: false))
        scanner.append(nanosecondsPerLine(line, iterations, scanner: true))
    }
    let j = median(jansson), s = median(scanner)
    print("| \(name) | \(line.count) | \(Int(j)) | \(Int(s)) | \(String(format: "%.1f", j / s))× |")
}

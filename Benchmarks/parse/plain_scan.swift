// The reply writer's plain-string check over values of 100 B, 4 KiB and 64 KiB: the C
// scan in each of its variants (`hc_json_plain_ascii`: AVX2 or SSE2 as the CPU allows,
// SSE2 alone, word arithmetic alone) against a word-at-a-time scan in Swift, the form the
// check had before. Built and run by plain_scan.sh; ns per value, best of 7 rounds.

import CHalcyonSystem
import Dispatch

@inline(__always) func wordNeedsEscape(_ word: UInt64) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let control = (word &- ones &* 0x20) & ~word & highs
    let quote = word ^ (ones &* 0x22)
    let backslash = word ^ (ones &* 0x5C)
    return (control | ((quote &- ones) & ~quote & highs) | ((backslash &- ones) & ~backslash & highs)) != 0
}

@inline(never) func swiftWords(_ base: UnsafeRawPointer, _ n: Int) -> Bool {
    var i = 0
    while i &+ 8 <= n {
        let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
        if word & 0x8080_8080_8080_8080 != 0 || wordNeedsEscape(word) { return false }
        i &+= 8
    }
    while i < n {
        let b = base.load(fromByteOffset: i, as: UInt8.self)
        if b >= 0x80 || b < 0x20 || b == 0x22 || b == 0x5C { return false }
        i &+= 1
    }
    return true
}

let scans: [(String, (UnsafeRawPointer, Int) -> Bool)] = [
    ("C, chosen variant", { hc_json_plain_ascii($0, $1) != 0 }),
    ("C, SSE2", { hc_json_plain_ascii_sse2($0, $1) != 0 }),
    ("C, words", { hc_json_plain_ascii_portable($0, $1) != 0 }),
    ("Swift, words", { swiftWords($0, $1) }),
]

print("| scan | 100 B | 4 KiB | 64 KiB |")
print("|---|---:|---:|---:|")
for (name, scan) in scans {
    var cells: [String] = []
    for size in [100, 4096, 65536] {
        let value = (0..<size).map { UInt8(0x41 + $0 % 26) }
        let rounds = max(1, 40_000_000 / size)
        var best = Double.infinity
        value.withUnsafeBytes { raw in
            for _ in 0..<7 {
                let start = DispatchTime.now().uptimeNanoseconds
                var plain = 0
                for _ in 0..<rounds where scan(raw.baseAddress!, raw.count) { plain += 1 }
                precondition(plain == rounds)
                best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / Double(rounds))
            }
        }
        cells.append(String(Int(best + 0.5)))
    }
    print("| \(name) | \(cells.joined(separator: " | ")) |")
}

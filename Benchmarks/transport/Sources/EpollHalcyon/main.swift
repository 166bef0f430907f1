// halcyond's memory-hit path on the epoll floor's transport: `EpollServer` in front of a
// `HybridCache` (HalcyonCache, the daemon's storage engine) whose memory tier holds the
// keys a load generator's gets ask for. A `cache.get` line is answered as halcyond answers
// a memory hit: its id and key scanned from the line, the entry lent by `memoryLookup` (the
// lookup, the hit's count, its recency and its sliding lifetime), and the value written into
// a reply of halcyond's shape after a check that it needs no escaping. Anything else is
// answered with an error line. It measures what halcyond's gets would cost on a transport of
// its own; it is not a server to use.
//
// Usage: EpollHalcyon SOCKET-PATH [THREADS (default: the core count)] [KEYS (10000)]

import EpollLoop
import FloorReplies
import Foundation
import HalcyonCache

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    print("usage: EpollHalcyon SOCKET-PATH [THREADS] [KEYS]")
    exit(2)
}
let cores = ProcessInfo.processInfo.activeProcessorCount
let threads = arguments.count > 2 ? Int(arguments[2]) ?? cores : cores
let keys = arguments.count > 3 ? Int(arguments[3]) ?? 10_000 : 10_000

// The cache's folder beside the socket, so that whoever removes the socket's folder removes
// it too.
let folder = URL(fileURLWithPath: arguments[1]).deletingLastPathComponent().appendingPathComponent("epoll-halcyon-cache")
let cache = HybridCache(config: HybridCache.Config(memory: .init(), disk: .init(directory: folder)))
var memoryOnly = HybridCache.Options()
memoryOnly.toDisk = false
// The load generator's keys (`key:N`), with values of 100 bytes, as its prefill sets them.
let stored = DispatchSemaphore(value: 0)
for n in 0..<keys {
    cache.store(CacheEntry(bytes: Array(repeating: UInt8(ascii: "v"), count: 100)), forKey: CacheKey("key:\(n)"),
                options: memoryOnly) { _ in stored.signal() }
}
for _ in 0..<keys { stored.wait() }

enum Line {
    static let idMember = Array(#""id":"#.utf8)
    static let keyMember = Array(#""key":""#.utf8)
    static let getMethod = Array(#""cache.get""#.utf8)
    static let head = Array(#"{"jsonrpc":"2.0","id":"#.utf8)
    static let hitStart = Array(#","result":{"found":true,"value":""#.utf8)
    static let hitMiddle = Array(#"","encoding":"utf8","cacheType":"memory","expiresAt":"#.utf8)
    static let version = Array(#","version":"#.utf8)
    static let miss = Array(#","result":{"found":false}}"#.utf8 + [0x0A])
    static let refused = Array(#","error":{"code":-32601,"message":"only cache.get"}}"#.utf8 + [0x0A])

    /// The bytes of `line` from `start` up to the first of `stops`.
    static func span(_ line: UnsafeRawBufferPointer, from start: Int, until stops: (UInt8) -> Bool) -> Range<Int> {
        var end = start
        while end < line.count, !stops(line[end]) { end += 1 }
        return start..<end
    }

    /// Appends `value` in decimal, its digits made on the stack.
    static func appendDecimal(_ value: UInt64, to reply: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var at = digits.count
            var v = value
            repeat {
                at -= 1
                digits[at] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
            } while v > 0
            reply.append(contentsOf: digits[at...])
        }
    }

    /// Whether `bytes` go into a JSON string as they are (printable ASCII, no quote or
    /// backslash), as halcyond checks before it writes a value unescaped.
    static func isPlain(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }
}

EpollServer.run(path: arguments[1], threads: threads) { line, reply in
    reply.append(contentsOf: Line.head)
    guard let idAt = LineScan.find(Line.idMember, in: line) else {
        reply.append(contentsOf: "null".utf8)
        reply.append(contentsOf: Line.refused)
        return
    }
    let id = Line.span(line, from: idAt + Line.idMember.count) { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "}") }
    reply.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[id]))
    guard LineScan.find(Line.getMethod, in: line) != nil, let keyAt = LineScan.find(Line.keyMember, in: line) else {
        reply.append(contentsOf: Line.refused)
        return
    }
    let keySpan = Line.span(line, from: keyAt + Line.keyMember.count) { $0 == UInt8(ascii: "\"") }
    let key = CacheKey(utf8: UnsafeRawBufferPointer(rebasing: line[keySpan]))
    let lookup = cache.memoryLookup(forKey: key) { lent, expiresAt in
        guard Line.isPlain(lent.bytes) else { return false }
        reply.append(contentsOf: Line.hitStart)
        reply.append(contentsOf: lent.bytes)
        reply.append(contentsOf: Line.hitMiddle)
        Line.appendDecimal(UInt64(max(0, (expiresAt ?? .distantFuture).timeIntervalSince1970)), to: &reply)
        reply.append(contentsOf: Line.version)
        Line.appendDecimal(lent.version, to: &reply)
        reply.append(contentsOf: "}}\n".utf8)
        return true
    }
    if case .answered(nil) = lookup { return }
    reply.append(contentsOf: Line.miss)
}

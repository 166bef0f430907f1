// Disk hits seen from clients: reads handed to the ioQueue and their replies handed back,
// in order with the sets and removals around them, on one connection and across
// connections.

import Foundation
import HalcyonJSON
import Testing

@Suite("Disk hits end to end", .serialized, .timeLimit(.minutes(2)))
struct DiskHitsEndToEndTests {
    /// A memory tier smaller than any value below: every get that finds its key reads the
    /// disk tier, on the ioQueue.
    static let smallMemory = ["--memory-limit", "1KiB"]

    /// A value of 2,000 bytes that names its key and version.
    static func value(_ key: String, _ version: Int) -> String {
        let head = "\(key)@\(version):"
        return head + String(repeating: "x", count: 2000 - head.utf8.count)
    }

    /// Waits until every journaled set is in its file (so reads open files), at most 30 s.
    static func awaitFilesWritten(_ client: TestClient) throws {
        let deadline = Date().addingTimeInterval(30)
        while try client.result("cache.stats")["journal"]?["unwrittenEntries"]?.int64 != 0 {
            guard Date() < deadline else { throw TestClientError.noReply }
            _ = try client.result("debug.sleep", #"{"seconds":0.02}"#)
        }
    }

    /// Sends `lines` in one write and reads as many replies, in the order they come.
    static func pipeline(_ client: TestClient, _ lines: [String]) throws -> [JSONValue] {
        try client.sendRaw(Array(lines.map { $0 + "\n" }.joined().utf8))
        return try lines.indices.map { _ in try client.readReply() }
    }

    static func line(_ id: Int, _ method: String, _ params: String) -> String {
        #"{"jsonrpc":"2.0","id":\#(id),"method":"\#(method)","params":\#(params)}"#
    }

    /// One pipeline of disk-hit gets interleaved with sets and removals of the same keys:
    /// the replies come in the order of the requests, and each get sees exactly the
    /// writes before it (a sequential model of the keys decides what it must see).
    @Test func pipelinedDiskHitsSetsAndRemovalsKeepOrder() throws {
        let daemon = try DaemonProcess(arguments: Self.smallMemory)
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let keys = (0..<24).map { "ord\($0)" }
        var model: [String: String] = [:]
        for key in keys {
            model[key] = Self.value(key, 0)
            _ = try client.result("cache.set", #"{"key":"\#(key)","value":"\#(model[key]!)"}"#)
        }
        try Self.awaitFilesWritten(client)

        var lines: [String] = []
        var expected: [Int: String?] = [:]  // get id -> the value it must see (nil: a miss)
        var id = 0
        func get(_ key: String) {
            id += 1
            expected[id] = .some(model[key])
            lines.append(Self.line(id, "cache.get", #"{"key":"\#(key)"}"#))
        }
        for round in 1...4 {
            for (i, key) in keys.enumerated() {
                get(key)
                switch (i + round) % 3 {
                case 0:
                    id += 1
                    model[key] = Self.value(key, round)
                    lines.append(Self.line(id, "cache.set", #"{"key":"\#(key)","value":"\#(model[key]!)"}"#))
                case 1:
                    id += 1
                    model[key] = nil
                    lines.append(Self.line(id, "cache.remove", #"{"key":"\#(key)"}"#))
                default:
                    break
                }
                get(key)
            }
        }
        let replies = try Self.pipeline(client, lines)
        #expect(replies.map { $0["id"]?.int64 } == (1...id).map { Int64($0) })
        var diskHits = 0
        for reply in replies {
            let rid = Int(reply["id"]?.int64 ?? -1)
            #expect(reply["error"] == nil, "request \(rid) failed: \(reply)")
            guard let want = expected[rid] else { continue }
            let result = reply["result"]
            #expect(result?["value"]?.string == want, "get \(rid) saw a value other than the writes before it")
            if result?["cacheType"]?.string == "disk" { diskHits += 1 }
        }
        // The model's reads of live keys were disk hits (memory keeps no value here).
        #expect(diskHits == expected.values.filter { $0 != nil }.count)
    }

    /// A write acknowledged on one connection is seen by a disk-hit read on another that
    /// starts after the acknowledgement, while a third connection keeps the ioQueue busy
    /// with disk hits of other keys.
    @Test func acknowledgedWritesReachDiskHitsOnOtherConnections() throws {
        let daemon = try DaemonProcess(arguments: Self.smallMemory)
        defer { daemon.cleanUp() }
        let writer = try daemon.client()
        let reader = try daemon.client()
        let busy = try daemon.client()
        let keys = (0..<16).map { "x\($0)" }
        let others = (0..<32).map { "busy\($0)" }
        for key in keys + others {
            _ = try writer.result("cache.set", #"{"key":"\#(key)","value":"\#(Self.value(key, 0))"}"#)
        }
        try Self.awaitFilesWritten(writer)
        for generation in 1...6 {
            // The busy connection's gets queue ahead of and among the others' work.
            let busyLines = others.enumerated().map { Self.line($0.offset, "cache.get", #"{"key":"\#($0.element)"}"#) }
            try busy.sendRaw(Array(busyLines.map { $0 + "\n" }.joined().utf8))
            let sets = keys.enumerated().map { i, key in
                Self.line(i, "cache.set", #"{"key":"\#(key)","value":"\#(Self.value(key, generation))"}"#)
            }
            let acknowledged = try Self.pipeline(writer, sets)
            #expect(acknowledged.allSatisfy { $0["result"]?["stored"]?.bool == true })
            let gets = keys.enumerated().map { Self.line($0.offset, "cache.get", #"{"key":"\#($0.element)"}"#) }
            let seen = try Self.pipeline(reader, gets)
            for (i, reply) in seen.enumerated() {
                #expect(reply["result"]?["value"]?.string == Self.value(keys[i], generation),
                        "generation \(generation): \(keys[i]) read an older value after its set was acknowledged")
            }
            let busyReplies = try (0..<others.count).map { _ in try busy.readReply() }
            #expect(busyReplies.allSatisfy { $0["result"]?["cacheType"]?.string == "disk" })
        }
    }
}

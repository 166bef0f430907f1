// The synchronous memory-answer path seen from clients: memory hits under every delivery
// policy, hits behind a queued write to their key, counters that count each read once,
// pipelined hits in order, a cancel that comes after a hit's reply, and hot lines
// answered as the same request in any other shape.

import Foundation
import HalcyonJSON
import HalcyonTestSupport
import Testing

@Suite("Memory answers end to end", .serialized, .timeLimit(.minutes(1)))
struct FastPathEndToEndTests {
    static let policies = [
        #""untouch""#, #""mainAsync""#, #""mainCurrentOrAsync""#,
        #"{"dispatch":{"concurrent":false,"qos":"default"}}"#,
        #"{"dispatch":{"concurrent":true,"qos":"utility"}}"#,
        #"{"operationQueue":{"maxConcurrentOperationCount":2}}"#,
    ]

    /// A memory hit, isCached, describe and ping answer correctly under every policy, and
    /// each get counts exactly one memory hit.
    @Test(arguments: policies)
    func memoryHitsUnderEveryPolicy(policy: String) throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("connection.configure", #"{"callbackQueue":\#(policy)}"#)
        _ = try client.result("cache.set", #"{"key":"k","value":"hello"}"#)
        let before = try client.result("cache.stats")["memory"]?["hits"]?.int64 ?? -1

        let got = try client.result("cache.get", #"{"key":"k"}"#)
        #expect(got["found"]?.bool == true)
        #expect(got["value"]?.string == "hello")
        #expect(got["cacheType"]?.string == "memory")
        let cached = try client.result("cache.isCached", #"{"key":"k"}"#)
        #expect(cached["cached"]?.bool == true)
        #expect(cached["cacheType"]?.string == "memory")
        let described = try client.result("cache.describe", #"{"key":"k"}"#)
        #expect(described["size"]?.int64 == 5)
        #expect(described["cacheType"]?.string == "memory")
        #expect(try client.result("server.ping")["pong"]?.bool == true)

        let after = try client.result("cache.stats")["memory"]?["hits"]?.int64
        #expect(after == before + 1)
    }

    /// A memory miss that the disk answers counts one memory miss and one disk hit: the
    /// synchronous path's miss is not asked again on the way to the disk.
    @Test(arguments: [#""untouch""#, #""mainAsync""#])
    func memoryMissGoesToDiskCountedOnce(policy: String) throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("connection.configure", #"{"callbackQueue":\#(policy)}"#)
        _ = try client.result("cache.set", #"{"key":"d","value":"on disk"}"#)
        _ = try client.result("cache.remove", #"{"key":"d","fromDisk":false}"#)
        let before = try client.result("cache.stats")
        let got = try client.result("cache.get", #"{"key":"d"}"#)
        #expect(got["value"]?.string == "on disk")
        #expect(got["cacheType"]?.string == "disk")
        let after = try client.result("cache.stats")
        let misses = { (s: JSONValue) in s["memory"]?["misses"]?.int64 ?? -100 }
        let diskHits = { (s: JSONValue) in s["disk"]?["hits"]?.int64 ?? -100 }
        #expect(misses(after) == misses(before) + 1)
        #expect(diskHits(after) == diskHits(before) + 1)
        // Put back: the next read is a memory hit.
        #expect(try client.result("cache.get", #"{"key":"d"}"#)["cacheType"]?.string == "memory")
    }

    /// While the ioQueue sleeps, a get of a key with a queued write waits behind it and
    /// sees the new value; a get of another key is answered from memory at once.
    @Test(arguments: [#""untouch""#, #""mainAsync""#, #"{"dispatch":{"concurrent":false,"qos":"default"}}"#])
    func hitBehindAQueuedWriteWaitsForIt(policy: String) throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("connection.configure", #"{"callbackQueue":\#(policy)}"#)
        _ = try client.result("cache.set", #"{"key":"w","value":"old"}"#)
        _ = try client.result("cache.set", #"{"key":"other","value":"free"}"#)
        try client.request("debug.sleep", #"{"seconds":0.5,"on":"ioQueue"}"#, id: 1)
        try client.request("cache.set", #"{"key":"w","value":"new"}"#, id: 2)
        try client.request("cache.get", #"{"key":"w"}"#, id: 3)
        try client.request("cache.get", #"{"key":"other"}"#, id: 4)
        var order: [Int64] = []
        var replies: [Int64: JSONValue] = [:]
        for _ in 0..<4 {
            let reply = try client.readReply()
            let id = try #require(reply["id"]?.int64)
            order.append(id)
            replies[id] = reply
        }
        #expect(order.first == 4)
        #expect(replies[4]?["result"]?["value"]?.string == "free")
        #expect(replies[3]?["result"]?["value"]?.string == "new")
        let two = try #require(order.firstIndex(of: 2))
        let three = try #require(order.firstIndex(of: 3))
        #expect(two < three)
    }

    /// Pipelined hits, sent in one write, come back in order under `untouch`, and a cancel
    /// of one of them read after its reply was written changes nothing.
    @Test func pipelinedHitsKeepOrderAndCannotBeWithdrawn() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("cache.set", #"{"key":"p","value":"v"}"#)
        var lines = ""
        for i in 0..<300 {
            lines += #"{"jsonrpc":"2.0","id":\#(i),"method":"cache.get","params":{"key":"p"}}"# + "\n"
            if i == 150 { lines += #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":150}}"# + "\n" }
        }
        try client.sendRaw(Array(lines.utf8))
        var ids: [Int64] = []
        for _ in 0..<300 {
            let reply = try client.readReply()
            ids.append(try #require(reply["id"]?.int64))
            #expect(reply["result"]?["value"]?.string == "v")
        }
        #expect(ids == (0..<300).map(Int64.init))
    }

    /// A get that must take the ordinary path (a notification) still runs: its sliding
    /// extension happens, and it gets no reply.
    @Test func notificationsTakeTheOrdinaryPath() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("cache.set", #"{"key":"n","value":"v"}"#)
        let before = try client.result("cache.stats")["memory"]?["hits"]?.int64 ?? -1
        try client.send(#"{"jsonrpc":"2.0","method":"cache.get","params":{"key":"n"}}"#)
        let pong = try client.call("server.ping")
        #expect(pong["result"]?["pong"]?.bool == true)
        let after = try client.result("cache.stats")["memory"]?["hits"]?.int64
        #expect(after == before + 1)
    }

    /// The same gets as hot lines (`HotLine`) and in shapes only the parser takes (a string
    /// id, a param at its default, an escape in the key) get the same replies but for their
    /// ids: a memory hit, a key only on disk (the hot line's miss goes on to the disk), a key
    /// nowhere, and keys the params refuse. Each read counts once in the tiers' counters.
    @Test func hotLinesAnswerAsTheirRequests() throws {
        let daemon = try DaemonProcess(arguments: ["--memory-limit", "1MiB"])
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("cache.set", #"{"key":"m","value":"in memory"}"#)
        _ = try client.result("cache.set", #"{"key":"d","value":"on disk"}"#)
        _ = try client.result("cache.remove", #"{"key":"d","fromDisk":false}"#)
        let long = String(repeating: "k", count: 4097)
        for key in ["m", "d", "nowhere", "", long] {
            let hot = #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"\#(key)"}}"#
            let escaped = key.isEmpty ? key : "\\u00" + String(key.utf8.first!, radix: 16) + key.dropFirst()
            let others = [
                #"{"jsonrpc":"2.0","id":"1","method":"cache.get","params":{"key":"\#(key)"}}"#,
                #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"\#(key)","fromMemoryOnly":false}}"#,
                #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"\#(escaped)"}}"#,
            ]
            for line in [hot] + others {
                // A disk hit goes back to memory: take the key off it again, so that every
                // shape reads it from the same tier.
                if key == "d" { _ = try client.result("cache.remove", #"{"key":"d","fromDisk":false}"#) }
                let before = try client.result("cache.stats")
                try client.send(line)
                let reply = try client.readReply()
                let after = try client.result("cache.stats")
                let reads = { (stats: JSONValue) -> Int64 in
                    ["hits", "misses"].reduce(0) { $0 + (stats["memory"]?[$1]?.int64 ?? 0) }
                }
                #expect(reads(after) - reads(before) == (key.isEmpty || key == long ? 0 : 1), "\(line)")
                #expect(summary(of: reply) == summary(of: try hotReply(for: key, client: client)), "\(line)")
            }
        }
    }

    /// A set as a hot line and in shapes only the parser takes (a string id, a param at its
    /// default, an escape in the value) stores the same entry: the same reply but for its id,
    /// version and lifetime, and the same description of what was stored.
    @Test func hotSetsStoreAsTheirRequests() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let shapes = [
            #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"s","value":"v w"}}"#,
            #"{"jsonrpc":"2.0","id":"1","method":"cache.set","params":{"key":"s","value":"v w"}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"s","value":"v w","toDisk":true}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"s","value":"v\u0020w"}}"#,
        ]
        var seen: [[String]] = []
        for line in shapes {
            try client.send(line)
            let stored = try client.readReply()["result"]
            let described = try client.result("cache.describe", #"{"key":"s"}"#)
            let value = try client.result("cache.get", #"{"key":"s","fromMemoryOnly":false}"#)
            seen.append([
                stored?["stored"]?.bool.map { "stored \($0)" } ?? "-", stored?["size"]?.int64.map { "\($0)" } ?? "-",
                stored?["expiresAt"]?.kind == .null ? "never" : "expires",
                described["size"]?.int64.map { "\($0)" } ?? "-", described["encoding"]?.string ?? "-",
                described["cacheType"]?.string ?? "-", value["value"]?.string ?? "-",
            ])
        }
        #expect(seen.allSatisfy { $0 == seen[0] }, "\(seen)")
        #expect(seen[0][0] == "stored true")
        #expect(seen[0][6] == "v w")
    }

    /// What a get's reply says, but for its id and its lifetime (which moves with each read).
    private func summary(of reply: JSONValue) -> [String] {
        let result = reply["result"]
        let error = reply["error"]
        return [
            result?["found"]?.bool.map { "found \($0)" } ?? "-", result?["value"]?.string ?? "-",
            result?["encoding"]?.string ?? "-", result?["cacheType"]?.string ?? "-",
            result?["version"]?.int64.map { "\($0)" } ?? "-",
            error?["code"]?.int64.map { "\($0)" } ?? "-", error?["data"]?["reason"]?.string ?? "-",
        ]
    }

    /// The reply a hot line of `key` gets now (the reference the other shapes must match).
    private func hotReply(for key: String, client: TestClient) throws -> JSONValue {
        if key == "d" { _ = try client.result("cache.remove", #"{"key":"d","fromDisk":false}"#) }
        try client.send(#"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"\#(key)"}}"#)
        return try client.readReply()
    }
}

// Client tracking against real servers: an invalidation after a write from redis-cli (and
// how long it took), the lost-connection flush after CLIENT KILL, FLUSHALL, and
// invalidations from every node of a cluster.

import Foundation
import HalcyonUpstream
import NIOCore
import Testing

@Suite(.serialized, .timeLimit(.minutes(2)))
struct TrackingTests {
    func startClient(_ seeds: [NodeAddress], events: EventLog<RedisClient.Event>) async throws -> RedisClient {
        let client = RedisClient(configuration: .init(seeds: seeds), eventLoop: testGroup.next()) { events.append($0) }
        try await client.start().get()
        return client
    }

    static func invalidates(_ key: String) -> (RedisClient.Event) -> Bool {
        { event in
            if case .invalidated(let keys, _) = event { return keys.contains(ByteBuffer(string: key)) }
            return false
        }
    }

    @Test func aWriteFromRedisCLIInvalidatesARead() async throws {
        let events = EventLog<RedisClient.Event>()
        let server = SharedServers.standalone
        let client = try await startClient([server.address], events: events)
        defer { _ = client.shutdown() }
        let key = "tracked:\(UUID().uuidString)"
        try server.cli("SET", key, "one")
        let (value, readSequence) = try await client.sendSequenced(["GET", key].map { ByteBuffer(string: $0) }, route: .key(ByteBuffer(string: key))).get()
        #expect(value.string == "one")
        #expect(events.all.isEmpty)
        let written = Date()
        try server.cli("SET", key, "two")
        let event = events.wait(timeout: 5, for: Self.invalidates(key))
        let delay = Date().timeIntervalSince(written)
        #expect(event != nil)
        #expect((event?.sequence ?? 0) > readSequence)
        // Measured, not asserted: the delay includes redis-cli's own start-up.
        print("invalidation after a redis-cli SET: heard \(String(format: "%.1f", delay * 1000)) ms after starting redis-cli")
        // How long a host takes to hear of another client's write: from the moment a
        // write is sent on another connection to the push's arrival. Measured, not asserted.
        let writer = try await RedisConnection.connect(to: server.address, on: testGroup.next(), options: .init()).get()
        defer { writer.close() }
        var delays: [Double] = []
        for round in 0..<50 {
            let timedKey = "\(key):timed:\(round)"
            _ = try await client.send(["GET", timedKey], key: timedKey).get()
            let sent = DispatchTime.now()
            _ = try await writer.send(["SET", timedKey, "v"]).get()
            #expect(events.wait(timeout: 5, for: Self.invalidates(timedKey)) != nil)
            delays.append(Double(DispatchTime.now().uptimeNanoseconds - sent.uptimeNanoseconds) / 1e6)
        }
        delays.sort()
        print("invalidation delay over 50 writes (write sent to push received, upper bound): median \(String(format: "%.3f", delays[25])) ms, max \(String(format: "%.3f", delays[49])) ms")
        // Not read again: a second write sends nothing (default tracking mode, one per read).
        try server.cli("SET", key, "three")
        try server.cli("SET", "other:\(UUID().uuidString)", "x")
        _ = try await client.send(["PING"].map { ByteBuffer(string: $0) }, route: .key(ByteBuffer(string: key))).get()
        #expect(events.all.filter(Self.invalidates(key)).count == 1)
    }

    @Test func clientKillOfTheTrackingConnectionFlushesAndReconnects() async throws {
        let events = EventLog<RedisClient.Event>()
        let server = SharedServers.standalone
        let client = try await startClient([server.address], events: events)
        defer { _ = client.shutdown() }
        let key = "killed:\(UUID().uuidString)"
        let id = try await client.send(["CLIENT", "ID"], key: key).get()
        _ = try await client.send(["GET", key], key: key).get()
        try server.cli("CLIENT", "KILL", "ID", String(id.int64 ?? -1))
        let flushed = events.wait(timeout: 5) { event in
            if case .flushed(.connectionLost, _) = event { return true }
            return false
        }
        #expect(flushed != nil)
        // The connection comes back by itself, with tracking on again: a new read is
        // tracked and invalidated.
        let deadline = Date().addingTimeInterval(10)
        var connected = false
        while Date() < deadline, !connected {
            connected = try await client.connectedNodes().get().contains(server.address)
            if !connected { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(connected)
        #expect(try await client.stats().get().reconnects >= 1)
        _ = try await client.send(["GET", key], key: key).get()
        try server.cli("SET", key, "x")
        #expect(events.wait(timeout: 5, for: Self.invalidates(key)) != nil)
    }

    @Test func flushAllFlushes() async throws {
        let events = EventLog<RedisClient.Event>()
        let server = try RedisServer()
        defer { server.remove() }
        let client = try await startClient([server.address], events: events)
        defer { _ = client.shutdown() }
        _ = try await client.send(["GET", "k"], key: "k").get()
        try server.cli("FLUSHALL")
        let flushed = events.wait(timeout: 5) { event in
            if case .flushed(.serverFlushed, _) = event { return true }
            return false
        }
        #expect(flushed != nil)
    }

    @Test func everyClusterNodeSendsItsInvalidations() async throws {
        let events = EventLog<RedisClient.Event>()
        let cluster = SharedServers.cluster
        let client = try await startClient(cluster.seeds, events: events)
        defer { _ = client.shutdown() }
        // One key per node.
        var keys: [Int: String] = [:]
        var index = 0
        while keys.count < 3 {
            let key = "node-key:\(index):\(UUID().uuidString.prefix(4))"
            keys[try cluster.node(serving: key).port] = key
            index += 1
        }
        for key in keys.values { _ = try await client.send(["GET", key], key: key).get() }
        for (port, key) in keys { try redisCLI(["-p", String(port), "SET", key, "v"]) }
        for key in keys.values { #expect(events.wait(timeout: 5, for: Self.invalidates(key)) != nil, "\(key)") }
    }
}

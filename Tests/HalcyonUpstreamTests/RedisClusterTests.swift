// The client against a real 3-primary cluster made with `redis-cli --cluster create`:
// topology discovery, slots as the server computes them, MOVED after a migration, ASK
// during one, and a killed and restarted node recovered by the same client.

import Foundation
import HalcyonUpstream
import NIOCore
import Testing

@Suite(.serialized, .timeLimit(.minutes(3)))
struct RedisClusterTests {
    func startClient(_ seeds: [NodeAddress], events: EventLog<RedisClient.Event>? = nil) async throws -> RedisClient {
        var configuration = RedisClient.Configuration(seeds: seeds)
        configuration.connection.commandTimeout = .seconds(3)
        let client = RedisClient(configuration: configuration, eventLoop: testGroup.next()) { events?.append($0) }
        try await client.start().get()
        return client
    }

    @Test func standaloneIsRecognised() async throws {
        let client = try await startClient([SharedServers.standalone.address])
        defer { _ = client.shutdown() }
        #expect(try await client.topology().get() == .standalone(SharedServers.standalone.address))
    }

    @Test func clusterIsRecognisedAndSlotsMatchTheServer() async throws {
        let cluster = SharedServers.cluster
        let client = try await startClient([cluster.seeds[1]])
        defer { _ = client.shutdown() }
        guard case .cluster(let map) = try await client.topology().get() else {
            Issue.record("not seen as a cluster")
            return
        }
        #expect(Set(map.primaries) == Set(cluster.seeds))
        var generator = SystemRandomNumberGenerator()
        let keys = (0..<100).map { index -> String in
            let body = String((0..<Int.random(in: 1...12, using: &generator)).map { _ in "ab{}:xyz01é".randomElement()! })
            return index % 3 == 0 ? "{\(body)}tail" : body
        }
        for key in keys {
            let reply = try await client.send(["CLUSTER", "KEYSLOT", key], key: key).get()
            #expect(reply.int64 == Int64(ClusterSlot(key: key).value), "\(key)")
        }
        // Commands land where their slot lives: no redirect was needed.
        for key in keys.prefix(30) {
            _ = try await client.send(["SET", key, "v"], key: key).get()
        }
        let stats = try await client.stats().get()
        #expect(stats.moved == 0)
        #expect(stats.commands == 130 && stats.failedCommands == 0)
        #expect(stats.maxRoundTripNanoseconds > 0 && stats.roundTripNanoseconds >= stats.maxRoundTripNanoseconds)
    }

    /// Moves `slot` (and the keys in it) from `source` to `target`, one step at a time,
    /// running `during` while the slot is half-migrated (after `migrateFirst` moved).
    func migrate(
        slot: Int, from source: RedisServer, to target: RedisServer, in cluster: RedisCluster,
        migrateFirst: [String], during: () async throws -> Void
    ) async throws {
        let sourceID = try cluster.id(of: source), targetID = try cluster.id(of: target)
        try target.cli("CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceID)
        try source.cli("CLUSTER", "SETSLOT", String(slot), "MIGRATING", targetID)
        if !migrateFirst.isEmpty {
            try redisCLI(["-p", String(source.port), "MIGRATE", "127.0.0.1", String(target.port), "", "0", "5000", "KEYS"] + migrateFirst)
        }
        try await during()
        let rest = try source.cli("CLUSTER", "GETKEYSINSLOT", String(slot), "1000").split(separator: "\n").map(String.init)
        if !rest.isEmpty {
            try redisCLI(["-p", String(source.port), "MIGRATE", "127.0.0.1", String(target.port), "", "0", "5000", "KEYS"] + rest)
        }
        for node in cluster.nodes { try node.cli("CLUSTER", "SETSLOT", String(slot), "NODE", targetID) }
    }

    @Test func askDuringAMigrationAndMovedAfterIt() async throws {
        let cluster = SharedServers.cluster
        let client = try await startClient(cluster.seeds)
        defer { _ = client.shutdown() }
        let tag = "mig\(UInt32.random(in: 0...UInt32.max))"
        let moved = "{\(tag)}moved", stays = "{\(tag)}stays"
        _ = try await client.send(["SET", moved, "one"], key: moved).get()
        _ = try await client.send(["SET", stays, "two"], key: stays).get()
        let source = try cluster.node(serving: moved)
        let target = cluster.nodes.first { $0.port != source.port }!
        let slot = ClusterSlot(key: moved).value
        try await migrate(slot: slot, from: source, to: target, in: cluster, migrateFirst: [moved]) { () async throws in
            // `moved` now lives on the target, the slot still on the source: ASK.
            #expect(try await client.send(["GET", moved], key: moved).get().string == "one")
            #expect(try await client.send(["GET", stays], key: stays).get().string == "two")
            #expect(try await client.stats().get().asks >= 1)
        }
        // The slot belongs to the target now; the client's map still says source: MOVED.
        #expect(try await client.send(["GET", stays], key: stays).get().string == "two")
        let stats = try await client.stats().get()
        #expect(stats.moved >= 1)
        // The refreshed map routes straight to the target from now on.
        try await client.refresh().get()
        let before = try await client.stats().get().moved
        #expect(try await client.send(["GET", moved], key: moved).get().string == "one")
        #expect(try await client.stats().get().moved == before)
        guard case .cluster(let map) = try await client.topology().get() else { Issue.record("topology"); return }
        #expect(map.primary(for: ClusterSlot(slot)) == target.address)
    }

    @Test func redirectsAreBounded() async throws {
        let cluster = SharedServers.cluster
        var configuration = RedisClient.Configuration(seeds: cluster.seeds)
        configuration.maxRedirects = 0
        let client = RedisClient(configuration: configuration, eventLoop: testGroup.next())
        defer { _ = client.shutdown() }
        try await client.start().get()
        // A key sent explicitly to a node that does not serve it gets MOVED, and with no
        // redirects allowed that is an error, not a loop.
        let key = "bounded"
        let owner = try cluster.node(serving: key)
        let other = cluster.nodes.first { $0.port != owner.port }!
        await #expect(throws: RedisError.self) {
            try await client.send(["GET", key].map { ByteBuffer(string: $0) }, route: .node(other.address)).get()
        }
    }

    @Test func aKilledNodeIsRecoveredWithoutRestartingTheClient() async throws {
        let cluster = try RedisCluster()
        defer { cluster.remove() }
        let events = EventLog<RedisClient.Event>()
        let client = try await startClient(cluster.seeds, events: events)
        defer { _ = client.shutdown() }
        let key = "restart:\(UUID().uuidString)"
        _ = try await client.send(["SET", key, "before"], key: key).get()
        #expect(try await client.send(["GET", key], key: key).get().string == "before")
        let victim = try cluster.node(serving: key)
        victim.kill()
        // The lost connection is announced (every copy tracked there must go).
        let lost = events.wait(timeout: 10) {
            if case .flushed(.connectionLost(victim.address), _) = $0 { return true }
            return false
        }
        #expect(lost != nil)
        do {
            _ = try await client.send(["GET", key], key: key).get()
            Issue.record("a read from a dead node succeeded")
        } catch let error as RedisError {
            #expect(error.isUnavailable, "\(error)")
        }
        try victim.start()
        try cluster.waitUntilOK()
        // The client reconnects on its own; no data was persisted, so the key is gone.
        let deadline = Date().addingTimeInterval(20)
        var recovered = false
        while Date() < deadline, !recovered {
            if let reply = try? await client.send(["SET", key, "after"], key: key).get(), reply.string == "OK" {
                recovered = true
            } else {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(recovered)
        #expect(try await client.send(["GET", key], key: key).get().string == "after")
        #expect(try await client.stats().get().reconnects >= 1)
    }
}

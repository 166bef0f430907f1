// The client when a server fails under it, against real redis-server processes: a stopped
// server (SIGSTOP) noticed by the heartbeat, a killed and restarted one, and a password
// changed under a running client. Each outage is announced once with its cause, and
// once more when it ends.

import Foundation
import HalcyonCache
import HalcyonUpstream
import HalcyonUpstreamTier
import NIOCore
import Testing

@Suite(.serialized, .timeLimit(.minutes(2)))
struct OutageTests {
    /// A started client on `server` with its tracking events and node changes recorded.
    func startClient(
        _ server: RedisServer, password: String? = nil
    ) async throws -> (RedisClient, EventLog<RedisClient.Event>, EventLog<RedisClient.NodeChange>) {
        let events = EventLog<RedisClient.Event>(), changes = EventLog<RedisClient.NodeChange>()
        var configuration = RedisClient.Configuration(seeds: [server.address])
        configuration.connection.password = password
        let client = RedisClient(configuration: configuration, eventLoop: testGroup.next(),
                                 onEvent: { events.append($0) }, onNodeChange: { changes.append($0) })
        try await client.start().get()
        return (client, events, changes)
    }

    static func isLost(_ change: RedisClient.NodeChange) -> Bool {
        if case .lost = change { return true }
        return false
    }

    static func isBack(_ change: RedisClient.NodeChange) -> Bool {
        if case .back = change { return true }
        return false
    }

    @Test func aStoppedServerIsDeclaredDeadWithinTheLivenessBound() async throws {
        let server = try RedisServer()
        defer { server.remove() }
        let (client, events, changes) = try await startClient(server)
        defer { _ = client.shutdown() }
        _ = try await client.send(["SET", "k", "v"], key: "k").get()
        let bound = client.configuration.connection.livenessBound
        #expect(bound == .seconds(1))
        server.pause()
        let stoppedAt = Date()
        // An idle connection: only the heartbeat can notice.
        let lost = events.wait(timeout: 5) {
            if case .flushed(.connectionLost, _) = $0 { return true }
            return false
        }
        let noticed = Date().timeIntervalSince(stoppedAt)
        server.resume()
        #expect(lost != nil, "a stopped server was never noticed")
        #expect(noticed <= 1.5, "noticed after \(noticed) s")
        #expect(changes.wait(timeout: 2, for: Self.isLost) == .lost(server.address, cause: .heartbeatMissed,
                                                                   detail: "\(RedisError.heartbeatMissed(node: server.address.description))"))
        #expect(changes.wait(timeout: 5, for: Self.isBack) != nil)
        #expect(changes.all.filter(Self.isLost).count == 1)
        #expect(try await client.stats().get().heartbeatsMissed == 1)
        #expect(try await client.send(["GET", "k"], key: "k").get().string == "v")
    }

    @Test func aKilledServerIsOneLossUntilItIsBack() async throws {
        let server = try RedisServer()
        defer { server.remove() }
        let (client, _, changes) = try await startClient(server)
        defer { _ = client.shutdown() }
        server.kill()
        let lost = changes.wait(timeout: 3, for: Self.isLost)
        guard case .lost(_, let cause, _)? = lost else {
            Issue.record("no loss announced")
            return
        }
        #expect(cause == .refused)
        // Reconnects are refused again and again meanwhile: no more announcements.
        try await Task.sleep(for: .milliseconds(1200))
        #expect(changes.all.count == 1)
        let health = try await client.health().get()
        #expect(health.first?.reachable == false && health.first?.cause == .refused)
        do {
            _ = try await client.send(["GET", "k"], key: "k").get()
            Issue.record("a command to a dead server succeeded")
        } catch let error as RedisError {
            #expect(error.failureCause == .refused, "\(error)")
        }
        try server.start()
        guard case .back(_, let outage, let attempts)? = changes.wait(timeout: 3, for: Self.isBack) else {
            Issue.record("no recovery announced")
            return
        }
        #expect(outage >= .milliseconds(1200) && attempts >= 2)
        #expect(changes.all.count == 2)
        #expect(try await client.health().get().first?.reachable == true)
    }

    /// A killed server's listener may still complete a connect while the process goes, and
    /// the connection then closes at once: that reconnect names no cause, and the loss
    /// waits for the next one, which is refused. (A listener of the test's own stands in
    /// for the dying one, so the order is the same on every run.)
    @Test func aReconnectClosedAsTheServerGoesWaitsForTheCause() async throws {
        let server = try RedisServer()
        defer { server.remove() }
        let changes = EventLog<RedisClient.NodeChange>()
        var configuration = RedisClient.Configuration(seeds: [server.address])
        // Room to bind the port before the first reconnect.
        configuration.reconnectBackoff = .milliseconds(300)
        let client = RedisClient(configuration: configuration, eventLoop: testGroup.next(),
                                 onNodeChange: { changes.append($0) })
        try await client.start().get()
        defer { _ = client.shutdown() }
        server.kill()
        let listener = try ClosingListener(port: server.port)
        guard case .lost(_, let cause, _)? = changes.wait(timeout: 5, for: Self.isLost) else {
            Issue.record("no loss announced")
            return
        }
        listener.waitUntilClosed()
        #expect(listener.accepted == 1, "the first reconnect did not reach the closing listener")
        #expect(cause == .refused)
        #expect(changes.all.filter(Self.isLost).count == 1)
    }

    @Test func aChangedPasswordIsNamedAsTheCause() async throws {
        let server = try RedisServer(arguments: ["--requirepass", "first"])
        defer { server.remove() }
        let (client, _, changes) = try await startClient(server, password: "first")
        defer { _ = client.shutdown() }
        _ = try await client.send(["SET", "k", "v"], key: "k").get()
        _ = try server.cli("-a", "first", "--no-auth-warning", "CONFIG", "SET", "requirepass", "second")
        _ = try server.cli("-a", "second", "--no-auth-warning", "CLIENT", "KILL", "TYPE", "normal")
        guard case .lost(_, let cause, _)? = changes.wait(timeout: 3, for: Self.isLost) else {
            Issue.record("no loss announced")
            return
        }
        #expect(cause == .wrongPassword)
        do {
            _ = try await client.send(["GET", "k"], key: "k").get()
            Issue.record("a command succeeded with a refused password")
        } catch let error as RedisError {
            #expect(error.failureCause == .wrongPassword, "\(error)")
            #expect(error.failureCause?.isAuthentication == true)
        }
        _ = try server.cli("-a", "second", "--no-auth-warning", "CONFIG", "SET", "requirepass", "first")
        #expect(changes.wait(timeout: 3, for: Self.isBack) != nil)
        #expect(changes.all.filter(Self.isLost).count == 1)
    }

    @Test func aMissingPasswordIsNoAuth() async throws {
        let server = try RedisServer(arguments: ["--requirepass", "secret"])
        defer { server.remove() }
        let changes = EventLog<RedisClient.NodeChange>()
        let client = RedisClient(configuration: .init(seeds: [server.address]), eventLoop: testGroup.next(),
                                 onNodeChange: { changes.append($0) })
        defer { _ = client.shutdown() }
        await #expect(throws: RedisError.self) { try await client.start().get() }
        guard case .lost(_, let cause, _)? = changes.wait(timeout: 3, for: Self.isLost) else {
            Issue.record("no loss announced")
            return
        }
        #expect(cause == .noAuth && cause.isAuthentication)
    }

    @Test func aScriptTheServerLostIsAReloadNotAFailure() async throws {
        let server = try RedisServer()
        defer { server.remove() }
        let tier = RedisTier(configuration: .init(seeds: [server.address]), eventLoop: testGroup.next())
        try await tier.start().get()
        defer { _ = tier.shutdown() }
        let entry = CacheEntry(bytes: Array("v".utf8), flags: 0, version: 0)
        _ = await tier.set("k", entry)
        try server.cli("SCRIPT", "FLUSH")
        let before = try await tier.client.stats().get()
        guard case .success = await tier.set("k", entry) else {
            Issue.record("the write after SCRIPT FLUSH failed")
            return
        }
        let after = try await tier.client.stats().get()
        #expect(after.scriptReloads == before.scriptReloads + 1)
        #expect(after.failedCommands == before.failedCommands)
    }
}

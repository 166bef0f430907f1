// One connection against a real redis-server: the greeting, every RESP3 type as the server
// itself sends it, pipelining order, and AUTH with a password and with an ACL user.

import Foundation
import HalcyonUpstream
import NIOCore
import Testing

@Suite(.timeLimit(.minutes(2)))
struct RedisConnectionTests {
    func connect(_ server: RedisServer, _ options: RedisConnection.Options = .init()) async throws -> RedisConnection {
        try await RedisConnection.connect(to: server.address, on: testGroup.next(), options: options).get()
    }

    @Test func helloSwitchesToRESP3() async throws {
        let connection = try await connect(SharedServers.standalone)
        defer { connection.close() }
        #expect(connection.hello[field: "proto"]?.int64 == 3)
        #expect(connection.hello[field: "mode"]?.string == "standalone")
        #expect(try await connection.send(["CLIENT", "GETNAME"]).get().string == "halcyon")
    }

    @Test func theServerSendsEveryType() async throws {
        let connection = try await connect(SharedServers.standalone)
        defer { connection.close() }
        func debug(_ type: String) async throws -> RESP3Value {
            try await connection.send(["DEBUG", "PROTOCOL", type]).get()
        }
        #expect(try await debug("string").string == "Hello World")
        #expect(try await debug("integer") == .integer(12345))
        #expect(try await debug("double") == .double(3.141))
        #expect(try await debug("bignum") == .bigNumber("1234567999999999999999999999999999999"))
        #expect(try await debug("null") == .null)
        #expect(try await debug("true") == .boolean(true))
        #expect(try await debug("false") == .boolean(false))
        #expect(try await debug("array") == .array([.integer(0), .integer(1), .integer(2)]))
        #expect(try await debug("set") == .set([.integer(0), .integer(1), .integer(2)]))
        guard case .map(let pairs) = try await debug("map") else { Issue.record("map"); return }
        #expect(pairs.count == 3 && pairs[0].key == .integer(0))
        guard case .attributed(let attributes, let value) = try await debug("attrib") else { Issue.record("attrib"); return }
        #expect(attributes.first?.key.string == "key-popularity" && value.string == "Some real reply following the attribute")
        guard case .verbatimString(let format, let text) = try await debug("verbatim") else { Issue.record("verbatim"); return }
        #expect(format == "txt" && String(buffer: text) == "This is a verbatim\nstring")
        // The push comes before the reply it is attached to.
        #expect(try await debug("push").string == "Some real reply following the push reply")
        let error = try await connection.send(["NOSUCHCOMMAND"]).get()
        #expect(error.errorText?.hasPrefix("ERR") == true)
    }

    @Test func pushesReachTheSinkAndNotTheQueue() async throws {
        let pushes = EventLog<RESP3Value>()
        let connection = try await RedisConnection.connect(
            to: SharedServers.standalone.address, on: testGroup.next(), options: .init(), onPush: { pushes.append($0) }
        ).get()
        defer { connection.close() }
        #expect(try await connection.send(["DEBUG", "PROTOCOL", "push"]).get().string == "Some real reply following the push reply")
        #expect(pushes.all.count == 1)
        #expect(pushes.all.first?.array?.first?.string == "server-cpu-usage")
    }

    @Test func pipelinedRepliesKeepCommandOrder() async throws {
        let connection = try await connect(SharedServers.standalone)
        defer { connection.close() }
        let key = "pipeline:\(UUID().uuidString)"
        let commands: [[ByteBuffer]] = (0..<2000).map { index in
            index % 2 == 0 ? ["INCR", key].map { ByteBuffer(string: $0) } : ["GET", key].map { ByteBuffer(string: $0) }
        }
        let replies = try await EventLoopFuture.whenAllSucceed(connection.pipeline(commands), on: connection.eventLoop).get()
        for (index, reply) in replies.enumerated() {
            let expected = Int64(index / 2 + 1)
            #expect(reply.int64 == expected, "reply \(index)")
        }
        // Many single sends from several tasks: each task's own commands stay in order.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<4 {
                group.addTask { () async throws in
                    let futures = (0..<200).map { connection.send(["RPUSH", "\(key):\(task)", String($0)]) }
                    for (index, future) in futures.enumerated() {
                        let reply = try await future.get()
                        #expect(reply == .integer(Int64(index + 1)))
                    }
                }
            }
            try await group.waitForAll()
        }
        let listed = try await connection.send(["LRANGE", "\(key):2", "0", "-1"]).get().array?.compactMap(\.string)
        #expect(listed == (0..<200).map(String.init))
    }

    @Test func authWithPasswordAndACLUser() async throws {
        let server = try RedisServer(arguments: ["--requirepass", "s3cret", "--user", "alice", "on", ">wonderland", "~*", "&*", "+@all"])
        defer { server.remove() }
        var options = RedisConnection.Options()
        // No password: refused at HELLO.
        await #expect(throws: RedisError.self) { try await connect(server, options) }
        options.password = "wrong"
        do {
            _ = try await connect(server, options)
            Issue.record("a wrong password was accepted")
        } catch let error as RedisError {
            guard case .handshake(let text) = error else { Issue.record("\(error)"); return }
            #expect(!text.contains("wrong"), "the password leaked into the error")
        }
        options.password = "s3cret"
        let asDefault = try await connect(server, options)
        #expect(try await asDefault.send(["ACL", "WHOAMI"]).get().string == "default")
        asDefault.close()
        options.username = "alice"
        options.password = "wonderland"
        let asAlice = try await connect(server, options)
        #expect(try await asAlice.send(["ACL", "WHOAMI"]).get().string == "alice")
        asAlice.close()
        #expect(!options.description.contains("wonderland"))
    }

    @Test func connectingToNothingIsUnavailable() async throws {
        let port = freePort()
        await #expect(throws: RedisError.self) {
            try await RedisConnection.connect(to: .tcp(host: "127.0.0.1", port: port), on: testGroup.next(), options: .init()).get()
        }
    }
}

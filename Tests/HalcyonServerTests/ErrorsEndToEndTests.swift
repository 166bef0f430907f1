// Bad input gets a precise JSON-RPC error with a stable data.reason, and the connection
// carries on.

import Foundation
import HalcyonJSON
import Testing

@Suite("Errors end to end", .serialized, .timeLimit(.minutes(1)))
struct ErrorsEndToEndTests {
    private func expectError(
        _ reply: JSONValue, code: Int64, reason: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(reply["error"]?["code"]?.int64 == code, "\(reply.serializedText)", sourceLocation: sourceLocation)
        if let reason {
            #expect(reply["error"]?["data"]?["reason"]?.string == reason, "\(reply.serializedText)",
                    sourceLocation: sourceLocation)
        }
        #expect(reply["error"]?["message"]?.string?.isEmpty == false, sourceLocation: sourceLocation)
    }

    @Test func envelopeErrors() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()

        try client.send("{not json")
        let parse = try client.readReply()
        expectError(parse, code: -32700)
        #expect(parse["id"]?.isNull == true)

        try client.send("42")
        expectError(try client.readReply(), code: -32600)
        try client.send("[]")
        expectError(try client.readReply(), code: -32600)
        try client.send(#"{"jsonrpc":"1.0","id":1,"method":"server.ping"}"#)
        expectError(try client.readReply(), code: -32600)
        try client.send(#"{"jsonrpc":"2.0","id":2,"method":"no.such"}"#)
        expectError(try client.readReply(), code: -32601)
        try client.send(#"{"jsonrpc":"2.0","id":3,"method":"cache.get","params":["k"]}"#)
        let positional = try client.readReply()
        expectError(positional, code: -32602)
        #expect(positional["id"]?.int64 == 3)
        try client.send(#"{"jsonrpc":"2.0","id":4,"method":"$/unknown"}"#)
        expectError(try client.readReply(), code: -32601)
        // An unknown $/ notification is ignored, and so is a notification with positional
        // params (notifications never get a reply): the next reply is the ping's.
        try client.send(#"{"jsonrpc":"2.0","method":"$/unknown"}"#)
        try client.send(#"{"jsonrpc":"2.0","method":"cache.get","params":["k"]}"#)
        #expect(try client.result("server.ping")["pong"]?.bool == true)
    }

    /// Hostile lines get the spec's errors and the connection (and daemon) carry on.
    @Test func hostileJSONNeverCrashes() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let hostile: [(bytes: [UInt8], reason: String)] = [
            (Array(#"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":""#.utf8) + [0xC3, 0x28] + Array(#""}}"#.utf8), "invalidUTF8"),
            (Array(repeating: UInt8(ascii: "["), count: 100_000), "nestingTooDeep"),
            (Array(#"{"jsonrpc":"2.0","id":99999999999999999999999,"method":"server.ping"}"#.utf8), "numberOutOfRange"),
            (Array(#"{"jsonrpc":"2.0","id":1,"id":2,"method":"server.ping"}"#.utf8), "duplicateKey"),
            (Array(#"{"jsonrpc":"2.0","id":1,"method":"server.ping"}"#.utf8) + [0] + Array("junk".utf8), "invalidJSON"),
        ]
        for (bytes, reason) in hostile {
            try client.sendRaw(bytes + [0x0A])
            expectError(try client.readReply(), code: -32700, reason: reason)
        }
        #expect(try client.result("server.ping")["pong"]?.bool == true)
        #expect(try daemon.client().result("server.ping")["pong"]?.bool == true)
    }

    @Test func paramsErrors() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        expectError(try client.call("cache.get", "{}"), code: -32602, reason: "missingParam")
        expectError(try client.call("cache.get", #"{"key":""}"#), code: -32602)
        let long = String(repeating: "k", count: 4097)
        expectError(try client.call("cache.get", #"{"key":"\#(long)"}"#), code: -32602, reason: "keyTooLong")
        expectError(try client.call("cache.set", #"{"key":"k","value":"x","expiration":{"days":1.5}}"#),
                    code: -32602, reason: "invalidExpiration")
        expectError(try client.call("cache.set", #"{"key":"k","value":"%%%","encoding":"base64"}"#),
                    code: -32602, reason: "invalidBase64")
        expectError(try client.call("cache.set", #"{"key":"k","value":"x","encoding":"utf16"}"#),
                    code: -32602, reason: "invalidEncoding")
        expectError(try client.call("cache.set", #"{"key":"k","value":"x","expiraton":"never"}"#),
                    code: -32602, reason: "unknownParam")
        expectError(try client.call("connection.configure", #"{"callbackQueue":"sideways"}"#),
                    code: -32602, reason: "invalidCallbackQueue")
        let ok = try client.result("cache.set", #"{"key":"k","value":"x"}"#)
        #expect(ok["stored"]?.bool == true)
    }

    @Test func lineTooLongKeepsTheConnection() throws {
        let daemon = try DaemonProcess(arguments: ["--max-line-bytes", "1KiB"])
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let big = String(repeating: "x", count: 5000)
        try client.send(#"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"k","value":"\#(big)"}}"#)
        let reply = try client.readReply()
        expectError(reply, code: -32600, reason: "lineTooLong")
        #expect(reply["id"]?.isNull == true)
        #expect(try client.result("server.ping")["pong"]?.bool == true)
        #expect(try client.result("cache.stats")["lineTooLongRefusals"]?.int64 == 1)
    }

    @Test func batchesAndNotifications() throws {
        let daemon = try DaemonProcess(arguments: ["--max-batch", "3"])
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        try client.send(
            #"[{"jsonrpc":"2.0","id":"a","method":"cache.set","params":{"key":"k","value":"v"}},"#
                + #"{"jsonrpc":"2.0","method":"cache.set","params":{"key":"n","value":"w"}},"#
                + #"7]"#
        )
        let batch = try client.readReply()
        let items = try #require(batch.array)
        #expect(items.count == 2)
        #expect(items.contains { $0["id"]?.string == "a" && $0["result"]?["stored"]?.bool == true })
        #expect(items.contains { $0["error"]?["code"]?.int64 == -32600 })
        // The notification ran, though it got no reply.
        #expect(try client.result("cache.get", #"{"key":"n"}"#)["value"]?.string == "w")

        try client.send(#"[{"jsonrpc":"2.0","method":"server.ping"}]"#)
        try client.send(#"[1,2,3,4]"#)
        let tooLarge = try client.readReply()
        expectError(tooLarge, code: -32600, reason: "batchTooLarge")
    }

    @Test func anUnusableCacheFolderStopsTheStartNamingPathAndErrno() throws {
        let root = URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        // A plain file where the cache folder should be: a daemon that served from it
        // would fail every disk request, so it does not start.
        let blocker = root.appendingPathComponent("blocked")
        try Data("x".utf8).write(to: blocker)
        let daemon = try DaemonProcess(arguments: ["--cache-dir", blocker.path], root: root, waitUntilReady: false)
        defer { daemon.cleanUp() }
        try #require(daemon.waitForExit())
        #expect(daemon.process.terminationStatus == 1)
        let text = daemon.stderrText()
        #expect(text.contains(blocker.appendingPathComponent("default").path) && text.contains("ENOTDIR"), "\(text)")
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
    }

    @Test func debugMethodsNeedTheFlag() throws {
        let daemon = try DaemonProcess(debugMethods: false)
        defer { daemon.cleanUp() }
        expectError(try daemon.client().call("debug.sleep", #"{"seconds":0}"#), code: -32601,
                    reason: "debugMethodsDisabled")
    }
}

extension JSONValue {
    /// The value as compact JSON text, for failure messages.
    var serializedText: String { String(decoding: serializedCompact(), as: UTF8.self) }
}

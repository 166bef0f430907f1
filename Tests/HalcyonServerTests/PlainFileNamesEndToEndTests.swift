// With --no-hashed-file-names the key itself names its file: a key that cannot (`a/b`, `.`,
// `..`, 256 bytes, NUL, the temporary prefix) is refused -32602 invalidKey before any reply
// says it was stored, whatever the value's size and whichever method carries it, and the
// disk tier keeps draining its journal for the keys that can.

import Foundation
import HalcyonJSON
import Testing

@Suite("Plain file names end to end", .serialized, .timeLimit(.minutes(2)))
struct PlainFileNamesEndToEndTests {
    /// Keys no file can be named with, as JSON string literals.
    static let badKeys = [
        #""a/b""#, #"".""#, #""..""#, "\"\(String(repeating: "k", count: 256))\"", #""a\u0000b""#, #"".tmp-x""#,
        #""../escape""#,
    ]

    private func expectInvalidKey(
        _ reply: JSONValue, param: String = "key", sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(reply["error"]?["code"]?.int64 == -32602, "\(reply.serializedText)", sourceLocation: sourceLocation)
        #expect(reply["error"]?["data"]?["reason"]?.string == "invalidKey", "\(reply.serializedText)",
                sourceLocation: sourceLocation)
        #expect(reply["error"]?["data"]?["param"]?.string == param, "\(reply.serializedText)",
                sourceLocation: sourceLocation)
    }

    @Test func everyMethodRefusesAKeyThatCannotNameAFileBeforeItsReply() throws {
        let daemon = try DaemonProcess(arguments: ["--no-hashed-file-names"])
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let large = String(repeating: "v", count: 1 << 20)
        for key in Self.badKeys {
            expectInvalidKey(try client.call("cache.set", #"{"key":\#(key),"value":"v"}"#))
            expectInvalidKey(try client.call("cache.set", #"{"key":\#(key),"value":"\#(large)"}"#))
            expectInvalidKey(try client.call("cache.set", #"{"key":\#(key),"value":"v","toDisk":false}"#))
            expectInvalidKey(try client.call("cache.add", #"{"key":\#(key),"value":"v"}"#))
            expectInvalidKey(try client.call("cache.incr", #"{"key":\#(key),"by":1}"#))
            expectInvalidKey(try client.call("cache.touch", #"{"key":\#(key)}"#))
            expectInvalidKey(try client.call("cache.remove", #"{"key":\#(key)}"#))
            expectInvalidKey(try client.call("cache.get", #"{"key":\#(key)}"#))
            expectInvalidKey(try client.call("cache.describe", #"{"key":\#(key)}"#))
            expectInvalidKey(try client.call("cache.lease", #"{"key":\#(key),"ttl":{"seconds":5}}"#))
            expectInvalidKey(try client.call("cache.getMany", #"{"keys":["ok",\#(key)]}"#), param: "keys[1]")
            expectInvalidKey(try client.call(
                "cache.setMany", #"{"entries":[{"key":"ok","value":"1"},{"key":\#(key),"value":"2"}]}"#))
        }
        // Nothing of the refused setMany was stored, and the disk tier takes good keys.
        #expect(try client.result("cache.get", #"{"key":"ok"}"#)["found"]?.bool == false)
        #expect(try client.result("cache.set", #"{"key":"small","value":"v"}"#)["stored"]?.bool == true)
        #expect(try client.result("cache.set", #"{"key":"x.txt","value":"\#(large)"}"#)["stored"]?.bool == true)
        try expectEveryValueInItsFile(client)
        #expect(FileManager.default.fileExists(atPath: daemon.cacheDirectory.appendingPathComponent("default/small").path))
        let stats = try client.result("cache.stats")
        #expect(stats["journal"]?["droppedEntries"]?.int64 == 0)
    }

    @Test func hashedNamesTakeTheSameKeys() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        for key in Self.badKeys {
            #expect(try client.result("cache.set", #"{"key":\#(key),"value":"v"}"#)["stored"]?.bool == true)
            #expect(try client.result("cache.get", #"{"key":\#(key)}"#)["value"]?.string == "v")
        }
        try expectEveryValueInItsFile(client)
    }

    /// Every acknowledged value is in its file after a trim, which writes them all first
    /// (an entry that could never be written would stay in the table).
    private func expectEveryValueInItsFile(_ client: TestClient) throws {
        _ = try client.result("cache.trim")
        let journal = try client.result("cache.stats")["journal"]
        #expect(journal?["unwrittenEntries"]?.int64 == 0, "\(journal?.serializedText ?? "")")
    }
}

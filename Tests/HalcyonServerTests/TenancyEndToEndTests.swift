// Tenancy end to end (`halcyond --access`), for the peer these tests run as: the
// namespace and rights server.info reports (as Docs/PROTOCOL.md names them), rights
// refused before anything runs, the fast paths (memory answers, direct writes) inside a
// namespace, and the stored keys carrying the namespace across a restart without it.
// Peers of other users are Clients/python/tests/test_tenants.py's.

import Foundation
import Glibc
import HalcyonJSON
import Testing

@Suite(.timeLimit(.minutes(2))) struct TenancyEndToEndTests {
    /// A daemon whose rules file gives this process's user `rule` (namespace and rights).
    func daemon(_ rule: String, root: URL? = nil) throws -> DaemonProcess {
        let folder = root ?? URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let rules = folder.appendingPathComponent("access.conf")
        try "uid \(geteuid()) \(rule)\n".write(to: rules, atomically: true, encoding: .utf8)
        return try DaemonProcess(arguments: ["--access", rules.path], root: folder)
    }

    @Test func serverInfoNamesTheNamespaceAndRightsAsTheProtocolDocSays() throws {
        let d = try daemon("docs read")
        defer { d.cleanUp() }
        let info = try d.client().result("server.info")
        #expect(info["namespace"]?.string == "docs", "\(info.compactText)")
        #expect(info["rights"]?.array?.compactMap(\.string) == ["read"], "\(info.compactText)")
        let doc = try String(contentsOf: ProtocolDocTests.docURL, encoding: .utf8)
        let section = doc.components(separatedBy: "### server.info").dropFirst().first?
            .components(separatedBy: "\n### ").first ?? ""
        #expect(section.contains("`namespace`") && section.contains("`rights`"), "server.info in Docs/PROTOCOL.md")
    }

    @Test func aMissingRightIsRefusedBeforeAnythingRuns() throws {
        let d = try daemon("docs read")
        defer { d.cleanUp() }
        let c = try d.client()
        for (method, params, right) in [
            ("cache.set", #"{"key":"k","value":"v"}"#, "write"), ("cache.clear", "{}", "write"),
            ("server.metrics", nil, "admin"), ("cache.totalSize", nil, "admin"),
            ("cache.get", #"{"key":"k","namespace":"other"}"#, "admin"),
        ] {
            let error = try c.call(method, params)["error"]
            #expect(error?["code"]?.int64 == -32005, "\(method)")
            #expect(error?["data"]?.compactText == #"{"reason":"notPermitted","right":"\#(right)"}"#, "\(method)")
        }
        #expect(try c.result("cache.get", #"{"key":"k"}"#)["found"]?.bool == false)
        // Reading rights reach the namespace's own counters, and nothing else.
        let stats = try c.result("cache.stats")
        #expect(stats.members.map(\.key) == ["namespace"], "\(stats.compactText)")
        #expect(stats["namespace"]?["name"]?.string == "docs", "\(stats.compactText)")
        #expect(stats["namespace"]?["memory"]?["misses"]?.int64 == 1, "\(stats.compactText)")
    }

    @Test func pipelinedWritesAndReadsKeepTheirOrderInsideANamespace() throws {
        let d = try daemon("one read,write")
        defer { d.cleanUp() }
        let c = try d.client()
        // One write: the direct set and the memory answer of the get must meet in the
        // namespace, so the get sees the set before it.
        var lines = ""
        for (id, value) in ["a", "b", "c"].enumerated() {
            lines += #"{"jsonrpc":"2.0","id":\#(2 * id + 1),"method":"cache.set","params":{"key":"k","value":"\#(value)"}}"# + "\n"
            lines += #"{"jsonrpc":"2.0","id":\#(2 * id + 2),"method":"cache.get","params":{"key":"k"}}"# + "\n"
        }
        try c.sendRaw(Array(lines.utf8))
        let replies = try c.readReplies(6)
        #expect(replies[2]?["result"]?["value"]?.string == "a")
        #expect(replies[4]?["result"]?["value"]?.string == "b")
        #expect(replies[6]?["result"]?["value"]?.string == "c")
        #expect(try c.result("cache.keys")["keys"]?.compactText == #"["k"]"#)
    }

    @Test func clearingANamespaceRemovesOnlyItsKeysAndAnAdminNamesAnother() throws {
        let d = try daemon("one read,write,admin")
        defer { d.cleanUp() }
        let c = try d.client()
        _ = try c.result("cache.set", #"{"key":"k","value":"in one"}"#)
        _ = try c.result("cache.set", #"{"key":"k","value":"in two","namespace":"two"}"#)
        let error = try c.call("cache.clear", #"{"memory":false}"#)["error"]
        #expect(error?["data"]?.compactText == #"{"reason":"wholeNamespaceOnly","param":"memory"}"#)
        #expect(try c.result("cache.clear").compactText == #"{"removed":1}"#)
        #expect(try c.result("cache.get", #"{"key":"k"}"#)["found"]?.bool == false)
        #expect(try c.result("cache.get", #"{"key":"k","namespace":"two"}"#)["value"]?.string == "in two")
        #expect(try c.call("cache.get", #"{"key":"k","namespace":"t/o"}"#)["error"]?["data"]?["reason"]?.string
            == "invalidNamespace")
    }

    @Test func storedKeysCarryTheNamespaceAndADaemonWithoutAccessSeesThem() throws {
        let root = URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))")
        let first = try daemon("one read,write", root: root)
        _ = try first.client().result("cache.set", #"{"key":"k","value":"in one"}"#)
        #expect(first.stop() == 0)
        let plain = try DaemonProcess(root: root)
        defer { plain.cleanUp() }
        let c = try plain.client()
        #expect(try c.result("cache.keys")["keys"]?.array?.compactMap(\.string) == ["one\u{1F}k"])
        #expect(try c.result("cache.get", #"{"key":"one\u001fk"}"#)["value"]?.string == "in one")
        #expect(try c.result("cache.get", #"{"key":"k"}"#)["found"]?.bool == false)
        #expect(try c.call("cache.get", #"{"key":"k","namespace":"one"}"#)["error"]?["data"]?["reason"]?.string == "unknownParam")
    }
}

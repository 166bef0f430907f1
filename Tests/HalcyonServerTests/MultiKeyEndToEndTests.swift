// cache.getMany, cache.setMany, cache.keys and cache.removePrefix end to end.

import Foundation
import HalcyonJSON
import Testing

@Suite struct MultiKeyEndToEndTests {
    @Test func setManyAndGetManyKeepOrderAndLimits() throws {
        let daemon = try DaemonProcess(arguments: ["--max-batch", "4"])
        defer { daemon.cleanUp() }
        let c = try daemon.client()
        let set = try c.result("cache.setMany", #"""
            {"entries":[{"key":"a","value":"1"},{"key":"b","value":{"n":2},"encoding":"json"},
            {"key":"c","value":"x","expiration":"expired"}]}
            """#.replacingOccurrences(of: "\n", with: ""))
        #expect(set["stored"]?.int64 == 2)
        let versions = try #require(set["versions"]?.array)
        #expect(versions.count == 3)
        #expect(versions[0].int64 != nil && versions[1].int64 != nil && versions[2].isNull)

        let got = try c.result("cache.getMany", #"{"keys":["b","missing","a","c"]}"#)
        let entries = try #require(got["entries"]?.array)
        #expect(entries.count == 4)
        #expect(entries[0]["value"]?["n"]?.int64 == 2)
        #expect(entries[0]["version"]?.int64 == versions[1].int64)
        #expect(entries[1]["found"]?.bool == false)
        #expect(entries[2]["value"]?.string == "1")
        #expect(entries[3]["found"]?.bool == false)

        let tooMany = try c.call("cache.getMany", #"{"keys":["a","b","c","d","e"]}"#)
        #expect(tooMany["error"]?["data"]?["reason"]?.string == "tooManyKeys")
        #expect(tooMany["error"]?["data"]?["limit"]?.int64 == 4)
        let tooManySets = try c.call(
            "cache.setMany", #"{"entries":[{"key":"1","value":""},{"key":"2","value":""},{"key":"3","value":""},{"key":"4","value":""},{"key":"5","value":""}]}"#)
        #expect(tooManySets["error"]?["data"]?["reason"]?.string == "tooManyKeys")
        // None of a refused setMany ran.
        #expect(try c.result("cache.get", #"{"key":"1"}"#)["found"]?.bool == false)
        let badKey = try c.call("cache.getMany", #"{"keys":["a",""]}"#)
        #expect(badKey["error"]?["data"]?["reason"]?.string == "emptyKey")
        #expect(badKey["error"]?["data"]?["param"]?.string == "keys[1]")
    }

    /// Pages with a small limit until the cursor runs out; returns every key listed.
    static func listAll(_ c: TestClient, prefix: String, limit: Int) throws -> [String] {
        var keys: [String] = []
        var cursor: String?
        for _ in 0..<1000 {
            let cursorPart = cursor.map { #","cursor":\#(JSONValue.string($0).compactText)"# } ?? ""
            let page = try c.result("cache.keys", #"{"prefix":"\#(prefix)","limit":\#(limit)\#(cursorPart)}"#)
            keys += try #require(page["keys"]?.array).compactMap(\.string)
            cursor = page["cursor"]?.string
            if cursor == nil { return keys }
        }
        Issue.record("the listing did not end")
        return keys
    }

    @Test func keysPagesThroughBothTiersOnceEachAndAfterARestart() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let c = try daemon.client()
        for i in 0..<25 { _ = try c.result("cache.set", #"{"key":"p:disk\#(i)","value":"v"}"#) }
        for i in 0..<5 { _ = try c.result("cache.set", #"{"key":"p:mem\#(i)","value":"v","toDisk":false}"#) }
        for i in 0..<3 { _ = try c.result("cache.set", #"{"key":"q:\#(i)","value":"v"}"#) }
        _ = try c.result("cache.set", #"{"key":"p:gone","value":"v"}"#)
        _ = try c.result("cache.remove", #"{"key":"p:gone"}"#)

        let listed = try Self.listAll(c, prefix: "p:", limit: 4)
        let expected = Set((0..<25).map { "p:disk\($0)" } + (0..<5).map { "p:mem\($0)" })
        #expect(listed.count == expected.count)
        #expect(Set(listed) == expected)
        #expect(Set(try Self.listAll(c, prefix: "", limit: 10_000)).count == 33)

        let badCursor = try c.call("cache.keys", #"{"cursor":"nonsense"}"#)
        #expect(badCursor["error"]?["data"]?["reason"]?.string == "invalidCursor")
        #expect(try c.call("cache.keys", #"{"limit":10001}"#)["error"]?["data"]?["reason"]?.string == "outOfRange")

        // After a restart only the files know the keys; memory-only entries are gone.
        daemon.stop(signal: SIGKILL)
        let again = try DaemonProcess(root: daemon.root)
        defer { again.stop(signal: SIGKILL) }
        let c2 = try again.client()
        let afterRestart = try Self.listAll(c2, prefix: "p:", limit: 7)
        #expect(afterRestart.count == 25)
        #expect(Set(afterRestart) == Set((0..<25).map { "p:disk\($0)" }))
    }

    @Test func removePrefixRemovesEveryMatchFromBothTiers() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let c = try daemon.client()
        for i in 0..<10 { _ = try c.result("cache.set", #"{"key":"user:1:\#(i)","value":"v"}"#) }
        _ = try c.result("cache.set", #"{"key":"user:1:mem","value":"v","toDisk":false}"#)
        _ = try c.result("cache.set", #"{"key":"user:2:a","value":"v"}"#)
        let removed = try c.result("cache.removePrefix", #"{"prefix":"user:1:"}"#)
        #expect(removed["removed"]?.int64 == 11)
        #expect(try Self.listAll(c, prefix: "user:", limit: 100) == ["user:2:a"])
        #expect(try c.result("cache.get", #"{"key":"user:1:3"}"#)["found"]?.bool == false)
        #expect(try c.result("cache.get", #"{"key":"user:1:mem"}"#)["found"]?.bool == false)
        #expect(try c.call("cache.removePrefix", #"{"prefix":""}"#)["error"]?["data"]?["reason"]?.string == "emptyPrefix")
    }
}

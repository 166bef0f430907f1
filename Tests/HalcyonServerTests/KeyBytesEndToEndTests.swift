// A key is its bytes, end to end: each pair of canonically equal keys with different UTF-8
// is two keys through every keyed method, in memory, after a restart from the journal
// (kill -9) and after one from the files (a clean stop).

import Foundation
import HalcyonJSON
import Testing

@Suite struct KeyBytesEndToEndTests {
    /// One String each, two byte strings each: NFC and NFD é, the Ångström sign and Å,
    /// precomposed and conjoining Hangul.
    let pairs: [(String, String)] = [
        ("caf\u{E9}", "cafe\u{301}"),
        ("\u{212B}", "\u{C5}"),
        ("\u{D55C}", "\u{1112}\u{1161}\u{11AB}"),
    ]

    /// A key as a JSON string holding its UTF-8 as is (no escapes): the request carries
    /// exactly these bytes. The keys here hold no quote, backslash or control character.
    func json(_ key: String) -> String { "\"\(key)\"" }

    /// The value of `key` as bytes (nil when not found); compared as bytes, never as Strings.
    func value(_ c: TestClient, _ key: String) throws -> [UInt8]? {
        let reply = try c.result("cache.get", #"{"key":\#(json(key))}"#)
        return reply["found"]?.bool == true ? reply["value"]?.stringBytes : nil
    }

    /// The counter under `key` (an incremented value reads back as a JSON number).
    func number(_ c: TestClient, _ key: String) throws -> Int64? {
        try c.result("cache.get", #"{"key":\#(json(key))}"#)["value"]?.int64
    }

    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// The keys of both keys of pair `i` in the test's namespace `space`.
    func keys(_ i: Int, _ space: String) -> (String, String) {
        let (a, b) = pairs[i]
        return ("\(i)\(space):\(a)", "\(i)\(space):\(b)")
    }

    /// Every key under `prefix` (one page), as byte strings.
    func listed(_ c: TestClient, prefix: String) throws -> Set<[UInt8]> {
        let page = try c.result("cache.keys", #"{"prefix":\#(json(prefix)),"limit":10000}"#)
        #expect(page["cursor"]?.isNull == true)
        return Set(try #require(page["keys"]?.array).compactMap(\.stringBytes))
    }

    /// What the writes of pair `i` left: each key's own value.
    func checkStored(_ c: TestClient, _ i: Int) throws {
        let (a, b) = keys(i, "v")
        #expect(try value(c, a) == bytes("1:\(a)"), "\(a) keeps its own value")
        #expect(try value(c, b) == bytes("2:\(b)"), "\(b) keeps its own value")
        let (na, nb) = keys(i, "n")
        #expect(try number(c, na) == 1)
        #expect(try number(c, nb) == 5)
        let (ma, mb) = keys(i, "m")
        #expect(try value(c, ma) == bytes("3"))
        #expect(try value(c, mb) == bytes("4"))
        let (aa, ab) = keys(i, "add")
        #expect(try value(c, aa) == bytes("first"))
        #expect(try value(c, ab) == bytes("second"))
    }

    @Test func eachPairIsTwoKeysThroughEveryMethodAndAfterRestarts() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let c = try daemon.client()
        for i in pairs.indices {
            let (a, b) = keys(i, "v")
            // set, get
            _ = try c.result("cache.set", #"{"key":\#(json(a)),"value":"1:\#(a)"}"#)
            _ = try c.result("cache.set", #"{"key":\#(json(b)),"value":"2:\#(b)"}"#)
            // cas: b's own version stores into b, and a is untouched.
            let versionB = try #require(try c.result("cache.get", #"{"key":\#(json(b))}"#)["version"]?.int64)
            let versionA = try #require(try c.result("cache.get", #"{"key":\#(json(a))}"#)["version"]?.int64)
            #expect(versionA != versionB)
            let casA = try c.result("cache.cas", #"{"key":\#(json(a)),"value":"x","version":\#(versionB)}"#)
            #expect(casA["stored"]?.bool == false, "b's version is not a's")
            // incr: two counters.
            let (na, nb) = keys(i, "n")
            #expect(try c.result("cache.incr", #"{"key":\#(json(na)),"by":1}"#)["value"]?.int64 == 1)
            #expect(try c.result("cache.incr", #"{"key":\#(json(nb)),"by":5}"#)["value"]?.int64 == 5)
            // add: the second key is free.
            let (aa, ab) = keys(i, "add")
            #expect(try c.result("cache.add", #"{"key":\#(json(aa)),"value":"first"}"#)["stored"]?.bool == true)
            #expect(try c.result("cache.add", #"{"key":\#(json(ab)),"value":"second"}"#)["stored"]?.bool == true)
            // setMany, getMany
            let (ma, mb) = keys(i, "m")
            let setMany = try c.result("cache.setMany",
                #"{"entries":[{"key":\#(json(ma)),"value":"3"},{"key":\#(json(mb)),"value":"4"}]}"#)
            #expect(setMany["stored"]?.int64 == 2)
            let many = try #require(try c.result("cache.getMany", #"{"keys":[\#(json(a)),\#(json(b))]}"#)["entries"]?.array)
            #expect(many.map { $0["value"]?.stringBytes } == [bytes("1:\(a)"), bytes("2:\(b)")])
            // keys lists both.
            #expect(try listed(c, prefix: "\(i)") == Set([a, b, na, nb, ma, mb, aa, ab].map(bytes)))
            // lease: each key has its own.
            let (la, lb) = keys(i, "l")
            #expect(try c.result("cache.lease", #"{"key":\#(json(la)),"ttl":{"seconds":60}}"#)["lease"]?.string != nil)
            let second = try c.result("cache.lease", #"{"key":\#(json(lb)),"ttl":{"seconds":60}}"#)
            #expect(second["leased"]?.bool != true, "\(lb) is not leased through \(la)")
            #expect(second["lease"]?.string != nil)
            try checkStored(c, i)
        }

        // From the journal: kill -9, so no file need hold the writes.
        daemon.stop(signal: SIGKILL)
        let replayed = try DaemonProcess(root: daemon.root)
        let r = try replayed.client()
        for i in pairs.indices {
            try checkStored(r, i)
            let (a, b) = keys(i, "v")
            #expect(try listed(r, prefix: "\(i)v") == Set([a, b].map(bytes)))
        }
        // From the files: a clean stop writes them all.
        #expect(replayed.stop() == 0)
        let reloaded = try DaemonProcess(root: daemon.root)
        defer { reloaded.cleanUp() }
        let d = try reloaded.client()
        for i in pairs.indices {
            try checkStored(d, i)
            // remove, removeMany: the other key stays.
            let (a, b) = keys(i, "v")
            #expect(try d.result("cache.remove", #"{"key":\#(json(a))}"#)["removed"]?.bool == true)
            #expect(try value(d, b) == bytes("2:\(b)"))
            let (ma, mb) = keys(i, "m")
            _ = try d.result("cache.removeMany", #"{"keys":[\#(json(mb))]}"#)
            #expect(try value(d, ma) == bytes("3"))
            #expect(try value(d, mb) == nil)
            // removePrefix of the whole second key: a byte prefix of it only.
            let (na, nb) = keys(i, "n")
            #expect(try d.result("cache.removePrefix", #"{"prefix":\#(json(nb))}"#)["removed"]?.int64 == 1)
            #expect(try number(d, na) == 1)
        }
    }

    /// `removePrefix` and `keys` match bytes: `cafe` is a prefix of `cafe\u{301}` (as bytes)
    /// and not of `caf\u{E9}`, though as Strings it is a prefix of neither.
    @Test func prefixesMatchBytes() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let c = try daemon.client()
        for key in ["caf\u{E9}", "cafe\u{301}", "cafe"] {
            _ = try c.result("cache.set", #"{"key":\#(json(key)),"value":"v"}"#)
        }
        _ = try c.result("cache.set", #"{"key":"mem:cafe\#u{301}","value":"v","toDisk":false}"#)
        #expect(try listed(c, prefix: "cafe") == Set(["cafe\u{301}", "cafe"].map(bytes)))
        #expect(try listed(c, prefix: "mem:cafe") == Set([bytes("mem:cafe\u{301}")]))
        #expect(try c.result("cache.removePrefix", #"{"prefix":"cafe"}"#)["removed"]?.int64 == 2)
        #expect(try value(c, "caf\u{E9}") == bytes("v"))
        #expect(try value(c, "cafe\u{301}") == nil)
    }
}

// The direct write path seen from clients: the sets of one read burst are committed as
// one group on the connection's event loop and answered at once, in order with whatever
// came before and after them on the line stream; every other case takes the queued path
// and still answers correctly.

import Foundation
import HalcyonJSON
import HalcyonTestSupport
import Testing

@Suite("Direct writes end to end", .serialized, .timeLimit(.minutes(1)))
struct DirectWritesEndToEndTests {
    /// Sets, gets and pings sent in one write come back as whole, separate lines, one per
    /// request; each get sees exactly the sets before it. Reply order is not checked: the
    /// protocol lets a memory answer (the ping) overtake a set that found the ioQueue busy
    /// and was queued instead of committed directly.
    @Test func pipelinedSetsAndReadsAnswerInOrder() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        // Once the ioQueue's first job (the folder's listing) is done, every set below can
        // take the direct path; otherwise a queued one may be answered after what follows.
        _ = try client.result("debug.sleep", #"{"seconds":0}"#)
        var lines: [String] = []
        var expected: [(id: Int, check: (JSONValue) -> Bool)] = []
        for i in 0..<40 {
            let id = 100 + i
            lines.append(#"{"jsonrpc":"2.0","id":\#(id),"method":"cache.set","params":{"key":"p\#(i % 7)","value":"v\#(i)"}}"#)
            expected.append((id, { $0["result"]?["stored"]?.bool == true }))
            if i % 5 == 4 {
                let getID = 1000 + i
                lines.append(#"{"jsonrpc":"2.0","id":\#(getID),"method":"cache.get","params":{"key":"p\#(i % 7)"}}"#)
                expected.append((getID, { $0["result"]?["value"]?.string == "v\(i)" }))
            }
        }
        lines.append(#"{"jsonrpc":"2.0","id":5000,"method":"server.ping"}"#)
        expected.append((5000, { $0["result"]?["pong"]?.bool == true }))
        try client.sendRaw(Array((lines.joined(separator: "\n") + "\n").utf8))

        let replies = try client.readReplies(expected.count)
        #expect(replies.count == expected.count, "a reply was repeated or lost")
        for (id, check) in expected {
            let reply = try #require(replies[Int64(id)], "no reply to \(id)")
            #expect(check(reply), "reply \(id): \(reply)")
        }
    }

    /// A read of a key no waiting set writes is answered at once; a read of one that a
    /// waiting set writes sees that set, whatever came between.
    @Test func readsSeeTheSetsBeforeThemAndOnlyWaitForTheirOwnKeys() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        // Both keys in memory first, so every read below is a memory answer (a miss would
        // be queued behind the sets anyway).
        _ = try client.result("cache.set", #"{"key":"x","value":"old"}"#)
        _ = try client.result("cache.set", #"{"key":"y","value":"old"}"#)
        let lines = [
            #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"x","value":"new"}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"cache.get","params":{"key":"y"}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"server.ping"}"#,
            #"{"jsonrpc":"2.0","id":4,"method":"cache.get","params":{"key":"x"}}"#,
            #"{"jsonrpc":"2.0","id":5,"method":"cache.set","params":{"key":"y","value":"newer"}}"#,
            #"{"jsonrpc":"2.0","id":7,"method":"cache.get","params":{"key":"y"}}"#,
            #"{"jsonrpc":"2.0","id":6,"method":"cache.isCached","params":{"key":"z"}}"#,
            #"{"jsonrpc":"2.0","id":8,"method":"cache.describe","params":{"key":"y"}}"#,
        ]
        try client.sendRaw(Array((lines.joined(separator: "\n") + "\n").utf8))
        let replies = try client.readReplies(8)
        #expect(replies[1]?["result"]?["stored"]?.bool == true)
        #expect(replies[2]?["result"]?["value"]?.string == "old")
        #expect(replies[3]?["result"]?["pong"]?.bool == true)
        #expect(replies[4]?["result"]?["value"]?.string == "new")
        #expect(replies[5]?["result"]?["stored"]?.bool == true)
        #expect(replies[6]?["result"]?["cached"]?.bool == false)
        #expect(replies[7]?["result"]?["value"]?.string == "newer")
        #expect(replies[8]?["result"]?["size"]?.int64 == 5)
    }

    /// Atomic writes sent in one burst with sets and reads: each decides on everything
    /// before it on the line stream, refusals come back in their places, and another
    /// connection's increments of the same counter are never lost.
    @Test func pipelinedAtomicWritesDecideOnWhatCameBefore() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let other = try daemon.client()
        _ = try client.result("debug.sleep", #"{"seconds":0}"#)
        let lines = [
            #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"n","value":"5"}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"cache.incr","params":{"key":"n","by":2}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"cache.get","params":{"key":"n"}}"#,
            #"{"jsonrpc":"2.0","id":4,"method":"cache.add","params":{"key":"n","value":"x"}}"#,
            #"{"jsonrpc":"2.0","id":5,"method":"cache.add","params":{"key":"a","value":"first"}}"#,
            #"{"jsonrpc":"2.0","id":6,"method":"cache.add","params":{"key":"a","value":"second"}}"#,
            #"{"jsonrpc":"2.0","id":7,"method":"cache.incr","params":{"key":"a"}}"#,
            #"{"jsonrpc":"2.0","id":8,"method":"cache.incr","params":{"key":"n","by":9223372036854775807}}"#,
            #"{"jsonrpc":"2.0","id":9,"method":"cache.get","params":{"key":"a"}}"#,
            #"{"jsonrpc":"2.0","id":10,"method":"cache.incr","params":{"key":"n"}}"#,
        ]
        try client.sendRaw(Array((lines.joined(separator: "\n") + "\n").utf8))
        let replies = try client.readReplies(10)
        #expect(replies[1]?["result"]?["stored"]?.bool == true)
        #expect(replies[2]?["result"]?["value"]?.int64 == 7)
        // The sum keeps the encoding the number was stored with (utf8 here).
        #expect(replies[3]?["result"]?["value"]?.string == "7")
        #expect(replies[4]?["result"]?["stored"]?.bool == false)
        #expect(replies[4]?["result"]?["version"]?.int64 == replies[2]?["result"]?["version"]?.int64)
        #expect(replies[5]?["result"]?["stored"]?.bool == true)
        #expect(replies[6]?["result"]?["stored"]?.bool == false)
        #expect(replies[7]?["error"]?["data"]?["reason"]?.string == "notAnInteger")
        #expect(replies[8]?["error"]?["data"]?["reason"]?.string == "integerOverflow")
        #expect(replies[9]?["result"]?["value"]?.string == "first")
        #expect(replies[10]?["result"]?["value"]?.int64 == 8)

        // A compare-and-set with the version the last increment reported wins; then both
        // connections pipeline increments of one counter: every one counts.
        let version = replies[10]?["result"]?["version"]?.int64 ?? -1
        let swapped = try client.result("cache.cas", #"{"key":"n","value":"0","version":\#(version)}"#)
        #expect(swapped["stored"]?.bool == true)
        let increments = (1...200).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"cache.incr","params":{"key":"n"}}"# }
        let burst = Array((increments.joined(separator: "\n") + "\n").utf8)
        try client.sendRaw(burst)
        try other.sendRaw(burst)
        var seen = Set<Int64>()
        for connection in [client, other] {
            let answers = try connection.readReplies(200)
            for id in 1...200 {
                if let value = answers[Int64(id)]?["result"]?["value"]?.int64 { seen.insert(value) }
            }
        }
        // 400 distinct values from 1 to 400: every increment counted once.
        #expect(seen.count == 400 && seen.min() == 1 && seen.max() == 400, "\(seen.count) distinct values")
        // The counter was stored as the text "0" by the cas, and stays text.
        #expect(try client.result("cache.get", #"{"key":"n"}"#)["value"]?.string == "400")
    }

    /// Versions grow in the order of the sets, within a group and across groups.
    @Test func versionsFollowTheOrderOfTheSets() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        var lines: [String] = []
        for i in 0..<30 {
            lines.append(#"{"jsonrpc":"2.0","id":\#(i + 1),"method":"cache.set","params":{"key":"v","value":"\#(i)"}}"#)
        }
        try client.sendRaw(Array((lines.joined(separator: "\n") + "\n").utf8))
        let replies = try client.readReplies(30)
        let versions = (1...30).map { replies[Int64($0)]?["result"]?["version"]?.int64 ?? -1 }
        #expect(versions == versions.sorted() && Set(versions).count == 30, "\(versions)")
        let got = try client.result("cache.get", #"{"key":"v"}"#)
        #expect(got["value"]?.string == "29")
        #expect(got["version"]?.int64 == versions.last)
    }

    /// A set refused before it is applied (bad params) is answered with its error in its
    /// place among direct sets, and the sets around it are applied.
    @Test func aBadSetAmongGoodOnesGetsItsOwnError() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let lines = [
            #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"a","value":"1"}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"cache.set","params":{"key":"","value":"2"}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"cache.set","params":{"key":"c","value":"3","expiration":"soon"}}"#,
            #"{"jsonrpc":"2.0","id":4,"method":"cache.set","params":{"key":"d","value":"4"}}"#,
        ]
        try client.sendRaw(Array((lines.joined(separator: "\n") + "\n").utf8))
        let replies = try client.readReplies(4)
        #expect(replies[1]?["result"]?["stored"]?.bool == true)
        #expect(replies[2]?["error"]?["code"]?.int64 == -32602)
        #expect(replies[3]?["error"]?["code"]?.int64 == -32602)
        #expect(replies[4]?["result"]?["stored"]?.bool == true)
        #expect(try client.result("cache.get", #"{"key":"a"}"#)["value"]?.string == "1")
        #expect(try client.result("cache.get", #"{"key":"d"}"#)["value"]?.string == "4")
    }

    /// While the ioQueue is busy, a set takes the queued path: the event loop is not held,
    /// so another connection on it is still answered from memory at once.
    @Test func aBusyIOQueueNeverHoldsTheEventLoop() throws {
        let daemon = try DaemonProcess(arguments: ["--event-loop-threads", "1"])
        defer { daemon.cleanUp() }
        let writer = try daemon.client()
        let reader = try daemon.client()
        _ = try reader.result("cache.set", #"{"key":"hot","value":"x"}"#)
        try writer.request("debug.sleep", #"{"seconds":2}"#, id: 1)
        usleep(200_000)
        try writer.request("cache.set", #"{"key":"late","value":"y"}"#, id: 2)
        usleep(100_000)
        #expect(try reader.result("cache.get", #"{"key":"hot"}"#)["value"]?.string == "x")
        // Had the loop waited for the ioQueue, the get would have come back only after the
        // sleep, whose reply would be here by now.
        #expect(try writer.readLine(timeout: 0.2) == nil)
        let replies = try writer.readReplies(2)
        #expect(replies[2]?["result"]?["stored"]?.bool == true)
        #expect(try reader.result("cache.get", #"{"key":"late"}"#)["value"]?.string == "y")
    }
}

// The execution model seen from clients: delivery policies and reply order,
// cancellation, read-your-writes, loadDiskFileSynchronously, many clients at once.

import Foundation
import HalcyonJSON
import HalcyonSupport
import Testing

@Suite("Execution model end to end", .serialized, .timeLimit(.minutes(1)))
struct ExecutionEndToEndTests {
    /// Replies to ioQueue requests of one connection leave in arrival order under every
    /// serial policy, even when they are all queued behind a sleeping ioQueue.
    @Test(arguments: [#""mainAsync""#, #""mainCurrentOrAsync""#, #""untouch""#,
                      #"{"dispatch":{"concurrent":false,"qos":"default"}}"#])
    func serialPoliciesKeepArrivalOrder(policy: String) throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("connection.configure", #"{"callbackQueue":\#(policy)}"#)
        try client.request("debug.sleep", #"{"seconds":0.3}"#, id: 1000)
        for i in 0..<50 {
            try client.request("cache.set", #"{"key":"k\#(i % 5)","value":"\#(i)"}"#, id: i)
        }
        var order: [Int64] = []
        for _ in 0...50 {
            order.append(try #require(try client.readReply()["id"]?.int64))
        }
        #expect(order == [1000] + (0..<50).map(Int64.init))
    }

    /// With an operationQueue of width 1 that is busy, queued deliveries leave by priority.
    @Test func operationQueuePriorityOrdersDeliveries() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("connection.configure", #"{"callbackQueue":{"operationQueue":{"maxConcurrentOperationCount":1}}}"#)
        _ = try client.result("cache.set", #"{"key":"k","value":"v"}"#)
        // Hold the connection's only delivery slot, then queue memory hits of each priority.
        try client.request("debug.sleep", #"{"seconds":1,"on":"callbackQueue"}"#, id: 100)
        usleep(300_000)
        let priorities = ["veryLow", "low", "normal", "high", "veryHigh"]
        for (i, p) in priorities.enumerated() {
            try client.request("cache.get", #"{"key":"k","options":{"priority":"\#(p)"}}"#, id: i)
        }
        var order: [Int64] = []
        for _ in 0...priorities.count {
            order.append(try #require(try client.readReply()["id"]?.int64))
        }
        #expect(order == [100, 4, 3, 2, 1, 0])
    }

    @Test func cancelBeforeStartChangesNothing() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        try client.request("debug.sleep", #"{"seconds":1.5}"#, id: 1)
        try client.request("cache.set", #"{"key":"c","value":"v"}"#, id: 2)
        try client.send(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":2}}"#)
        let replies = try client.readReplies(2)
        #expect(replies[2]?["error"]?["code"]?.int64 == -32800)
        #expect(replies[2]?["error"]?["data"]?["started"]?.bool == false)
        #expect(try client.result("cache.isCached", #"{"key":"c"}"#)["cached"]?.bool == false)
        // Cancelling an unknown or finished id is ignored.
        try client.send(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":2}}"#)
        #expect(try client.result("server.ping")["pong"]?.bool == true)
    }

    @Test func cancelAfterWorkWithdrawsOnlyTheReply() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("connection.configure", #"{"callbackQueue":{"dispatch":{"concurrent":false,"qos":"default"}}}"#)
        // The delivery queue is held, so the set runs but its reply waits.
        try client.request("debug.sleep", #"{"seconds":1.5,"on":"callbackQueue"}"#, id: 1)
        try client.request("cache.set", #"{"key":"c","value":"done"}"#, id: 2)
        usleep(600_000)
        try client.send(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":2}}"#)
        let replies = try client.readReplies(2)
        #expect(replies[2]?["error"]?["code"]?.int64 == -32800)
        #expect(replies[2]?["error"]?["data"]?["started"]?.bool == true)
        #expect(try client.result("cache.get", #"{"key":"c"}"#)["value"]?.string == "done")
    }

    @Test func disconnectCancelsUnstartedWork() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let leaving = try daemon.client()
        try leaving.request("debug.sleep", #"{"seconds":1.5}"#, id: 1)
        for i in 0..<20 {
            try leaving.request("cache.set", #"{"key":"gone\#(i)","value":"v"}"#, id: 10 + i)
        }
        usleep(100_000)
        leaving.close()
        let staying = try daemon.client()
        _ = try staying.result("debug.sleep", #"{"seconds":0}"#)
        for i in 0..<20 {
            #expect(try staying.result("cache.isCached", #"{"key":"gone\#(i)"}"#)["cached"]?.bool == false)
        }
    }

    @Test func loadDiskFileSynchronouslySkipsTheBusyIOQueue() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let writer = try daemon.client()
        _ = try writer.result("cache.set", #"{"key":"d","value":"disk"}"#)
        _ = try writer.result("cache.remove", #"{"key":"d","fromDisk":false}"#)

        // Per request: answered while the ioQueue sleeps.
        let reader = try daemon.client()
        try writer.request("debug.sleep", #"{"seconds":1}"#, id: 1)
        usleep(100_000)
        try reader.request("cache.get", #"{"key":"d","options":{"loadDiskFileSynchronously":true}}"#, id: 7)
        try reader.request("cache.get", #"{"key":"d"}"#, id: 8)
        let first = try reader.readReply()
        #expect(first["id"]?.int64 == 7)
        #expect(first["result"]?["cacheType"]?.string == "disk")
        // The plain read waited for the ioQueue (and then found the copy put into memory).
        #expect(try reader.readReply()["id"]?.int64 == 8)
        #expect(try writer.readReply()["id"]?.int64 == 1)

        // Per connection.
        _ = try writer.result("cache.remove", #"{"key":"d","fromDisk":false}"#)
        _ = try reader.result("connection.configure", #"{"loadDiskFileSynchronously":true}"#)
        // A long hold, so that "answered before the hold ends" stays true on a loaded machine.
        try writer.request("debug.sleep", #"{"seconds":4}"#, id: 2)
        usleep(100_000)
        try reader.request("cache.get", #"{"key":"d"}"#, id: 9)
        let sync = try reader.readReply(timeout: 3)
        #expect(sync["result"]?["cacheType"]?.string == "disk")
        #expect(try writer.readReply()["id"]?.int64 == 2)
    }

    @Test func readsWaitForQueuedWritesEvenWithSynchronousLoads() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("cache.set", #"{"key":"k","value":"old"}"#)
        try client.request("debug.sleep", #"{"seconds":0.3}"#, id: 1)
        try client.request("cache.set", #"{"key":"k","value":"new"}"#, id: 2)
        try client.request("cache.get", #"{"key":"k","options":{"loadDiskFileSynchronously":true}}"#, id: 3)
        let replies = try client.readReplies(3)
        #expect(replies[3]?["result"]?["value"]?.string == "new")
    }

    /// 16 connections writing and reading the same keys: every client reads its own
    /// latest write, and never a value older than one it has seen acknowledged.
    @Test func readYourWritesAcrossSixteenConnections() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let failureCount = failuresAcrossClients(socketPath: daemon.socketPath, workers: 16) { worker, client, failures in
            for round in 0..<60 {
                let key = "shared\(round % 4)-\(worker % 2)"
                let value = "w\(worker)-r\(round)"
                let encoding = round % 3 == 0 ? #","toDisk":false"# : ""
                try client.request("cache.set", #"{"key":"\#(key)","value":"\#(value)"\#(encoding)}"#, id: 2 * round)
                try client.request("cache.get", #"{"key":"own\#(worker)"}"#, id: 2 * round + 1)
                var replies: [Int64: JSONValue] = [:]
                for _ in 0..<2 {
                    let r = try client.readReply()
                    replies[r["id"]?.int64 ?? -1] = r
                }
                if replies[Int64(2 * round)]?["result"]?["stored"]?.bool != true { failures.withLock { $0 += 1 } }
                // Pipelined set then get of the client's own key must agree.
                try client.request("cache.set", #"{"key":"own\#(worker)","value":"\#(round)"}"#, id: 9000)
                try client.request("cache.get", #"{"key":"own\#(worker)"}"#, id: 9001)
                var got: String?
                for _ in 0..<2 {
                    let r = try client.readReply()
                    if r["id"]?.int64 == 9001 { got = r["result"]?["value"]?.string }
                }
                if got != "\(round)" { failures.withLock { $0 += 1 } }
            }
        }
        #expect(failureCount == 0)
    }

    /// 64 clients with mixed requests; every reply is checked.
    @Test func sixtyFourClientsHammering() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let failureCount = failuresAcrossClients(socketPath: daemon.socketPath, workers: 64) { worker, client, failures in
            for i in 0..<40 {
                let key = "h\(worker)-\(i % 7)"
                switch i % 5 {
                case 0, 1:
                    let r = try client.result("cache.set", #"{"key":"\#(key)","value":"\#(worker):\#(i)"}"#)
                    if r["stored"]?.bool != true { failures.withLock { $0 += 1 } }
                case 2:
                    let r = try client.result("cache.get", #"{"key":"\#(key)"}"#)
                    if let v = r["value"]?.string, !v.hasPrefix("\(worker):") { failures.withLock { $0 += 1 } }
                case 3:
                    let r = try client.result("cache.describe", #"{"key":"\#(key)"}"#)
                    if r["found"]?.bool == nil { failures.withLock { $0 += 1 } }
                default:
                    let r = try client.result("cache.remove", #"{"key":"\#(key)"}"#)
                    if r["removed"]?.bool == nil { failures.withLock { $0 += 1 } }
                }
            }
        }
        #expect(failureCount == 0)
        #expect(try daemon.client().result("server.ping")["pong"]?.bool == true)
    }
}

// cache.lease and cache.releaseLease end to end: who gets the lease, what wakes a parked
// caller (a write, a release, the holder's disconnect, the lease's end, its own wait),
// and that twenty concurrent callers compute once.

import Foundation
import HalcyonJSON
import Testing

@Suite struct LeaseEndToEndTests {
    /// Polls `cache.stats` until `leaseWaiters` is `count` (a parked caller is invisible
    /// otherwise); fails after 20 s.
    static func waitForWaiters(_ c: TestClient, _ count: Int) throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if try c.result("cache.stats")["leaseWaiters"]?.int64 == Int64(count) { return }
            usleep(5000)
        }
        Issue.record("leaseWaiters never reached \(count)")
    }

    @Test func theSecondCallerIsToldLeasedAndAWriteWakesAWaiter() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let a = try daemon.client(), b = try daemon.client(), observer = try daemon.client()
        let first = try a.result("cache.lease", #"{"key":"k","ttl":{"seconds":60}}"#)
        #expect(first["found"]?.bool == false)
        let token = try #require(first["lease"]?.string)

        let second = try b.result("cache.lease", #"{"key":"k","ttl":{"seconds":60}}"#)
        #expect(second["found"]?.bool == false)
        #expect(second["leased"]?.bool == true)
        #expect(second["lease"] == nil)

        // b parks (wait 30 s, far longer than the test needs) ...
        let waitID = try b.request("cache.lease", #"{"key":"k","ttl":{"seconds":60},"wait":30}"#)
        try Self.waitForWaiters(observer, 1)
        // ... and a's write answers it with the value: the write woke it, since neither
        // its wait nor the lease had run out (those answer without a value).
        _ = try a.result("cache.set", #"{"key":"k","value":"computed","lease":"\#(token)"}"#)
        let woken = try b.readReply(timeout: 20)
        #expect(woken["id"]?.int64 == Int64(waitID))
        #expect(woken["result"]?["found"]?.bool == true)
        #expect(woken["result"]?["value"]?.string == "computed")
        #expect(woken["result"]?["version"]?.int64 != nil)
        let stats = try observer.result("cache.stats")
        #expect(stats["leases"]?.int64 == 0)
        #expect(stats["leaseWaiters"]?.int64 == 0)
        // The lease ended with the write: releasing it now changes nothing.
        #expect(try a.result("cache.releaseLease", #"{"key":"k","lease":"\#(token)"}"#)["released"]?.bool == false)
        // A hit needs no lease.
        #expect(try a.result("cache.lease", #"{"key":"k","ttl":{"seconds":60}}"#)["value"]?.string == "computed")
    }

    @Test func releaseAndADisconnectingHolderHandTheLeaseOn() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let a = try daemon.client(), b = try daemon.client(), c = try daemon.client(), observer = try daemon.client()
        let token = try #require(try a.result("cache.lease", #"{"key":"k","ttl":{"seconds":60}}"#)["lease"]?.string)
        try b.request("cache.lease", #"{"key":"k","ttl":{"seconds":60},"wait":30}"#)
        try Self.waitForWaiters(observer, 1)
        try c.request("cache.lease", #"{"key":"k","ttl":{"seconds":60},"wait":30}"#)
        try Self.waitForWaiters(observer, 2)

        // a gives it back: b (first in line) gets it.
        #expect(try a.result("cache.releaseLease", #"{"key":"k","lease":"\#(token)"}"#)["released"]?.bool == true)
        let bGot = try b.readReply(timeout: 20)["result"]
        #expect(bGot?["found"]?.bool == false)
        #expect(bGot?["lease"]?.string != nil)
        #expect(bGot?["lease"]?.string != token)

        // b disconnects without writing: c gets it.
        b.close()
        let cGot = try c.readReply(timeout: 20)["result"]
        #expect(cGot?["lease"]?.string != nil)
        #expect(try observer.result("cache.stats")["leases"]?.int64 == 1)
    }

    @Test func aLeaseEndsAtItsTTLAndAWaitEndsWithLeased() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let a = try daemon.client(), b = try daemon.client(), observer = try daemon.client()
        _ = try #require(try a.result("cache.lease", #"{"key":"short","ttl":{"seconds":0.3}}"#)["lease"]?.string)
        // b waits far longer than the lease: the lease's end, not b's wait, answers.
        let bGot = try b.result("cache.lease", #"{"key":"short","ttl":{"seconds":60},"wait":30}"#)
        #expect(bGot["lease"]?.string != nil)
        #expect(try observer.result("cache.stats")["leasesExpired"]?.int64 == 1)

        // A wait shorter than the lease ends with leased: true.
        let timedOut = try a.result("cache.lease", #"{"key":"short","ttl":{"seconds":60},"wait":0.2}"#)
        #expect(timedOut["found"]?.bool == false)
        #expect(timedOut["leased"]?.bool == true)
        #expect(try observer.result("cache.stats")["leaseWaitsTimedOut"]?.int64 == 1)
    }

    @Test func twentyConcurrentCallersComputeOnce() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let observer = try daemon.client()
        // Twenty connections ask at once (all requests are out before any reply is read).
        let clients = try (0..<20).map { _ in try daemon.client() }
        for c in clients { try c.request("cache.lease", #"{"key":"expensive","ttl":{"seconds":60},"wait":30}"#) }
        // Exactly one is answered with the lease; find it (the others stay parked).
        var holder: Int?
        var token: String?
        let deadline = Date().addingTimeInterval(20)
        while holder == nil, Date() < deadline {
            for (i, c) in clients.enumerated() {
                guard let line = try c.readLine(timeout: 0.01) else { continue }
                let reply = try JSONValue.parse(Array(line.utf8)).get()
                token = reply["result"]?["lease"]?.string
                #expect(token != nil, "\(line)")
                holder = i
                break
            }
        }
        let h = try #require(holder)
        try Self.waitForWaiters(observer, 19)
        // The holder computes once and stores; every parked caller gets that value.
        _ = try clients[h].result("cache.set", #"{"key":"expensive","value":"42","lease":"\#(token ?? "")"}"#)
        for (i, c) in clients.enumerated() where i != h {
            let reply = try c.readReply(timeout: 20)
            #expect(reply["result"]?["value"]?.string == "42", "\(reply.compactText)")
            #expect(reply["result"]?["lease"] == nil)
        }
        let stats = try observer.result("cache.stats")
        #expect(stats["leasesGranted"]?.int64 == 1)
        #expect(stats["leaseWaiters"]?.int64 == 0)
    }

    @Test func waitersAreBoundedAndBadParamsRefused() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let c = try daemon.client()
        #expect(try c.call("cache.lease", #"{"key":"k"}"#)["error"]?["data"]?["reason"]?.string == "missingParam")
        #expect(try c.call("cache.lease", #"{"key":"k","ttl":"expired"}"#)["error"]?["data"]?["reason"]?.string
            == "invalidExpiration")
        #expect(try c.call("cache.lease", #"{"key":"k","ttl":{"seconds":5},"wait":-1}"#)["error"]?["data"]?["reason"]?.string
            == "outOfRange")
        #expect(try c.call("cache.releaseLease", #"{"key":"k"}"#)["error"]?["data"]?["reason"]?.string == "missingParam")
    }
}

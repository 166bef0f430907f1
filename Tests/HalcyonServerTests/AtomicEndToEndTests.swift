// cache.add, cache.incr, cache.cas and versions, end to end against a real daemon over
// its socket, from several connections at once and across restarts.

import Foundation
import HalcyonJSON
import HalcyonSupport
import Testing

@Suite struct AtomicEndToEndTests {
    @Test func exactlyOneOfEightConcurrentAddsWins() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let rounds = 20
        let wins = (0..<rounds).map { _ in Locked(0) }
        let failures = failuresAcrossClients(socketPath: daemon.socketPath, workers: 8) { worker, client, failures in
            for round in 0..<rounds {
                let reply = try client.call("cache.add", #"{"key":"lock-\#(round)","value":"w\#(worker)"}"#)
                guard let stored = reply["result"]?["stored"]?.bool else { failures.withLock { $0 += 1 }; continue }
                if stored { wins[round].withLock { $0 += 1 } }
            }
        }
        #expect(failures == 0)
        for round in 0..<rounds { #expect(wins[round].withLock { $0 } == 1, "round \(round)") }
        // The loser's answer names the winner's version.
        let c = try daemon.client()
        let lost = try c.result("cache.add", #"{"key":"lock-0","value":"late"}"#)
        let current = try c.result("cache.get", #"{"key":"lock-0"}"#)
        #expect(lost["stored"]?.bool == false)
        #expect(lost["version"]?.int64 == current["version"]?.int64)
    }

    @Test func concurrentIncrementsLoseNothingAcrossARestart() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        func hammer(_ socketPath: String) -> Int {
            failuresAcrossClients(socketPath: socketPath, workers: 4) { _, client, failures in
                // Pipelined: 250 requests out, then 250 replies in.
                for _ in 0..<250 { try client.request("cache.incr", #"{"key":"n"}"#) }
                for reply in try client.readReplies(250).values where reply["result"]?["value"]?.int64 == nil {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        #expect(hammer(daemon.socketPath) == 0)
        #expect(try daemon.client().result("cache.get", #"{"key":"n"}"#)["value"]?.int64 == 1000)
        // kill -9: every acknowledged increment must have reached the file.
        daemon.stop(signal: SIGKILL)
        let again = try DaemonProcess(root: daemon.root)
        defer { again.stop(signal: SIGKILL) }
        #expect(hammer(again.socketPath) == 0)
        let got = try again.client().result("cache.get", #"{"key":"n"}"#)
        #expect(got["value"]?.int64 == 2000)
        #expect(got["encoding"]?.string == "json")
    }

    @Test func incrementRules() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let c = try daemon.client()
        let first = try c.result("cache.incr", #"{"key":"i","by":-5,"initial":10,"expiration":{"seconds":600}}"#)
        #expect(first["value"]?.int64 == 5)
        let expiresAt = try #require(first["expiresAt"]?.int64)
        // An existing entry keeps its lifetime.
        let second = try c.result("cache.incr", #"{"key":"i","by":3}"#)
        #expect(second["value"]?.int64 == 8)
        #expect(second["expiresAt"]?.int64 == expiresAt)
        #expect(second["version"]?.int64 != first["version"]?.int64)

        _ = try c.result("cache.set", #"{"key":"text","value":"abc"}"#)
        let notInt = try c.call("cache.incr", #"{"key":"text"}"#)
        #expect(notInt["error"]?["code"]?.int64 == -32602)
        #expect(notInt["error"]?["data"]?["reason"]?.string == "notAnInteger")
        _ = try c.result("cache.set", #"{"key":"real","value":1.5,"encoding":"json"}"#)
        #expect(try c.call("cache.incr", #"{"key":"real"}"#)["error"]?["data"]?["reason"]?.string == "notAnInteger")

        _ = try c.result("cache.set", #"{"key":"big","value":9223372036854775807,"encoding":"json"}"#)
        let overflow = try c.call("cache.incr", #"{"key":"big"}"#)
        #expect(overflow["error"]?["data"]?["reason"]?.string == "integerOverflow")
        // Nothing was stored by the refused increment.
        #expect(try c.result("cache.get", #"{"key":"big"}"#)["value"]?.int64 == Int64.max)
        let down = try c.result("cache.incr", #"{"key":"big","by":-9223372036854775807}"#)
        #expect(down["value"]?.int64 == 0)
    }

    @Test func compareAndSetRefusesAStaleVersion() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let c = try daemon.client()
        let v1 = try #require(try c.result("cache.set", #"{"key":"k","value":"one"}"#)["version"]?.int64)
        let v2 = try #require(try c.result("cache.set", #"{"key":"k","value":"two"}"#)["version"]?.int64)
        #expect(v2 != v1)
        #expect(try c.result("cache.get", #"{"key":"k"}"#)["version"]?.int64 == v2)
        #expect(try c.result("cache.describe", #"{"key":"k"}"#)["version"]?.int64 == v2)

        let stale = try c.result("cache.cas", #"{"key":"k","value":"three","version":\#(v1)}"#)
        #expect(stale["stored"]?.bool == false)
        #expect(stale["version"]?.int64 == v2)
        #expect(try c.result("cache.get", #"{"key":"k"}"#)["value"]?.string == "two")

        let fresh = try c.result("cache.cas", #"{"key":"k","value":"three","version":\#(v2)}"#)
        #expect(fresh["stored"]?.bool == true)
        let v3 = try #require(fresh["version"]?.int64)
        #expect(v3 != v2)
        #expect(try c.result("cache.get", #"{"key":"k"}"#)["value"]?.string == "three")

        let gone = try c.result("cache.cas", #"{"key":"absent","value":"x","version":\#(v3)}"#)
        #expect(gone["stored"]?.bool == false)
        #expect(gone["version"]?.isNull == true)
        #expect(try c.call("cache.cas", #"{"key":"k","value":"x"}"#)["error"]?["data"]?["reason"]?.string == "missingParam")
    }

    @Test func versionsSurviveARestartFromTheFiles() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let c = try daemon.client()
        let version = try #require(try c.result("cache.set", #"{"key":"v","value":"x"}"#)["version"]?.int64)
        daemon.stop(signal: SIGKILL)
        let again = try DaemonProcess(root: daemon.root)
        defer { again.stop(signal: SIGKILL) }
        let c2 = try again.client()
        let got = try c2.result("cache.get", #"{"key":"v"}"#)
        #expect(got["cacheType"]?.string == "disk")
        #expect(got["version"]?.int64 == version)
        // A write after the restart gets a newer version.
        let next = try #require(try c2.result("cache.set", #"{"key":"v","value":"y"}"#)["version"]?.int64)
        #expect(next > version)
    }
}

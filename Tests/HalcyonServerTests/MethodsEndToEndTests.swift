// Every method of the protocol, driven through a real halcyond over its socket.

import Foundation
import HalcyonJSON
import Testing

@Suite("Methods end to end", .serialized, .timeLimit(.minutes(1)))
struct MethodsEndToEndTests {
    @Test func pingAndInfo() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        #expect(try client.result("server.ping")["pong"]?.bool == true)
        let info = try client.result("server.info")
        #expect(info["name"]?.string == "halcyond")
        #expect(info["protocol"]?.int64 == 1)
        #expect(info["socket"]?.string == daemon.socketPath)
        #expect(info["pid"]?.int64 == Int64(daemon.process.processIdentifier))
        #expect(info["limits"]?["maxBatch"]?.int64 == 1000)
        #expect(info["defaults"]?["expiration"]?["days"]?.int64 == 7)
    }

    @Test func setGetInEveryEncoding() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()

        let set = try client.result("cache.set", #"{"key":"u","value":"héllo\n\"q\""}"#)
        #expect(set["stored"]?.bool == true)
        #expect(set["size"]?.int64 == Int64("héllo\n\"q\"".utf8.count))
        let got = try client.result("cache.get", #"{"key":"u"}"#)
        #expect(got["found"]?.bool == true)
        #expect(got["value"]?.string == "héllo\n\"q\"")
        #expect(got["encoding"]?.string == "utf8")
        #expect(got["cacheType"]?.string == "memory")

        _ = try client.result("cache.set", #"{"key":"b","value":"AP8Q","encoding":"base64"}"#)
        let bin = try client.result("cache.get", #"{"key":"b"}"#)
        #expect(bin["value"]?.string == "AP8Q")
        #expect(bin["encoding"]?.string == "base64")
        // Bytes that are not UTF-8 cannot be shown as utf8: -32004, never a lossy reply.
        let lossy = try client.call("cache.get", #"{"key":"b","encoding":"utf8"}"#)
        #expect(lossy["error"]?["code"]?.int64 == -32004)

        _ = try client.result("cache.set", #"{"key":"j","value":{"a":[1,2,{"b":null}]},"encoding":"json"}"#)
        let json = try client.result("cache.get", #"{"key":"j"}"#)
        #expect(json["encoding"]?.string == "json")
        #expect(json["value"]?["a"]?.array?.count == 3)
        let asText = try client.result("cache.get", #"{"key":"j","encoding":"utf8"}"#)
        #expect(asText["value"]?.string == #"{"a":[1,2,{"b":null}]}"#)

        let miss = try client.result("cache.get", #"{"key":"nope"}"#)
        #expect(miss["found"]?.bool == false)
        #expect(miss["value"] == nil)
    }

    @Test func diskHitComesBackIntoMemory() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("cache.set", #"{"key":"k","value":"v"}"#)
        #expect(try client.result("cache.remove", #"{"key":"k","fromDisk":false}"#)["removed"]?.bool == true)
        #expect(try client.result("cache.isCached", #"{"key":"k"}"#)["cacheType"]?.string == "disk")
        let fromDisk = try client.result("cache.get", #"{"key":"k"}"#)
        #expect(fromDisk["cacheType"]?.string == "disk")
        #expect(fromDisk["value"]?.string == "v")
        #expect(try client.result("cache.get", #"{"key":"k"}"#)["cacheType"]?.string == "memory")
        let onlyMemory = try client.result("cache.get", #"{"key":"k","fromMemoryOnly":true}"#)
        #expect(onlyMemory["cacheType"]?.string == "memory")
    }

    @Test func toDiskFalseStaysInMemory() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("cache.set", #"{"key":"m","value":"v","toDisk":false}"#)
        #expect(try client.result("cache.isCached", #"{"key":"m"}"#)["cacheType"]?.string == "memory")
        #expect(try client.result("cache.totalSize")["count"]?.int64 == 0)
    }

    @Test func describeTouchRemove() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let now = Date().timeIntervalSince1970
        _ = try client.result("cache.set", #"{"key":"d","value":"12345","expiration":{"seconds":100}}"#)
        let described = try client.result("cache.describe", #"{"key":"d"}"#)
        #expect(described["found"]?.bool == true)
        #expect(described["size"]?.int64 == 5)
        #expect(described["encoding"]?.string == "utf8")
        let expiresAt = try #require(described["expiresAt"]?.double)
        #expect(expiresAt >= now + 99 && expiresAt <= now + 102)
        #expect(described["lastAccessAt"]?.double != nil)

        let touched = try client.result("cache.touch", #"{"key":"d","expiration":{"days":2}}"#)
        #expect(touched["touched"]?.bool == true)
        let newExpiry = try #require(touched["expiresAt"]?.double)
        #expect(newExpiry >= now + 2 * 86_400 - 1)
        #expect(try client.result("cache.touch", #"{"key":"absent"}"#)["touched"]?.bool == false)

        let never = try client.result("cache.set", #"{"key":"n","value":"x","expiration":"never"}"#)
        #expect(never["expiresAt"]?.isNull == true)

        #expect(try client.result("cache.remove", #"{"key":"d"}"#)["removed"]?.bool == true)
        #expect(try client.result("cache.remove", #"{"key":"d"}"#)["removed"]?.bool == false)
        let gone = try client.result("cache.describe", #"{"key":"d"}"#)
        #expect(gone["found"]?.bool == false)
        #expect(gone["cacheType"]?.string == "none")
    }

    @Test func expiredStoresNothingAndReferenceDateSeesExpiry() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let expired = try client.result("cache.set", #"{"key":"e","value":"x","expiration":"expired"}"#)
        #expect(expired["stored"]?.bool == false)
        #expect(try client.result("cache.get", #"{"key":"e"}"#)["found"]?.bool == false)

        _ = try client.result("cache.set", #"{"key":"f","value":"x","expiration":{"seconds":50},"toDisk":true}"#)
        let later = Date().timeIntervalSince1970 + 3600
        let isCached = try client.result("cache.isCached", #"{"key":"f","referenceDate":\#(later)}"#)
        #expect(isCached["cacheType"]?.string != "disk")
        let removed = try client.result("cache.removeExpired", #"{"memory":false,"referenceDate":\#(later)}"#)
        #expect(removed["removed"]?.int64 == 1)
    }

    @Test func clearTrimTotalSizeStats() throws {
        let daemon = try DaemonProcess(arguments: ["--disk-size-limit", "10KiB"])
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let value = String(repeating: "x", count: 1000)
        for i in 0..<8 {
            _ = try client.result("cache.set", #"{"key":"k\#(i)","value":"\#(value)"}"#)
        }
        let usage = try client.result("cache.totalSize")
        #expect(usage["count"]?.int64 == 8)
        #expect((usage["bytes"]?.int64 ?? 0) >= 8000)
        // Three more take the tier over 10 KiB: the store is followed by a trim to half.
        for i in 8..<11 {
            _ = try client.result("cache.set", #"{"key":"k\#(i)","value":"\#(value)"}"#)
        }
        let after = try client.result("cache.totalSize")
        #expect((after["bytes"]?.int64 ?? .max) <= 10 * 1024)
        let stats = try client.result("cache.stats")
        #expect((stats["disk"]?["evictions"]?.int64 ?? stats["evictions"]?.int64 ?? 0) > 0)
        #expect(stats["connections"]?.int64 == 1)

        let trim = try client.result("cache.trim")
        #expect(trim["totalSize"]?.int64 != nil)
        let cleared = try client.result("cache.clear")
        #expect((cleared["removed"]?.int64 ?? 0) > 0)
        #expect(try client.result("cache.totalSize")["count"]?.int64 == 0)
    }

    @Test func connectionConfigureEchoesSettings() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let r = try client.result(
            "connection.configure",
            #"{"callbackQueue":{"dispatch":{"concurrent":false,"qos":"utility"}},"loadDiskFileSynchronously":true}"#
        )
        #expect(r["callbackQueue"]?["dispatch"]?["qos"]?.string == "utility")
        #expect(r["loadDiskFileSynchronously"]?.bool == true)
        for policy in [#""mainAsync""#, #""mainCurrentOrAsync""#, #""untouch""#,
                       #"{"operationQueue":{"maxConcurrentOperationCount":2}}"#] {
            _ = try client.result("connection.configure", #"{"callbackQueue":\#(policy)}"#)
            _ = try client.result("cache.set", #"{"key":"p","value":"v"}"#)
            #expect(try client.result("cache.get", #"{"key":"p"}"#)["value"]?.string == "v")
        }
    }

    @Test func restartKeepsTheDiskTier() throws {
        let root = URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))")
        let first = try DaemonProcess(root: root)
        let client = try first.client()
        _ = try client.result("cache.set", #"{"key":"persist","value":"AAEC","encoding":"base64"}"#)
        _ = try client.result("cache.set", #"{"key":"doc","value":[1,"two"],"encoding":"json"}"#)
        client.close()
        #expect(first.stop() == 0)

        let second = try DaemonProcess(root: root)
        defer { second.cleanUp() }
        let again = try second.client()
        let bin = try again.result("cache.get", #"{"key":"persist"}"#)
        #expect(bin["cacheType"]?.string == "disk")
        #expect(bin["value"]?.string == "AAEC")
        #expect(bin["encoding"]?.string == "base64")
        #expect(try again.result("cache.get", #"{"key":"doc"}"#)["encoding"]?.string == "json")
    }
}

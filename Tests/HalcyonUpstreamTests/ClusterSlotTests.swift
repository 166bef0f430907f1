// Slot hashing and the names Halcyon keeps beside a key: known CRC16 values, hash tags,
// and metadata keys that always share their key's slot.

import HalcyonUpstream
import HalcyonUpstreamTier
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ClusterSlotTests {
    @Test func crc16MatchesTheReferenceCheckValue() {
        // CRC-16/XMODEM's check value, and slots the Redis Cluster specification lists.
        #expect(ClusterSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(ClusterSlot(key: "foo").value == 12182)
        #expect(ClusterSlot(key: "").value == 0)
    }

    @Test func hashTagsFollowTheSpecification() {
        #expect(ClusterSlot(key: "{user1000}.following") == ClusterSlot(key: "user1000"))
        #expect(ClusterSlot(key: "foo{bar}{zap}") == ClusterSlot(key: "bar"))
        #expect(ClusterSlot(key: "foo{}{bar}") == ClusterSlot(key: "foo{}{bar}".utf8))
        #expect(ClusterSlot(key: "foo{}{bar}") != ClusterSlot(key: "bar"))
        #expect(ClusterSlot(key: "foo{{bar}}zap") == ClusterSlot(key: "{bar"))
        #expect(ClusterSlot(key: "{a") == ClusterSlot(key: Array("{a".utf8)))
    }

    @Test(arguments: ["plain", "user:1", "{tag}x", "a}b", "{}x", "{", "}", "x{}", "é{ü}", "", "}{a}", "{{a}}"])
    func metadataAndLeaseKeysShareTheKeySlot(key: String) {
        #expect(ClusterSlot(key: KeyLayout.meta(key)) == ClusterSlot(key: key))
        #expect(ClusterSlot(key: KeyLayout.lease(key)) == ClusterSlot(key: key))
        #expect(KeyLayout.meta(key).hasSuffix(KeyLayout.metaInfix + key))
        #expect(KeyLayout.meta(key) != KeyLayout.lease(key))
    }

    @Test func everySlotHasAShortTag() {
        for slot in 0..<ClusterSlot.count {
            let tag = KeyLayout.slotTag(for: ClusterSlot(slot))
            #expect(tag.count <= 3 && !tag.contains("}") && ClusterSlot(key: tag).value == slot)
        }
    }

    @Test func movedAddressesParse() {
        #expect(NodeAddress(hostPort: "127.0.0.1:7000") == .tcp(host: "127.0.0.1", port: 7000))
        #expect(NodeAddress(hostPort: "::1:7000") == .tcp(host: "::1", port: 7000))
        #expect(NodeAddress(hostPort: "[::1]:7000") == .tcp(host: "::1", port: 7000))
        #expect(NodeAddress(hostPort: "host") == nil)
        #expect(NodeAddress(hostPort: "host:0") == nil)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct UpstreamURLTests {
    @Test func formsAUserWrites() throws {
        #expect(try UpstreamURL("redis://127.0.0.1:7000") == UpstreamURL(address: .tcp(host: "127.0.0.1", port: 7000), username: nil, database: 0))
        #expect(try UpstreamURL("redis://cache@redis.internal/3") == UpstreamURL(address: .tcp(host: "redis.internal", port: 6379), username: "cache", database: 3))
        #expect(try UpstreamURL("redis://[::1]:6380") == UpstreamURL(address: .tcp(host: "::1", port: 6380), username: nil, database: 0))
        #expect(try UpstreamURL("unix:///run/redis/redis.sock").address == .unix(path: "/run/redis/redis.sock"))
    }

    @Test func refusals() {
        #expect(throws: UpstreamURL.Invalid.passwordInURL) { try UpstreamURL("redis://user:secret@host:6379") }
        #expect(throws: UpstreamURL.Invalid.unsupportedScheme) { try UpstreamURL("http://host") }
        #expect(throws: UpstreamURL.Invalid.self) { try UpstreamURL("redis://host:99999") }
        #expect(throws: UpstreamURL.Invalid.self) { try UpstreamURL("redis://host/x") }
        #expect(throws: UpstreamURL.Invalid.self) { try UpstreamURL("unix://relative.sock") }
    }
}

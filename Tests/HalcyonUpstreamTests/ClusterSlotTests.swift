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

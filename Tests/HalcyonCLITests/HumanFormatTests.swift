// The human renderings of results: sizes, expiries, past times and the stats table.

import HalcyonJSON
import Testing
@testable import halcyon

@Suite struct HumanFormatTests {
    @Test func sizesKeepTheExactCountBesideTheRoundedOne() {
        #expect(HumanFormat.size(0) == "0 bytes")
        #expect(HumanFormat.size(1) == "1 byte")
        #expect(HumanFormat.size(1023) == "1023 bytes")
        #expect(HumanFormat.size(1024) == "1 KiB (1024 bytes)")
        #expect(HumanFormat.size(1536) == "1.5 KiB (1536 bytes)")
        #expect(HumanFormat.size(1_048_575) == "1024 KiB (1048575 bytes)")
        #expect(HumanFormat.size(5 << 30) == "5 GiB (5368709120 bytes)")
        #expect(HumanFormat.size(3 << 50) == "3072 TiB (3377699720527872 bytes)")
    }

    @Test func expiriesCountDownAndNameTheInstant() {
        let now = 1_795_428_000.0
        #expect(HumanFormat.expiry(nil, now: now) == "never")
        #expect(HumanFormat.expiry(.string("x"), now: now) == "never")
        #expect(HumanFormat.expiry(.real(now + 600.99), now: now) == "in 10m (2026-11-23 10:10:00 UTC)")
        #expect(HumanFormat.expiry(.real(now - 3), now: now) == "expired 3s ago (2026-11-23 09:59:57 UTC)")
        #expect(HumanFormat.residency(nil, now: now) == "in memory for good")
        #expect(HumanFormat.residency(.real(now - 5), now: now) == "in memory for 0s")
        #expect(HumanFormat.residency(.real(now + 300), now: now) == "in memory for 5m")
    }

    @Test func pastTimesWithinASecondAreJustNow() {
        let now = 1_795_428_000.0
        #expect(HumanFormat.pastTime(nil, now: now) == "unknown")
        #expect(HumanFormat.pastTime(.real(now + 0.4), now: now) == "just now (2026-11-23 10:00:00 UTC)")
        #expect(HumanFormat.pastTime(.real(now - 3), now: now) == "3s ago (2026-11-23 09:59:57 UTC)")
        #expect(HumanFormat.pastTime(.real(now + 90), now: now) == "in 1m 30s (2026-11-23 10:01:30 UTC)")
    }

    @Test func theTableFlattensNestedMembersInOrder() throws {
        let stats = try JSONValue.parse(#"""
            {"uptime": 7500, "memory": {"hits": 3, "bytes": 2048, "entries": {}}, "name": "default",
             "disk": {"sizeLimit": 100, "lastAccessAt": 1795428000}}
            """#).get()
        #expect(HumanFormat.table(stats) == """
            uptime             7500 (2h 5m)
            memory.hits        3
            memory.bytes       2 KiB (2048 bytes)
            memory.entries     {}
            name               default
            disk.sizeLimit     100
            disk.lastAccessAt  1795428000 (2026-11-23 10:00:00 UTC)
            """)
    }
}

// The unwritten table's journal order: what the materializer drains first and what the
// checkpoint waits on, through replacement, copy forward, removal, slot reuse and updates.

import Foundation
import Testing

@testable import HalcyonCache

@Suite("UnwrittenTable", .timeLimit(.minutes(1)))
struct UnwrittenTableTests {
    typealias Table = LocalStore.UnwrittenTable

    static let now = Date(timeIntervalSince1970: 1_000_000)

    /// An entry of `key` live for a minute from `now`, its record at `offset` of `segment`.
    static func entry(_ key: CacheKey, _ offset: UInt64, segment: UInt64 = 1, size: Int = 10, version: UInt64 = 1) -> LocalStore.Unwritten {
        LocalStore.Unwritten(
            key: key, entry: CacheEntry(bytes: [UInt8](repeating: 7, count: size), version: version),
            expiresAt: now.addingTimeInterval(60), timeToLive: 60, countedFrom: now,
            start: Journal.Position(segment: segment, offset: offset))
    }

    static func order(_ t: Table) -> [CacheKey] { t.all.map(\.key) }

    @Test func aSetOfAKeyMovesItToTheNewestEndAndReplacesItsBytes() {
        var t = Table()
        t.put(Self.entry("a", 10))
        t.put(Self.entry("b", 20))
        t.put(Self.entry("c", 30))
        #expect(Self.order(t) == ["a", "b", "c"])
        #expect(t.oldestStart == Journal.Position(segment: 1, offset: 10))
        t.put(Self.entry("a", 40, size: 100, version: 2))
        #expect(Self.order(t) == ["b", "c", "a"])
        #expect(t.count == 3)
        #expect(t["a"]?.entry.version == 2)
        #expect(t.bytes == (10 + 1 + 64) * 2 + (100 + 1 + 64))
        #expect(t.oldest()?.key == "b")
    }

    @Test func aCopiedForwardRecordMovesItsEntryToTheNewestEnd() {
        var t = Table()
        for (i, key) in (["a", "b", "c"] as [CacheKey]).enumerated() { t.put(Self.entry(key, UInt64(i + 1) * 10)) }
        t.moveStart("a", to: Journal.Position(segment: 2, offset: 5))
        #expect(Self.order(t) == ["b", "c", "a"])
        #expect(t["a"]?.start == Journal.Position(segment: 2, offset: 5))
        t.moveStart("missing", to: Journal.Position(segment: 2, offset: 9))
        #expect(t.count == 3)
    }

    @Test func removalsUnlinkAndFreedSlotsJoinAtTheNewestEnd() {
        var t = Table()
        for (i, key) in (["a", "b", "c", "d"] as [CacheKey]).enumerated() { t.put(Self.entry(key, UInt64(i + 1) * 10)) }
        #expect(t.remove("a")?.key == "a")
        #expect(t.remove("c")?.key == "c")
        #expect(t.remove("c") == nil)
        #expect(Self.order(t) == ["b", "d"])
        t.put(Self.entry("e", 50))
        t.put(Self.entry("f", 60))
        #expect(Self.order(t) == ["b", "d", "e", "f"])
        t.remove("f", ifVersion: 9)
        #expect(t.contains("f"))
        t.remove("f", ifVersion: 1)
        #expect(!t.contains("f"))
        #expect(t.bytes == 3 * (10 + 1 + 64))
        t.removeAll()
        #expect(t.count == 0 && t.bytes == 0 && t.oldest() == nil && t.all.isEmpty)
        t.put(Self.entry("g", 70))
        #expect(Self.order(t) == ["g"])
    }

    @Test func oldestLiveStopsAtTheCurrentSegmentAnExpiredEntryOrTheLimit() {
        var t = Table()
        t.put(Self.entry("a", 10))
        t.put(Self.entry("b", 20))
        t.put(Self.entry("c", 5, segment: 2))
        t.put(Self.entry("d", 30))
        #expect(t.oldestLive(limit: 10, at: Self.now, before: 2).map(\.key) == ["a", "b"])
        #expect(t.oldestLive(limit: 1, at: Self.now, before: 3).map(\.key) == ["a"])
        #expect(t.oldestLive(limit: 10, at: Self.now, before: 3).map(\.key) == ["a", "b", "c", "d"])
        _ = t.update("b") { $0.expiresAt = Self.now }
        #expect(t.oldestLive(limit: 10, at: Self.now, before: 3).map(\.key) == ["a"])
        #expect(t.oldestLive(limit: 10, at: Self.now.addingTimeInterval(61), before: 3).isEmpty)
    }

    @Test func anUpdateKeepsTheEntrysPlace() {
        var t = Table()
        t.put(Self.entry("a", 10))
        t.put(Self.entry("b", 20))
        let updated = t.update("a") { $0.timeToLive = nil }
        #expect(updated?.timeToLive == nil)
        #expect(t.update("missing") { $0.timeToLive = 1 } == nil)
        #expect(Self.order(t) == ["a", "b"])
        #expect(t.liveKeys(prefix: "a", at: Self.now) == ["a"])
        #expect(Set(t.keys) == ["a", "b"])
    }
}

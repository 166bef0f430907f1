// A key is its bytes: canonically equal keys with different UTF-8 (NFC and NFD é, the
// Ångström sign and Å, precomposed and conjoining Hangul) are two keys to the key type and
// to every table of the storage engine, and prefixes and order are those of the bytes.

import Foundation
import Testing

@testable import HalcyonCache

/// The pairs of keys that are one `String` and two byte strings.
enum CanonicalPairs {
    static let all: [(String, String)] = [
        ("caf\u{E9}", "cafe\u{301}"),
        ("\u{212B}", "\u{C5}"),
        ("\u{D55C}", "\u{1112}\u{1161}\u{11AB}"),
    ]
}

@Suite("CacheKey", .timeLimit(.minutes(1)))
struct CacheKeyTests {
    @Test(arguments: CanonicalPairs.all)
    func canonicallyEqualTextsAreTwoKeys(pair: (String, String)) {
        let (a, b) = pair
        #expect(a == b, "the pair is one String: the case this type exists for")
        #expect(!a.utf8.elementsEqual(b.utf8))
        #expect(CacheKey(a) != CacheKey(b))
        #expect(CacheKey(a) == CacheKey(utf8: Array(a.utf8)))
        #expect(Set([CacheKey(a), CacheKey(b)]).count == 2)
        var table: [CacheKey: Int] = [:]
        table[CacheKey(a)] = 1
        table[CacheKey(b)] = 2
        #expect(table[CacheKey(a)] == 1 && table[CacheKey(b)] == 2)
        #expect(Array(CacheKey(a).utf8) == Array(a.utf8), "the bytes are kept as given, never normalized")
    }

    @Test func equalBytesHashEqually() {
        let key = CacheKey("k\u{301}")
        let copy = CacheKey(utf8: [0x6B, 0xCC, 0x81])
        #expect(key == copy)
        #expect(key.hashValue == copy.hashValue)
        let long = String(repeating: "x", count: 300)
        #expect(CacheKey(long) == CacheKey(utf8: Array(long.utf8)))
        #expect(CacheKey(long) != CacheKey(long + "y"))
        #expect(CacheKey("") == CacheKey(utf8: [UInt8]()))
    }

    /// Equality by bytes through every way a key is held: inline or on the heap, made from
    /// a literal, from bytes, from a substring of a longer text, at each length around the
    /// inline limit (15 bytes) and the short-compare limit, keys that differ in one byte
    /// at either end.
    @Test func equalityIsByBytesWhateverHoldsThem() {
        for length in [0, 1, 7, 8, 14, 15, 16, 17, 31, 32, 33, 64] {
            let text = String((0..<length).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) })
            let keys = [
                CacheKey(text), CacheKey(utf8: Array(text.utf8)),
                CacheKey(String(("<" + text + ">").dropFirst().dropLast())),
                CacheKey(NSString(string: text) as String),
            ]
            for a in keys { for b in keys { #expect(a == b, "\(length)") } }
            guard length > 0 else { continue }
            var first = Array(text.utf8), last = Array(text.utf8)
            first[0] ^= 1
            last[length - 1] ^= 1
            for other in [CacheKey(utf8: first), CacheKey(utf8: last)] {
                for a in keys { #expect(a != other && other != a, "\(length)") }
            }
        }
    }

    @Test func prefixesAreBytePrefixes() {
        let decomposed = CacheKey("cafe\u{301}")
        #expect(!"cafe\u{301}".hasPrefix("cafe"), "String.hasPrefix compares characters")
        #expect(decomposed.hasPrefix("cafe"))
        #expect(decomposed.hasPrefix("cafe\u{301}"))
        #expect(decomposed.hasPrefix(""))
        #expect(!decomposed.hasPrefix("caf\u{E9}"))
        #expect(!CacheKey("caf\u{E9}").hasPrefix("cafe"))
        #expect(!CacheKey("ab").hasPrefix("abc"))
    }

    @Test func orderIsByteOrder() {
        // As Strings, "e\u{301}" sorts as "é" (U+00E9), after "f"; as bytes "e" < "f".
        let keys: [CacheKey] = ["f", "e\u{301}", "\u{E9}", "e", "ea"]
        #expect(keys.sorted().map(\.string) == ["e", "ea", "e\u{301}", "f", "\u{E9}"])
        #expect(CacheKey("a") < CacheKey("ab"))
        #expect(!(CacheKey("ab") < CacheKey("ab")))
    }

    @Test func theMemoryTierKeepsBothKeysOfEachPair() {
        let (memory, _) = MemoryStorageTests.make(shards: 16)
        for (i, (a, b)) in CanonicalPairs.all.enumerated() {
            memory.store(CacheEntry(bytes: [UInt8(i), 1]), forKey: CacheKey(a))
            memory.store(CacheEntry(bytes: [UInt8(i), 2]), forKey: CacheKey(b))
            #expect(memory.value(forKey: CacheKey(a))?.bytes == [UInt8(i), 1])
            #expect(memory.value(forKey: CacheKey(b))?.bytes == [UInt8(i), 2])
        }
        #expect(memory.keys(prefix: "", memoryOnly: true).count == 6)
        #expect(memory.keys(prefix: "cafe", memoryOnly: true) == [CacheKey("cafe\u{301}")])
        #expect(memory.remove(forKey: CacheKey("\u{212B}")))
        #expect(memory.value(forKey: CacheKey("\u{C5}"))?.bytes == [1, 2])
    }

    @Test func theUnwrittenTableKeepsBothKeysOfEachPair() {
        var table = LocalStore.UnwrittenTable()
        var offset: UInt64 = 0
        for (a, b) in CanonicalPairs.all {
            for key in [a, b] {
                offset += 10
                table.put(UnwrittenTableTests.entry(CacheKey(key), offset))
            }
        }
        #expect(table.count == 6)
        #expect(table.liveKeys(prefix: "cafe", at: UnwrittenTableTests.now) == [CacheKey("cafe\u{301}")])
        _ = table.remove(CacheKey("caf\u{E9}"))
        #expect(table[CacheKey("cafe\u{301}")] != nil)
        #expect(table[CacheKey("caf\u{E9}")] == nil)
    }

    /// With plain file names a name is its key: two files, and the set of names the
    /// folder may hold keeps both, so removing one never hides the other.
    @Test(arguments: CanonicalPairs.all)
    func plainFileNamesOfAPairAreTwoFiles(pair: (String, String)) throws {
        let folder = DiskTestFolder()
        let disk = folder.backend { $0.usesHashedFileName = false }
        let (a, b) = (CacheKey(pair.0), CacheKey(pair.1))
        try disk.store(value: [1], forKey: a)
        try disk.store(value: [2], forKey: b)
        #expect(try disk.value(forKey: a)?.bytes == [1])
        #expect(try disk.value(forKey: b)?.bytes == [2])
        #expect(try disk.remove(forKey: b))
        #expect(try disk.value(forKey: a)?.bytes == [1], "\(a) is still in its file")
        #expect(try disk.listKeys().keys.map(\.key) == [a])
    }

    @Test func leasesOfEachKeyOfAPairAreTheirOwn() {
        let leases = Leases()
        for (a, b) in CanonicalPairs.all {
            guard case .granted = leases.acquire(key: CacheKey(a), owner: 1, ttl: 30, wait: 0, observed: 0, wake: { _ in }) else {
                Issue.record("no lease for \(a)"); continue
            }
            guard case .granted = leases.acquire(key: CacheKey(b), owner: 2, ttl: 30, wait: 0, observed: 0, wake: { _ in }) else {
                Issue.record("the lease of \(a) refused \(b)"); continue
            }
        }
    }
}

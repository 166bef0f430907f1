// The key index of the memory shards and the unwritten table: lookups by tag that ask the
// owner for the key, growth, and removals that shift later words back, checked against a
// plain dictionary.

import HalcyonTestSupport
import Testing

@testable import HalcyonCache

@Suite("SlotIndex", .timeLimit(.minutes(1)))
struct SlotIndexTests {
    /// The keys are small integers; `keys[slot]` is the key an owner keeps in that slot.
    struct Owner {
        var index = SlotIndex()
        var keys: [Int: Int] = [:]
        var slots: [Int: Int32] = [:]
        var nextSlot: Int32 = 0
        /// A tag per key: `tagBits` bits of it only, so that many keys share a tag and
        /// probe chains are long, cross each other and wrap around the table's end.
        let tagBits: Int

        func tag(_ key: Int) -> UInt32 {
            tagBits >= 32 ? UInt32(truncatingIfNeeded: key &* 0x9E37_79B9) : UInt32(key % (1 << tagBits)) &* 0x0101_0101
        }

        func find(_ key: Int) -> Int32? {
            index.find(tag(key)) { keys[Int($0)] == key }
        }

        mutating func insert(_ key: Int) {
            let slot = nextSlot
            nextSlot += 1
            keys[Int(slot)] = key
            slots[key] = slot
            index.insert(tag(key), slot: slot)
        }

        mutating func remove(_ key: Int) {
            let slot = slots.removeValue(forKey: key)!
            keys[Int(slot)] = nil
            index.remove(tag(key), slot: slot)
        }
    }

    @Test(arguments: [2, 5, 32])
    func everyOperationAgreesWithADictionary(tagBits: Int) {
        var owner = Owner(tagBits: tagBits)
        var rng = SplitMix64(seed: UInt64(tagBits))
        for step in 0..<20_000 {
            let key = Int(rng.next() % 300)
            switch rng.next() % 4 {
            case 0, 1:
                if owner.slots[key] == nil { owner.insert(key) }
            case 2:
                if owner.slots[key] != nil { owner.remove(key) }
            default:
                break
            }
            let probe = Int(rng.next() % 300)
            #expect(owner.find(probe) == owner.slots[probe], "step \(step), key \(probe)")
            #expect(owner.index.count == owner.slots.count)
        }
        // Every key still present is found, and the slots listed are exactly theirs.
        for (key, slot) in owner.slots { #expect(owner.find(key) == slot) }
        #expect(owner.index.slots.sorted() == owner.slots.values.sorted())
    }

    @Test func removingAnAbsentEntryChangesNothing() {
        var owner = Owner(tagBits: 3)
        for key in 0..<10 { owner.insert(key) }
        owner.index.remove(owner.tag(4), slot: 99)
        owner.index.remove(owner.tag(4), slot: owner.slots[5]!)
        #expect(owner.index.count == 10)
        for key in 0..<10 { #expect(owner.find(key) == owner.slots[key]) }
    }

    @Test func removeAllEmptiesTheIndexAndItFillsAgain() {
        var owner = Owner(tagBits: 32)
        for key in 0..<100 { owner.insert(key) }
        owner.index.removeAll()
        #expect(owner.index.count == 0 && owner.index.slots.isEmpty && owner.find(7) == nil)
        owner.index.insert(owner.tag(7), slot: 3)
        owner.keys[3] = 7
        #expect(owner.find(7) == 3)
    }

    @Test func aTagTakesTheUpperHalfOfTheHash() {
        #expect(SlotIndex.tag(of: Int(bitPattern: 0x1234_5678_9ABC_DEF0)) == 0x1234_5678)
        #expect(SlotIndex.tag(of: -1) == 0xFFFF_FFFF)
    }
}

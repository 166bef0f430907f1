// The index of a table whose entries live in an array of slots (a memory shard's nodes, the
// unwritten table's entries): from a key's hash to its slot, holding no key of its own. A
// lookup reads one word of the index and then the entry itself, which it reads anyway; a
// `Dictionary` from key to slot keeps the keys and the slots in two more arrays, so a hit
// paid a cache miss in each before it reached the entry.

/// An open-addressing index from 32-bit key tags to slots, with linear probing.
///
/// Each entry is one word: the tag in the upper half, the slot plus one in the lower half
/// (so an empty word is zero). A tag is 32 bits of the key's hash (`tag(of:)`); equal tags
/// say nothing of the keys, so `find` asks the caller whether the entry in a slot has the
/// key. The table holds at most three entries in four words and doubles when it would hold
/// more; a removal shifts the words after it back, so there are no tombstones and a probe
/// stops at the first empty word.
///
/// Threading: a plain value; its owner's lock guards it.
struct SlotIndex {
    /// A power of two long, or empty.
    private var words: [UInt64] = []
    /// Entries in the index.
    private(set) var count = 0

    /// The tag of a key whose `hashValue` is `hash`: its upper 32 bits, so that a table
    /// that picks a shard from the lower bits finds the tags of one shard still spread.
    /// `hashValue` is Swift's `Hasher`, seeded per process, so no client can choose keys
    /// whose tags collide.
    @inline(__always)
    static func tag(of hash: Int) -> UInt32 {
        UInt32(truncatingIfNeeded: UInt64(bitPattern: Int64(hash)) >> 32)
    }

    /// The slot of the entry with tag `tag` for which `isKey` is true, or nil.
    @inline(__always)
    func find(_ tag: UInt32, where isKey: (Int32) -> Bool) -> Int32? {
        guard count > 0 else { return nil }
        return words.withUnsafeBufferPointer { words in
            let mask = words.count - 1
            var i = Int(tag) & mask
            while true {
                let word = words[i]
                if word == 0 { return nil }
                if UInt32(truncatingIfNeeded: word >> 32) == tag {
                    let slot = Self.slot(in: word)
                    if isKey(slot) { return slot }
                }
                i = (i &+ 1) & mask
            }
        }
    }

    /// Enters `slot` under `tag`. The caller knows the key is not in the index yet.
    mutating func insert(_ tag: UInt32, slot: Int32) {
        precondition(slot >= 0 && slot < Int32.max, "a slot is an index into an array")
        if (count + 1) * 4 > words.count * 3 { grow() }
        Self.place(UInt64(tag) << 32 | UInt64(UInt32(slot) + 1), in: &words)
        count += 1
    }

    /// Removes the entry of `slot` entered under `tag`; nothing when there is none.
    mutating func remove(_ tag: UInt32, slot: Int32) {
        guard count > 0 else { return }
        let wanted = UInt64(tag) << 32 | UInt64(UInt32(slot) + 1)
        let mask = words.count - 1
        var hole = Int(tag) & mask
        while words[hole] != wanted {
            if words[hole] == 0 { return }
            hole = (hole &+ 1) & mask
        }
        // Every word after the hole up to the next empty one was placed by probing past
        // the hole's position or not: the first kind moves back into the hole, which
        // moves on to where it was.
        var next = (hole &+ 1) & mask
        while words[next] != 0 {
            let home = Int(UInt32(truncatingIfNeeded: words[next] >> 32)) & mask
            // Distances from `home` along the probe order: the word may move into the hole
            // when the hole lies on its way from `home` to where it is now.
            if (hole &- home) & mask < (next &- home) & mask {
                words[hole] = words[next]
                hole = next
            }
            next = (next &+ 1) & mask
        }
        words[hole] = 0
        count -= 1
    }

    mutating func removeAll() {
        words = []
        count = 0
    }

    /// Every slot in the index, in no particular order.
    var slots: [Int32] {
        var out: [Int32] = []
        out.reserveCapacity(count)
        for word in words where word != 0 { out.append(Self.slot(in: word)) }
        return out
    }

    @inline(__always)
    private static func slot(in word: UInt64) -> Int32 {
        Int32(truncatingIfNeeded: UInt32(truncatingIfNeeded: word) &- 1)
    }

    private static func place(_ word: UInt64, in words: inout [UInt64]) {
        let mask = words.count - 1
        var i = Int(UInt32(truncatingIfNeeded: word >> 32)) & mask
        while words[i] != 0 { i = (i &+ 1) & mask }
        words[i] = word
    }

    private mutating func grow() {
        let old = words
        words = Array(repeating: 0, count: Swift.max(16, old.count * 2))
        for word in old where word != 0 { Self.place(word, in: &words) }
    }
}

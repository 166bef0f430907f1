// An order over the slots of an array-backed store, and the slots' reuse: the doubly
// linked list and free list that the memory tier's recency (`MemoryStorage+LRU.swift`) and
// the unwritten table's journal order (`LocalStore+UnwrittenTable.swift`) both keep beside
// their values. The links live in their own array of 8-byte pairs, apart from the values, so
// moving a slot touches a few small lines instead of the values' own.

/// The slots in use, ordered from oldest to newest, and the slots free for reuse.
///
/// Threading: a plain value, kept inside its owner, under its owner's lock.
struct SlotOrder {
    static let none: Int32 = -1

    /// Each slot's neighbours; a free slot's are `none`.
    private var links: [(older: Int32, newer: Int32)] = []
    private var free: [Int32] = []
    /// The oldest slot in the order (`none` when empty).
    private(set) var oldest: Int32 = SlotOrder.none
    /// The newest slot in the order (`none` when empty).
    private(set) var newest: Int32 = SlotOrder.none

    /// A slot for a new value, linked as the newest: a freed one (`reused`: the caller
    /// overwrites its value), or the next index (the caller appends its value).
    mutating func take() -> (slot: Int32, reused: Bool) {
        let slot: Int32
        let reused: Bool
        if let freed = free.popLast() {
            (slot, reused) = (freed, true)
        } else {
            (slot, reused) = (Int32(links.count), false)
            links.append((Self.none, Self.none))
        }
        linkAsNewest(slot)
        return (slot, reused)
    }

    /// Takes `slot` out of the order and keeps it for reuse.
    mutating func release(_ slot: Int32) {
        unlink(slot)
        free.append(slot)
    }

    /// Makes `slot` the newest.
    mutating func moveToNewest(_ slot: Int32) {
        guard newest != slot else { return }
        unlink(slot)
        linkAsNewest(slot)
    }

    /// The slot after `slot` towards the newest (`none` at the newest).
    func newer(than slot: Int32) -> Int32 { links[Int(slot)].newer }

    /// Forgets every slot.
    mutating func removeAll() {
        self = SlotOrder()
    }

    private mutating func linkAsNewest(_ slot: Int32) {
        links[Int(slot)] = (older: newest, newer: Self.none)
        if newest != Self.none { links[Int(newest)].newer = slot }
        newest = slot
        if oldest == Self.none { oldest = slot }
    }

    private mutating func unlink(_ slot: Int32) {
        let (older, newer) = links[Int(slot)]
        if older != Self.none { links[Int(older)].newer = newer } else { oldest = newer }
        if newer != Self.none { links[Int(newer)].older = older } else { newest = older }
        links[Int(slot)] = (Self.none, Self.none)
    }
}

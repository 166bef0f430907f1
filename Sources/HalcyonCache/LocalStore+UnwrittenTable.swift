// The unwritten table's storage: the entries by key, and their order by journal record,
// oldest first, which the materializer drains from and the checkpoint waits on. The order
// is a `SlotOrder` over the entries' slots, as the memory tier keeps its recency: a set of a
// key already in the table replaces its entry in place and moves it to the newest end, so
// the order holds exactly one place per entry and nothing superseded is ever walked.
//
// Every new record start is the journal's newest (a group's apply, a copy forward, a
// rebuild, replay, all in journal order), so appending at the newest end keeps the order
// sorted by start.
//
// Why not a queue of one item per set: the materializer would walk every superseded item
// (Benchmarks/RESULTS.md has the profile that showed it).

import Foundation

extension LocalStore {
    /// The unwritten entries by key, in journal order. By key, not by file name: a set
    /// then never hashes its key to a file name (SHA-256) on its way, and a short key
    /// hashes and compares inline; only the key listing and replay need the names.
    ///
    /// Threading: a plain value, kept in `WriteBehind.table` (a `Locked`).
    struct UnwrittenTable {
        /// The entries' slots by their keys' tags; the keys are in the entries.
        private var index = SlotIndex()
        /// Entries by slot; a free slot holds a placeholder until it is reused.
        private var slots: [Unwritten] = []
        /// The slots in journal order of their records.
        private var order = SlotOrder()
        private(set) var bytes = 0

        var count: Int { index.count }

        /// The slot of `key`, whose tag is `tag`.
        @inline(__always)
        private func slot(_ key: CacheKey, tag: UInt32) -> Int32? {
            index.find(tag) { slots[Int($0)].key == key }
        }

        @inline(__always)
        private static func tag(_ key: CacheKey) -> UInt32 { SlotIndex.tag(of: key.hashValue) }

        subscript(key: CacheKey) -> Unwritten? {
            guard let slot = slot(key, tag: Self.tag(key)) else { return nil }
            return slots[Int(slot)]
        }

        func contains(_ key: CacheKey) -> Bool { slot(key, tag: Self.tag(key)) != nil }

        /// Every entry, oldest record first.
        var all: [Unwritten] {
            var out: [Unwritten] = []
            out.reserveCapacity(count)
            var slot = order.oldest
            while slot != SlotOrder.none {
                out.append(slots[Int(slot)])
                slot = order.newer(than: slot)
            }
            return out
        }

        var keys: [CacheKey] { index.slots.map { slots[Int($0)].key } }

        /// Enters `e`, replacing any entry of its key; its record is the newest.
        mutating func put(_ e: consuming Unwritten) {
            let size = e.bytes
            let tag = Self.tag(e.key)
            if let slot = slot(e.key, tag: tag) {
                let i = Int(slot)
                bytes += size - slots[i].bytes
                slots[i] = consume e
                order.moveToNewest(slot)
                return
            }
            let (slot, reused) = order.take()
            index.insert(tag, slot: slot)
            if reused { slots[Int(slot)] = consume e } else { slots.append(consume e) }
            bytes += size
        }

        /// The entry of `key` now has its record at `start`, the journal's newest
        /// (appended anew: see `WriteBehind.copyForward` and `WriteBehind.rebuild`).
        mutating func moveStart(_ key: CacheKey, to start: Journal.Position) {
            guard let slot = slot(key, tag: Self.tag(key)) else { return }
            slots[Int(slot)].start = start
            order.moveToNewest(slot)
        }

        /// Up to `limit` entries from the oldest, in journal order, while each is live at
        /// `now` and its record lies before `before` (the segment being written); stops at
        /// the first that is not.
        func oldestLive(limit: Int, at now: Date, before segment: UInt64) -> [Unwritten] {
            var out: [Unwritten] = []
            var slot = order.oldest
            while out.count < limit, slot != SlotOrder.none {
                let e = slots[Int(slot)]
                guard e.start.segment < segment, e.isLive(at: now), e.expiresAt > e.countedFrom else { break }
                out.append(e)
                slot = order.newer(than: slot)
            }
            return out
        }

        /// The entry with the oldest journal record.
        func oldest() -> Unwritten? {
            order.oldest == SlotOrder.none ? nil : slots[Int(order.oldest)]
        }

        /// Where the oldest record of the table starts.
        var oldestStart: Journal.Position? {
            order.oldest == SlotOrder.none ? nil : slots[Int(order.oldest)].start
        }

        @discardableResult
        mutating func remove(_ key: CacheKey) -> Unwritten? {
            let tag = Self.tag(key)
            guard let slot = slot(key, tag: tag) else { return nil }
            return remove(slot, tag: tag)
        }

        /// Removes the entry in `slot`, whose key's tag is `tag`.
        @discardableResult
        private mutating func remove(_ slot: Int32, tag: UInt32) -> Unwritten {
            index.remove(tag, slot: slot)
            let i = Int(slot)
            let old = slots[i]
            order.release(slot)
            // The slot keeps no reference to the value until it is reused.
            slots[i] = Unwritten.placeholder
            bytes -= old.bytes
            return old
        }

        /// Removes `key` only if it still holds `version` (the one just written).
        mutating func remove(_ key: CacheKey, ifVersion version: UInt64) {
            let tag = Self.tag(key)
            guard let slot = slot(key, tag: tag), slots[Int(slot)].entry.version == version else { return }
            remove(slot, tag: tag)
        }

        mutating func removeAll() {
            self = UnwrittenTable()
        }

        mutating func update(_ key: CacheKey, _ body: (inout Unwritten) -> Void) -> Unwritten? {
            guard let slot = slot(key, tag: Self.tag(key)) else { return nil }
            let i = Int(slot)
            let (start, before) = (slots[i].start, slots[i].bytes)
            body(&slots[i])
            precondition(slots[i].start == start, "an update keeps the entry's place in the journal")
            bytes += slots[i].bytes - before
            return slots[i]
        }

        /// The live entries whose keys start with `prefix`.
        func liveKeys(prefix: CacheKey, at now: Date) -> [CacheKey] {
            index.slots.compactMap { slot in
                let e = slots[Int(slot)]
                return e.isLive(at: now) && e.key.hasPrefix(prefix) ? e.key : nil
            }
        }
    }
}

extension LocalStore.Unwritten {
    /// What a free slot of the table holds: no key, no bytes.
    static let placeholder = LocalStore.Unwritten(
        key: "", entry: CacheEntry(bytes: []), expiresAt: .distantPast, timeToLive: nil, countedFrom: .distantPast,
        start: Journal.Position(segment: 0, offset: 0))
}

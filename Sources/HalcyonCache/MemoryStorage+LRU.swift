// One shard of the memory tier: a hash map into an intrusive doubly linked list kept in
// one array, so lookup, move-to-front, insert and evict-oldest are all O(1) and no node
// is a separate heap object (no retain/release traffic on the hot read path).
//
// The struct itself is not thread-safe: it is only ever touched inside its shard's
// `Locked` (see `MemoryStorage.Backend`).

import Foundation

extension MemoryStorage {
    /// One stored entry and its place in the recency list.
    struct Node {
        var key: String
        var entry: CacheEntry
        /// The expiration the entry was stored with, kept so a `.cacheTime` read can
        /// restart the same span from the read's instant.
        var expiration: StorageExpiration
        var expiresAt: Date
        var lastAccess: Date
        /// Towards the most recently used end; `nil` at the head.
        var newer: Int32
        /// Towards the least recently used end; `nil` at the tail.
        var older: Int32

        var cost: Int { entry.bytes.count }

        func meta() -> Meta {
            Meta(size: entry.bytes.count, flags: entry.flags, expiration: expiresAt, lastAccess: lastAccess)
        }
    }

    /// The mutable state of one shard. Only used inside the shard's lock.
    struct LRUState {
        static let none: Int32 = -1

        private(set) var index: [String: Int32] = [:]
        private var nodes: [Node] = []
        private var free: [Int32] = []
        /// Most recently used.
        private(set) var head: Int32 = LRUState.none
        /// Least recently used: the next eviction victim.
        private(set) var tail: Int32 = LRUState.none
        private(set) var totalCost = 0
        var count: Int { index.count }

        // Counters for this shard; summed by `Backend.stats`. Kept per shard so that
        // counting a hit never writes a cache line that another shard's readers share.
        var hits = 0
        var misses = 0
        var evictions = 0
        var expirations = 0

        subscript(slot: Int32) -> Node {
            get { nodes[Int(slot)] }
        }

        /// The slot of the least recently used entry and its last access, if any.
        var oldest: (slot: Int32, lastAccess: Date)? {
            tail == LRUState.none ? nil : (tail, nodes[Int(tail)].lastAccess)
        }

        func slot(forKey key: String) -> Int32? { index[key] }

        /// Inserts or replaces `key`, makes it the most recently used. Returns the change in cost.
        mutating func set(
            key: String, entry: CacheEntry, expiration: StorageExpiration, expiresAt: Date, now: Date
        ) -> (costDelta: Int, countDelta: Int) {
            if let slot = index[key] {
                let i = Int(slot)
                let old = nodes[i].cost
                nodes[i].entry = entry
                nodes[i].expiration = expiration
                nodes[i].expiresAt = expiresAt
                nodes[i].lastAccess = now
                moveToFront(slot)
                totalCost += entry.bytes.count - old
                return (entry.bytes.count - old, 0)
            }
            let node = Node(
                key: key, entry: entry, expiration: expiration, expiresAt: expiresAt, lastAccess: now,
                newer: LRUState.none, older: LRUState.none)
            let slot: Int32
            if let reused = free.popLast() {
                slot = reused
                nodes[Int(slot)] = node
            } else {
                slot = Int32(nodes.count)
                nodes.append(node)
            }
            index[key] = slot
            linkAtFront(slot)
            totalCost += node.cost
            return (node.cost, 1)
        }

        /// Marks `slot` used now and optionally moves its expiration.
        mutating func markRead(_ slot: Int32, now: Date, extending: ExpirationExtending) {
            let i = Int(slot)
            nodes[i].lastAccess = now
            switch extending {
            case .none:
                break
            case .cacheTime:
                nodes[i].expiresAt = nodes[i].expiration.estimatedExpirationSince(now)
            case .expirationTime(let expiration):
                nodes[i].expiration = expiration
                nodes[i].expiresAt = expiration.estimatedExpirationSince(now)
            }
            moveToFront(slot)
        }

        /// Gives `slot` a new expiration counted from `now`; does not count as a read.
        mutating func setExpiration(_ slot: Int32, _ expiration: StorageExpiration, now: Date) -> Date {
            let i = Int(slot)
            nodes[i].expiration = expiration
            nodes[i].expiresAt = expiration.estimatedExpirationSince(now)
            return nodes[i].expiresAt
        }

        /// Unlinks and frees `slot`; returns the removed node's cost.
        @discardableResult
        mutating func remove(_ slot: Int32) -> Int {
            let i = Int(slot)
            unlink(slot)
            let cost = nodes[i].cost
            index[nodes[i].key] = nil
            // Drop the payload now; the slot's storage is reused by a later insert.
            nodes[i].entry = CacheEntry(bytes: [])
            nodes[i].key = ""
            free.append(slot)
            totalCost -= cost
            return cost
        }

        /// Removes every entry; returns how many there were.
        mutating func removeAll() -> Int {
            let removed = index.count
            index = [:]
            nodes = []
            free = []
            head = LRUState.none
            tail = LRUState.none
            totalCost = 0
            return removed
        }

        /// The slots whose expiration is at or before `date`.
        func expiredSlots(at date: Date) -> [Int32] {
            index.values.filter { nodes[Int($0)].expiresAt <= date }
        }

        private mutating func moveToFront(_ slot: Int32) {
            guard head != slot else { return }
            unlink(slot)
            linkAtFront(slot)
        }

        private mutating func linkAtFront(_ slot: Int32) {
            let i = Int(slot)
            nodes[i].newer = LRUState.none
            nodes[i].older = head
            if head != LRUState.none { nodes[Int(head)].newer = slot }
            head = slot
            if tail == LRUState.none { tail = slot }
        }

        private mutating func unlink(_ slot: Int32) {
            let i = Int(slot)
            let newer = nodes[i].newer
            let older = nodes[i].older
            if newer != LRUState.none { nodes[Int(newer)].older = older } else { head = older }
            if older != LRUState.none { nodes[Int(older)].newer = newer } else { tail = newer }
            nodes[i].newer = LRUState.none
            nodes[i].older = LRUState.none
        }
    }
}

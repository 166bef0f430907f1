// One shard of the memory tier: an index of key tags (`SlotIndex`) into an array of nodes,
// ordered by recency with a `SlotOrder` beside them, so lookup, move-to-front, insert and
// evict-oldest are all O(1) and no node is a separate heap object (no retain/release
// traffic on the hot read path).
//
// The struct itself is not thread-safe: it is only ever touched inside its shard's
// `Locked` (see `MemoryStorage.Backend`).

import Foundation

extension MemoryStorage {
    /// One stored entry and its place in the recency list.
    ///
    /// Two instants bound a node. `expiresAt` is the entry's *lifetime*: the instant after
    /// which no read returns the entry from either tier. `residentUntil` is the node's
    /// *residency*: how long the bytes may stay in RAM (`memoryExpiration`). The node
    /// leaves memory at the earlier of the two. For an entry without a disk copy both are
    /// the same instant (its memory expiration is its lifetime).
    struct Node {
        var key: CacheKey
        /// The value. Every change of it records where its bytes now lie (`valueAddress`).
        var entry: CacheEntry {
            didSet { valueAddress = Self.address(of: entry.bytes) }
        }
        /// Where `entry.bytes`'s storage starts, so that a hit is lent (`LRUState.lendEntry`)
        /// without a copy of the entry. An array's storage stays where it is while the array
        /// is alive and not changed; this node holds it alive, and each change of `entry`
        /// records the address anew. A copy of the node holds the same storage, so the
        /// address it carries stays right for it too.
        private(set) var valueAddress: UnsafeRawPointer?
        /// The entry's original time-to-live, which a `.cacheTime` read counts again from
        /// the read's instant; nil = a read does not move the lifetime: it never expires
        /// (`expiresAt` is `Date.distantFuture`) or it is absolute (stored or touched with
        /// `.date`; `expiresAt` is that instant).
        var timeToLive: TimeInterval?
        /// The lifetime; see the type's comment.
        var expiresAt: Date
        /// The instant `expiresAt` was last counted from (store, slide, touch); with
        /// `timeToLive` it is what a write-back gives the disk copy's times.
        var extendedAt: Date
        /// The memory expiration, restarted by each extending read.
        var residency: StorageExpiration
        var residentUntil: Date
        /// The disk copy's expiration as last written; nil = no disk copy (memory only).
        var diskExpiresAt: Date?
        /// The file extension the disk copy was stored under (part of its file name).
        var forcedExtension: String?
        /// A write-back of this node's lifetime is in the pending set.
        var writeBackQueued: Bool
        /// Unique per store, put-back or touch (from the backend's counter), so that a
        /// pending write-back of an older version of the key is recognised and dropped.
        var generation: UInt64
        var lastAccess: Date
        /// The id of the namespace account the node counts in (`LRUState.accounts`);
        /// `Account.none` when its key has no accounted namespace. Set by `LRUState.set`.
        var account: Int32 = Account.none
        /// The key's tag in the shard's index (`SlotIndex.tag(of:)`). Set by `LRUState.set`.
        var keyTag: UInt32 = 0

        init(
            key: CacheKey, entry: CacheEntry, timeToLive: TimeInterval?, expiresAt: Date, extendedAt: Date,
            residency: StorageExpiration, residentUntil: Date, diskExpiresAt: Date?, forcedExtension: String?,
            writeBackQueued: Bool, generation: UInt64, lastAccess: Date
        ) {
            self.key = key
            self.entry = entry
            self.valueAddress = Self.address(of: entry.bytes)
            self.timeToLive = timeToLive
            self.expiresAt = expiresAt
            self.extendedAt = extendedAt
            self.residency = residency
            self.residentUntil = residentUntil
            self.diskExpiresAt = diskExpiresAt
            self.forcedExtension = forcedExtension
            self.writeBackQueued = writeBackQueued
            self.generation = generation
            self.lastAccess = lastAccess
        }

        private static func address(of bytes: [UInt8]) -> UnsafeRawPointer? {
            bytes.withUnsafeBytes { $0.baseAddress }
        }

        var cost: Int { entry.bytes.count }

        /// The latest of `instant`, the last change of the lifetime and the last use: the
        /// instant a read given an earlier one is judged at (`Backend.lendValue`).
        func laterOf(_ instant: Date) -> Date { max(instant, extendedAt, lastAccess) }

        /// When the node leaves memory: the end of its residency or of its lifetime.
        var leavesAt: Date { min(expiresAt, residentUntil) }

        /// True when the disk copy's times are behind the lifetime the node knows.
        var lagsDisk: Bool {
            guard let diskExpiresAt else { return false }
            return diskExpiresAt != expiresAt
        }

        /// What the disk copy is given when the node leaves memory (eviction, end of
        /// residency or lifetime, a memory-only removal): its lifetime when the write-back
        /// threshold (`Backend.isWriteBackDue`) says it is due, else nothing. A departure
        /// follows the same tolerance as a resident node, so the disk copy may keep up to
        /// half of a slid lifetime less than memory promised, never a longer one.
        func departureWriteBack(now: Date) -> WriteBack? {
            guard let diskExpiresAt,
                  MemoryStorage.Backend.isWriteBackDue(expiresAt: expiresAt, diskExpiresAt: diskExpiresAt, now: now)
            else { return nil }
            return writeBack()
        }

        func meta() -> Meta {
            Meta(
                size: entry.bytes.count, flags: entry.flags, expiration: expiresAt,
                memoryExpiration: residentUntil, hasDiskCopy: diskExpiresAt != nil, lastAccess: lastAccess,
                version: entry.version, isAbsolute: timeToLive == nil && expiresAt != .distantFuture)
        }

        /// What a write-back gives the disk copy: the node's lifetime as it is now.
        func writeBack() -> WriteBack {
            WriteBack(
                key: key, forcedExtension: forcedExtension, generation: generation, expiresAt: expiresAt,
                timeToLive: timeToLive, extendedAt: extendedAt)
        }
    }

    /// The mutable state of one shard. Only used inside the shard's lock.
    struct LRUState {
        /// The nodes' slots by their keys' tags; the keys are in the nodes.
        private var index = SlotIndex()
        private var nodes: [Node] = []
        /// The nodes' slots from the least recently used (the next eviction victim) to the
        /// most recently used.
        private var recency = SlotOrder()
        private(set) var totalCost = 0
        var count: Int { index.count }
        /// Where the last access of the oldest entry is published for eviction
        /// (`Backend.enforceLimits`), under this shard's index, and the slot it was last
        /// published for.
        private let oldestAccesses: OldestAccesses
        private let shard: Int
        private var publishedOldest = SlotOrder.none

        init(shard: Int, oldestAccesses: OldestAccesses) {
            self.shard = shard
            self.oldestAccesses = oldestAccesses
        }

        // Counters for this shard; summed by `Backend.stats`. Kept per shard so that
        // counting a hit never writes a cache line that another shard's readers share.
        var hits = 0
        var misses = 0
        var evictions = 0
        var expirations = 0

        /// The namespace accounts, by id, and the id of each account's key prefix
        /// (`Namespace.prefix`): a copy of the backend's table, replaced under this lock
        /// whenever the table changes. Empty when no namespace is accounted, which is the
        /// one check the hot path makes then.
        private(set) var accounts: [Account] = []
        private(set) var accountIDs: [CacheKey: Int32] = [:]
        /// `accountIDs` as a list, for `accountID`'s comparisons.
        private var accountPrefixes: [(prefix: CacheKey, id: Int32)] = []
        /// Per account id: this shard's reads that hit or missed, its stores the owner
        /// counted, and its entries.
        var namespaceHits: [Int] = []
        var namespaceMisses: [Int] = []
        var namespaceSets: [Int] = []
        private(set) var namespaceCounts: [Int] = []

        /// The node in `slot`, for reading one field of it: the compiler loads that field
        /// where it lies. A node read as a whole is copied (`Array`'s getter returns its
        /// element copied), which counts a reference for each object the node holds; see
        /// `entryAndMeta` for the read of a hit.
        subscript(slot: Int32) -> Node {
            _read { yield nodes[Int(slot)] }
        }

        /// Calls `body` with the entry in `slot` lent where it lies, and its lifetime. The
        /// caller holds the shard's lock until `body` returns, so the node, and the bytes it
        /// holds, stay as they are meanwhile. Reads only plain fields of the node: no
        /// reference is counted, so no line another thread reads is written.
        @inline(__always)
        func lendEntry<R>(_ slot: Int32, _ body: (LentEntry, Date) -> R) -> R {
            let i = Int(slot)
            let lent = LentEntry(
                bytes: UnsafeRawBufferPointer(start: nodes[i].valueAddress, count: nodes[i].entry.bytes.count),
                flags: nodes[i].entry.flags, version: nodes[i].entry.version)
            return body(lent, nodes[i].expiresAt)
        }

        /// The entry in `slot` and its lifetime, copied (one counted reference, the value's).
        @inline(__always)
        func entryAndExpiration(_ slot: Int32) -> (entry: CacheEntry, expiresAt: Date) {
            (nodes[Int(slot)].entry, nodes[Int(slot)].expiresAt)
        }

        /// The entry in `slot` and its meta (`Node.meta`), read field by field where the
        /// node lies: a read of a hit counts one reference, the value's.
        @inline(__always)
        func entryAndMeta(_ slot: Int32) -> (entry: CacheEntry, meta: Meta) {
            let i = Int(slot)
            let entry = nodes[i].entry
            let expiresAt = nodes[i].expiresAt
            var isAbsolute = false
            if nodes[i].timeToLive == nil { isAbsolute = expiresAt != .distantFuture }
            return (entry, Meta(
                size: entry.bytes.count, flags: entry.flags, expiration: expiresAt,
                memoryExpiration: nodes[i].residentUntil, hasDiskCopy: nodes[i].diskExpiresAt != nil,
                lastAccess: nodes[i].lastAccess, version: entry.version, isAbsolute: isAbsolute))
        }

        /// The slot of the least recently used entry and its last access, if any.
        var oldest: (slot: Int32, lastAccess: Date)? {
            let tail = recency.oldest
            return tail == SlotOrder.none ? nil : (tail, nodes[Int(tail)].lastAccess)
        }

        /// The slot of `key`, whose tag is `tag` (`Backend.locate`).
        @inline(__always)
        func slot(forKey key: CacheKey, tag: UInt32) -> Int32? {
            index.find(tag) { nodes[Int($0)].key == key }
        }

        /// The account `key` counts in, or `Account.none`: one emptiness check when no
        /// namespace is accounted; with up to `prefixScanLimit` accounts, a comparison of
        /// the key's first bytes with each account's prefix (a name holds no separator, so
        /// a key begins with exactly one namespace's prefix, or with none); with more, a
        /// scan of the key's namespace prefix and one lookup (the prefix is a small inline
        /// string for names of up to 14 bytes; a longer name costs an allocation).
        func accountID(forKey key: CacheKey) -> Int32 {
            guard !accountIDs.isEmpty else { return Account.none }
            if accountPrefixes.count <= Self.prefixScanLimit {
                for (prefix, id) in accountPrefixes where key.hasPrefix(prefix) { return id }
                return Account.none
            }
            guard let length = key.namespacePrefixLength else { return Account.none }
            return accountIDs[key.leading(length)] ?? Account.none
        }

        /// Up to this many accounts, `accountID` compares prefixes instead of hashing one.
        static let prefixScanLimit = 8

        /// Installs the backend's table; nodes of a namespace that had no account until now
        /// join theirs (a walk over the shard, only when `retag`).
        mutating func install(accounts: [Account], ids: [CacheKey: Int32], retag: Bool) {
            self.accounts = accounts
            accountIDs = ids
            accountPrefixes = ids.map { (prefix: $0.key, id: $0.value) }
            let n = accounts.count
            if namespaceHits.count < n {
                namespaceHits += Array(repeating: 0, count: n - namespaceHits.count)
                namespaceMisses += Array(repeating: 0, count: n - namespaceMisses.count)
                namespaceSets += Array(repeating: 0, count: n - namespaceSets.count)
                namespaceCounts += Array(repeating: 0, count: n - namespaceCounts.count)
            }
            guard retag else { return }
            for slot in index.slots where nodes[Int(slot)].account == Account.none {
                let id = accountID(forKey: nodes[Int(slot)].key)
                guard id != Account.none else { continue }
                nodes[Int(slot)].account = id
                charge(id, cost: nodes[Int(slot)].cost, count: 1)
            }
        }

        private mutating func charge(_ id: Int32, cost: Int, count: Int) {
            guard id != Account.none else { return }
            accounts[Int(id)].cost.add(cost, ordering: .relaxed)
            if count != 0 {
                accounts[Int(id)].count.add(count, ordering: .relaxed)
                namespaceCounts[Int(id)] += count
            }
        }

        /// Counts a store of `key` in its namespace's sets.
        mutating func countNamespaceSet(forKey key: CacheKey) {
            let id = accountID(forKey: key)
            if id != Account.none { namespaceSets[Int(id)] += 1 }
        }

        /// Counts a miss of `key` in its namespace (a read that found no node).
        mutating func countNamespaceMiss(forKey key: CacheKey) {
            let id = accountID(forKey: key)
            if id != Account.none { namespaceMisses[Int(id)] += 1 }
        }

        /// The least recently used node of account `id` in this shard and its last access:
        /// a walk from the cold end past other namespaces' nodes; nil when the shard holds
        /// none of the account's.
        func oldest(inAccount id: Int32) -> (slot: Int32, lastAccess: Date)? {
            guard Int(id) < namespaceCounts.count, namespaceCounts[Int(id)] > 0 else { return nil }
            var slot = recency.oldest
            while slot != SlotOrder.none {
                if nodes[Int(slot)].account == id { return (slot, nodes[Int(slot)].lastAccess) }
                slot = recency.newer(than: slot)
            }
            return nil
        }

        /// Inserts or replaces `node.key`, whose tag is `tag`, as an entry of account
        /// `account` (the caller's `accountID(forKey:)` of it), makes it the most recently
        /// used. Returns the change in cost and count.
        mutating func set(_ node: consuming Node, tag: UInt32, account: Int32) -> (costDelta: Int, countDelta: Int) {
            node.account = account
            node.keyTag = tag
            let cost = node.cost
            if let slot = slot(forKey: node.key, tag: tag) {
                let i = Int(slot)
                let old = nodes[i].cost
                if nodes[i].account == account {
                    // The common replacement: one account, one shared counter to change.
                    if cost != old { charge(account, cost: cost - old, count: 0) }
                } else {
                    charge(nodes[i].account, cost: -old, count: -1)
                    charge(account, cost: cost, count: 1)
                }
                nodes[i] = consume node
                recency.moveToNewest(slot)
                publishOldest(changed: slot)
                totalCost += cost - old
                return (cost - old, 0)
            }
            let (slot, reused) = recency.take()
            charge(account, cost: cost, count: 1)
            index.insert(tag, slot: slot)
            if reused { nodes[Int(slot)] = consume node } else { nodes.append(consume node) }
            publishOldest(changed: slot)
            totalCost += cost
            return (cost, 1)
        }

        /// Direct access to a node, for the backend's lifetime arithmetic.
        mutating func withNode<T>(_ slot: Int32, _ body: (inout Node) -> T) -> T {
            body(&nodes[Int(slot)])
        }

        /// Marks `slot` used now and moves it to the front, unless it was last marked in
        /// the same whole second: recency is kept at the precision the protocol reports a
        /// last access in (`lastAccessAt`, whole seconds rounded down), so what a reader
        /// sees is the same, and eviction takes, among entries last used within one second,
        /// the one that second found first.
        ///
        /// Why: a hit that writes its node and its neighbours' links makes those lines
        /// change cores whenever the other event loop reads near them; most hits of a key
        /// read more than once a second now write nothing (memcached limits how often an
        /// item is bumped for the same reason). The figures are in Benchmarks/RESULTS.md,
        /// "Recency at whole seconds".
        mutating func touchRecency(_ slot: Int32, now: Date) {
            let i = Int(slot)
            if Self.sameSecond(nodes[i].lastAccess, now) { return }
            nodes[i].lastAccess = now
            recency.moveToNewest(slot)
            publishOldest(changed: slot)
        }

        /// Whether `a` and `b` fall in the same whole second. By truncation, which is the
        /// whole second rounded down for any instant after 2001 (every clock reading this
        /// tier is given), and one instruction where `rounded(.down)` is a call to `floor`.
        @inline(__always)
        static func sameSecond(_ a: Date, _ b: Date) -> Bool {
            Int64(a.timeIntervalSinceReferenceDate) == Int64(b.timeIntervalSinceReferenceDate)
        }

        /// Publishes the oldest entry's last access when the oldest entry is another than
        /// the one last published, or is `changed` (the only entry, touched). Every change
        /// of the order ends here, so the published value is the oldest's whenever the
        /// lock is free; the common touch of a node that is not the oldest costs one
        /// comparison.
        private mutating func publishOldest(changed: Int32) {
            let tail = recency.oldest
            guard tail != publishedOldest || tail == changed else { return }
            publishedOldest = tail
            oldestAccesses.publish(tail == SlotOrder.none ? nil : nodes[Int(tail)].lastAccess, shard: shard)
        }

        /// Unlinks and frees `slot`; returns the removed node's cost.
        @discardableResult
        mutating func remove(_ slot: Int32) -> Int {
            let i = Int(slot)
            recency.release(slot)
            let cost = nodes[i].cost
            charge(nodes[i].account, cost: -cost, count: -1)
            nodes[i].account = Account.none
            index.remove(nodes[i].keyTag, slot: slot)
            // Drop the payload now; the slot's storage is reused by a later insert.
            nodes[i].entry = CacheEntry(bytes: [])
            nodes[i].key = ""
            publishOldest(changed: slot)
            totalCost -= cost
            return cost
        }

        /// Removes every entry; returns how many there were.
        mutating func removeAll() -> Int {
            let removed = index.count
            for slot in index.slots { charge(nodes[Int(slot)].account, cost: -nodes[Int(slot)].cost, count: -1) }
            index.removeAll()
            nodes = []
            recency.removeAll()
            publishOldest(changed: SlotOrder.none)
            totalCost = 0
            return removed
        }

        /// The slots that must leave: lifetime over at `lifetimeDate`, or residency over
        /// at `now`.
        func departingSlots(lifetimeAt lifetimeDate: Date, now: Date) -> [Int32] {
            index.slots.filter { nodes[Int($0)].expiresAt <= lifetimeDate || nodes[Int($0)].residentUntil <= now }
        }

        /// Every node, for whole-tier passes (flush, clear).
        var allSlots: [Int32] { index.slots }
    }
}

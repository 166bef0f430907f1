// The memory tier's per-namespace accounts: each accounted namespace's bytes, entries,
// hits, misses, evictions and sets, and its quota (`Quotas`). A namespace is accounted
// once a quota names it or the owner registers it (`register`); the table only grows, so
// an account id stays valid for the backend's life, and it is bounded by `maxAccounts`.

import Foundation
import HalcyonSupport
import Synchronization

extension MemoryStorage {
    /// One namespace's running account in the memory tier.
    ///
    /// Threading: thread-safe; every counter is an atomic. `cost` and `count` change under
    /// the lock of the shard whose node they count (`LRUState.set`, `remove`), and are
    /// read without it.
    final class Account: Sendable {
        /// The id of no account: a node whose key has no accounted namespace.
        static let none: Int32 = -1

        let id: Int32
        let namespace: Namespace
        /// Sum of the namespace's entries' byte counts.
        let cost = Atomic<Int>(0)
        /// Number of the namespace's entries.
        let count = Atomic<Int>(0)
        /// The namespace's entries dropped to respect a limit: its quota or the tier's.
        let evictions = Atomic<Int>(0)
        /// The memory quota in bytes; 0 = none.
        let limit = Atomic<Int>(0)

        init(id: Int32, namespace: Namespace) {
            self.id = id
            self.namespace = namespace
        }

        var isOverQuota: Bool {
            let limit = limit.load(ordering: .relaxed)
            return limit > 0 && cost.load(ordering: .relaxed) > limit
        }
    }

    /// The accounts of a backend, by id and by key prefix. Only inside `Backend.namespaces`.
    struct NamespaceTable {
        var accounts: [Account] = []
        var ids: [CacheKey: Int32] = [:]

        /// The account of `namespace`, made when missing and the table is not full
        /// (`created`: it was made now).
        mutating func account(for namespace: Namespace) -> (account: Account, created: Bool)? {
            if let id = ids[namespace.prefix] { return (accounts[Int(id)], false) }
            guard accounts.count < Backend.maxAccounts else { return nil }
            let account = Account(id: Int32(accounts.count), namespace: namespace)
            accounts.append(account)
            ids[namespace.prefix] = account.id
            return (account, true)
        }

        /// The memory quota of `key`'s namespace in bytes; 0 when it has none.
        func quota(forKey key: CacheKey) -> Int {
            guard !ids.isEmpty, let length = key.namespacePrefixLength, let id = ids[key.leading(length)] else { return 0 }
            return accounts[Int(id)].limit.load(ordering: .relaxed)
        }
    }

    /// A snapshot of one namespace's account.
    public struct NamespaceStats: Sendable, Equatable {
        public var namespace: Namespace
        /// Reads of the namespace's keys that found a live entry in memory, or did not.
        public var hits: Int
        public var misses: Int
        /// Stores of the namespace's keys.
        public var sets: Int
        /// The namespace's entries dropped to respect its quota or the tier's limits.
        public var evictions: Int
        /// The namespace's bytes and entries in memory.
        public var totalCost: Int
        public var count: Int
        /// The namespace's memory quota in bytes; 0 = none.
        public var quota: Int
        /// The namespace's share of the disk tier (filled by `HybridCache.namespaceStats`):
        /// its files' bytes and count, files removed for its quota, and its disk quota (0 = none).
        public var diskBytes: UInt64 = 0
        public var diskEntries: Int = 0
        public var diskEvictions: Int = 0
        public var diskQuota: UInt64 = 0

        public init(
            namespace: Namespace, hits: Int = 0, misses: Int = 0, sets: Int = 0, evictions: Int = 0, totalCost: Int = 0,
            count: Int = 0, quota: Int = 0
        ) {
            self.namespace = namespace
            self.hits = hits
            self.misses = misses
            self.sets = sets
            self.evictions = evictions
            self.totalCost = totalCost
            self.count = count
            self.quota = quota
        }
    }
}

extension MemoryStorage.Backend {
    /// The most namespaces accounted at once; a namespace registered beyond it is not
    /// accounted (its keys count in the tier's totals only, and no quota can name it).
    public static let maxAccounts = 1024

    /// Replaces the quotas: each listed namespace gets its memory quota (and an account
    /// when it had none); an accounted namespace not listed keeps its account, without a
    /// quota. A namespace now over its quota loses its own least recently used entries
    /// until it is within it, before this returns (counted as evictions).
    public func setQuotas(_ quotas: Quotas) {
        let over = namespaces.withLock { table -> [MemoryStorage.Account] in
            var created = false
            var listed = Set<Int32>()
            for (namespace, limits) in quotas.limits {
                guard let (account, new) = table.account(for: namespace) else { continue }
                created = created || new
                account.limit.store(max(0, limits.memory), ordering: .relaxed)
                listed.insert(account.id)
            }
            for account in table.accounts where !listed.contains(account.id) {
                account.limit.store(0, ordering: .relaxed)
            }
            installTable(table, retag: created)
            return table.accounts.filter(\.isOverQuota)
        }
        for account in over { enforceQuota(account) }
    }

    /// Accounts `namespace` (without a quota) if it is not yet; false when the table is
    /// full. For namespaces the owner learns of at run time (a `$user` namespace).
    @discardableResult
    public func register(_ namespace: Namespace) -> Bool {
        namespaces.withLock { table -> Bool in
            guard let (_, created) = table.account(for: namespace) else { return false }
            if created { installTable(table, retag: true) }
            return true
        }
    }

    /// Gives every shard the table; under `namespaces`' lock (which nests outside the
    /// shards' locks), so that shards never install tables out of order.
    private func installTable(_ table: MemoryStorage.NamespaceTable, retag: Bool) {
        hasAccounts.store(!table.accounts.isEmpty, ordering: .relaxed)
        for shard in shards {
            shard.state.withLock { $0.install(accounts: table.accounts, ids: table.ids, retag: retag) }
        }
    }

    /// Counts a store of `key` in its namespace's `sets` (the owner calls it for each
    /// store it counts, or passes `countingSet` to the store that keeps the value). One
    /// atomic load when no namespace is accounted.
    public func countSet(forKey key: CacheKey) {
        guard hasAccounts.load(ordering: .relaxed) else { return }
        locate(key).state.withLock { $0.countNamespaceSet(forKey: key) }
    }

    /// The accounted namespaces' counters, in the order they were first accounted; each
    /// shard is read under its own lock.
    public func namespaceStats() -> [MemoryStorage.NamespaceStats] {
        let accounts = namespaces.withLock { $0.accounts }
        var hits = Array(repeating: 0, count: accounts.count)
        var misses = hits
        var sets = hits
        for shard in shards {
            shard.state.withLock { state in
                for id in 0..<min(accounts.count, state.namespaceHits.count) {
                    hits[id] += state.namespaceHits[id]
                    misses[id] += state.namespaceMisses[id]
                    sets[id] += state.namespaceSets[id]
                }
            }
        }
        return accounts.map { account in
            MemoryStorage.NamespaceStats(
                namespace: account.namespace, hits: hits[Int(account.id)], misses: misses[Int(account.id)],
                sets: sets[Int(account.id)], evictions: account.evictions.load(ordering: .relaxed),
                totalCost: account.cost.load(ordering: .relaxed), count: account.count.load(ordering: .relaxed),
                quota: account.limit.load(ordering: .relaxed))
        }
    }

    /// The memory quota of `key`'s namespace in bytes; 0 when it has none.
    public func quota(forKey key: CacheKey) -> Int {
        guard hasAccounts.load(ordering: .relaxed) else { return 0 }
        return namespaces.withLock { $0.quota(forKey: key) }
    }

    /// Evicts `account`'s own least recently used entries until it is within its quota
    /// (`evict`, with each shard's oldest node of the account: see
    /// `LRUState.oldest(inAccount:)` for the walk). Other namespaces' entries are never
    /// touched.
    func enforceQuota(_ account: MemoryStorage.Account) {
        evict(while: { account.isOverQuota }) { $0.oldest(inAccount: account.id) }
    }
}

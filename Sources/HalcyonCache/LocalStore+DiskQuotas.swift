// Namespace disk quotas (`Quotas.Limits.disk`): each accounted namespace's share of the
// disk tier, kept by the ioQueue beside the whole tier's account (LocalStore+DiskUsage.swift)
// and exact after each listing, and the eviction of a namespace's own files when it is
// over its quota.
//
// A namespace's disk bytes are its files' bytes (header, key and value, as
// `--disk-size-limit` counts them) and its values still in the journal's unwritten table.
// The quota is checked when a value of the namespace reaches its file (a store to disk,
// the write-behind writing its values): over it, the namespace's files go, least recently
// accessed first (last access as memory knows it, as the trim judges it), until it holds
// at most half its quota, so a namespace storing at its quota lists the folder once per
// half a quota of stores and not at every store. Values still unwritten are not evicted:
// they reach their files within the write-behind's interval, and the next check counts
// them there. No other namespace's file is ever removed.
//
// Cost: nothing while no namespace is accounted (one atomic load per file change). With
// namespaces, each file change updates one small table, and every listing that resets
// the account (start, sweeps, trims, `removeExpired`, an eviction) also reads each
// file's header and key, one read per file.

import Foundation
import HalcyonSupport

extension LocalStore {
    /// The namespaces' disk accounts. Written on the ioQueue only; read by `stats` from
    /// any thread (through `namespaceDisk`, a `Locked`).
    struct NamespaceDisk {
        /// Quota in bytes by namespace prefix (`Namespace.prefix`); absent = none.
        var limits: [CacheKey: UInt64] = [:]
        /// Files' bytes and count by namespace prefix; nil until the first listing.
        var files: [CacheKey: DiskUsage]? = nil
        /// Files removed for the quota, by namespace prefix.
        var evictions: [CacheKey: Int] = [:]
    }

    /// One namespace's disk account, for `HybridCache.namespaceStats`.
    struct NamespaceDiskStats {
        var bytes: UInt64
        var count: Int
        var evictions: Int
        var quota: UInt64
    }

    /// Whether namespaces are accounted at all: the one check the write path makes otherwise.
    var tracksNamespaces: Bool { memoryStorage.hasAccounts.load(ordering: .relaxed) }

    /// Installs the disk quotas and, on the ioQueue, lists the namespaces' files and
    /// evicts each namespace now over its quota (in the background of the requests).
    func setDiskQuotas(_ quotas: Quotas) {
        let limits = Dictionary(uniqueKeysWithValues: quotas.limits.compactMap { namespace, limits in
            limits.disk > 0 ? (namespace.prefix, limits.disk) : nil
        })
        scheduler.enqueue(.background) { [self] in
            namespaceDisk.withLock { $0.limits = limits }
            recountNamespaceDisk()
            for prefix in limits.keys { enforceDiskQuota(prefix: prefix) }
        }
    }

    /// Lists the namespaces' files and resets their accounts. ioQueue only.
    func recountNamespaceDisk() {
        scheduler.assertOnQueue()
        guard tracksNamespaces else { return }
        guard let listed = try? diskStorage.namespacedFiles() else {
            namespaceDisk.withLock { $0.files = nil }
            return
        }
        var files: [CacheKey: DiskUsage] = [:]
        for file in listed {
            var usage = files[file.prefix] ?? DiskUsage(bytes: 0, count: 0)
            usage.bytes += file.size
            usage.count += 1
            files[file.prefix] = usage
        }
        namespaceDisk.withLock { $0.files = files }
    }

    /// Applies one file of `key` changing (`old` replaced by `new`, either nil) to its
    /// namespace's account. ioQueue only.
    func adjustNamespaceDisk(forKey key: CacheKey, replacing old: DiskStorage.FileMeta?, with new: DiskStorage.FileMeta?) {
        guard tracksNamespaces, let length = key.namespacePrefixLength else { return }
        let prefix = key.leading(length)
        namespaceDisk.withLock { book in
            guard book.files != nil else { return }
            book.files![prefix, default: DiskUsage(bytes: 0, count: 0)].apply(replacing: old, with: new)
        }
    }

    /// After a value of `key` reached its file: keeps its namespace within its disk quota.
    /// ioQueue only.
    func enforceDiskQuota(forKey key: CacheKey) {
        guard tracksNamespaces, let length = key.namespacePrefixLength else { return }
        enforceDiskQuota(prefix: key.leading(length))
    }

    /// After the write-behind wrote values to their files: keeps every namespace with a
    /// quota within it. ioQueue only.
    func enforceDiskQuotas() {
        guard tracksNamespaces else { return }
        for prefix in namespaceDisk.withLock({ Array($0.limits.keys) }) { enforceDiskQuota(prefix: prefix) }
    }

    /// The check and the eviction (see the file's header). ioQueue only.
    private func enforceDiskQuota(prefix: CacheKey) {
        scheduler.assertOnQueue()
        if namespaceDisk.withLock({ $0.files == nil }) { recountNamespaceDisk() }
        let (limit, files) = namespaceDisk.withLock { ($0.limits[prefix] ?? 0, $0.files?[prefix]?.bytes ?? 0) }
        guard limit > 0 else { return }
        // The table is walked only when its whole size could take the namespace over.
        let unwrittenTotal = UInt64(writeBehind?.unwrittenTotals.bytes ?? 0)
        guard files + unwrittenTotal > limit else { return }
        var usage = files + UInt64(writeBehind?.unwrittenBytes(withPrefix: prefix) ?? 0)
        guard usage > limit else { return }
        _ = applyWriteBacks(memoryStorage.takeAllWriteBacks())
        do throws(CacheError) {
            let recent = residentAccesses()
            func lastAccess(_ file: DiskStorage.Backend.NamespacedFile) -> Int64 {
                max(file.lastAccessNanos, recent[CacheKey(file.name)].map(FileTimes.nanos) ?? 0)
            }
            let own = try diskStorage.namespacedFiles().filter { $0.prefix == prefix }.sorted { lastAccess($0) < lastAccess($1) }
            var removed: [String] = []
            for file in own {
                if usage <= limit / 2 { break }
                if try diskStorage.removeFile(named: file.name) { removed.append(file.name) }
                usage -= min(usage, file.size)
            }
            counters.withLock { $0.diskEvictions += removed.count }
            namespaceDisk.withLock { $0.evictions[prefix, default: 0] += removed.count }
            writeBehind?.noteEvicted(names: removed)
        } catch {
            counters.withLock { $0.maintenanceErrors += 1 }
        }
        recountDiskUsage()
    }

    /// The namespaces that hold a file or a value still in the journal, on the ioQueue in
    /// the background of the requests (the accounts' listing when there is one, else a
    /// listing of the folder); `completion` runs there.
    func storedNamespaces(completion: @escaping @Sendable ([Namespace]) -> Void) {
        scheduler.enqueue(.background) { [self] in
            var prefixes: Set<CacheKey>
            if tracksNamespaces {
                if namespaceDisk.withLock({ $0.files == nil }) { recountNamespaceDisk() }
                prefixes = Set(namespaceDisk.withLock { $0.files.map { Array($0.keys) } ?? [] })
            } else {
                prefixes = Set((try? diskStorage.namespacedFiles())?.map(\.prefix) ?? [])
            }
            prefixes.formUnion(writeBehind?.unwrittenNamespacePrefixes() ?? [])
            completion(prefixes.compactMap(\.namespace).sorted { $0.name < $1.name })
        }
    }

    /// Each namespace's disk account, by prefix (empty before the first listing).
    func namespaceDiskStats() -> [CacheKey: NamespaceDiskStats] {
        namespaceDisk.withLock { book in
            var out: [CacheKey: NamespaceDiskStats] = [:]
            for prefix in Set((book.files ?? [:]).keys).union(book.limits.keys).union(book.evictions.keys) {
                let usage = book.files?[prefix]
                out[prefix] = NamespaceDiskStats(
                    bytes: usage?.bytes ?? 0, count: usage?.count ?? 0, evictions: book.evictions[prefix] ?? 0,
                    quota: book.limits[prefix] ?? 0)
            }
            return out
        }
    }
}

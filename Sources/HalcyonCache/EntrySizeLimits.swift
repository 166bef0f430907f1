// The largest entry each tier can keep. A store larger than its tier's whole size limit
// would be acknowledged and then removed by the next trim or eviction without a word; the
// daemon refuses it up front instead (`valueTooLarge`), naming the limit.

import HalcyonSupport

/// The size limits a single entry is held to, fixed when the cache is made.
///
/// Threading: a value type; any thread.
public struct EntrySizeLimits: Sendable, Equatable {
    /// The tier whose limit an entry exceeds; the raw value is the wire's `data.tier`.
    public enum Tier: String, Sendable {
        case disk, memory
    }

    /// The disk tier's size limit in bytes (`DiskStorage.Config.sizeLimit`); 0 = none.
    public var diskSizeLimit: UInt64
    /// The memory tier's cost limit in bytes (`MemoryStorage.Config.totalCostLimit`); 0 = none.
    public var memoryLimit: Int
    /// The memory tier's namespace table, whose quotas a memory-only entry is held to too
    /// (read at each check, so a changed quota applies at once); nil for none. The table,
    /// not the tier: these limits are copied with every request's params, and a copy
    /// retains only this plain object, never the tier (whose timer holds it weakly, which
    /// moves its reference count out of line).
    var namespaces: Locked<MemoryStorage.NamespaceTable>? = nil

    /// Holds memory-only entries to the namespace quotas of `memory` too.
    public mutating func holdToQuotas(of memory: MemoryStorage.Backend) {
        namespaces = memory.namespaces
    }

    /// No limit on either tier.
    public static let none = EntrySizeLimits(diskSizeLimit: 0, memoryLimit: 0)

    public init(diskSizeLimit: UInt64, memoryLimit: Int) {
        self.diskSizeLimit = diskSizeLimit
        self.memoryLimit = memoryLimit
    }

    /// The tier and limit an entry cannot fit in, or nil when it fits.
    ///
    /// An entry for the disk counts as its whole file (header, key and value), as the
    /// size limit counts it; its memory copy may be refused by a smaller memory tier, and
    /// the disk still keeps it. A memory-only entry counts its value, as the memory
    /// tier's cost does.
    public func exceeded(keyBytes: Int, valueBytes: Int, toDisk: Bool) -> (tier: Tier, limit: UInt64)? {
        if toDisk {
            let fileSize = UInt64(DiskStorage.FileHeader.size) + UInt64(keyBytes) + UInt64(valueBytes)
            return diskSizeLimit > 0 && fileSize > diskSizeLimit ? (.disk, diskSizeLimit) : nil
        }
        return memoryLimit > 0 && valueBytes > memoryLimit ? (.memory, UInt64(memoryLimit)) : nil
    }

    /// Like `exceeded(keyBytes:valueBytes:toDisk:)` for the stored key `key`, and also a
    /// memory-only entry larger than the memory quota of `key`'s namespace (`Quotas`),
    /// with the quota as the limit. An entry for the disk may exceed the quota: the disk
    /// keeps it and the memory tier does not take a copy, as with the tier's own limit.
    /// `quota` is true when the limit is the namespace's quota.
    public func exceeded(key: CacheKey, valueBytes: Int, toDisk: Bool) -> (tier: Tier, limit: UInt64, quota: Bool)? {
        if let (tier, limit) = exceeded(keyBytes: key.count, valueBytes: valueBytes, toDisk: toDisk) {
            return (tier, limit, false)
        }
        guard !toDisk, let namespaces else { return nil }
        let quota = namespaces.withLock { $0.quota(forKey: key) }
        return quota > 0 && valueBytes > quota ? (.memory, UInt64(quota), true) : nil
    }

    public static func == (lhs: EntrySizeLimits, rhs: EntrySizeLimits) -> Bool {
        lhs.diskSizeLimit == rhs.diskSizeLimit && lhs.memoryLimit == rhs.memoryLimit && lhs.namespaces === rhs.namespaces
    }
}

extension HybridCache {
    /// The limits of this cache's tiers, as configured at init.
    public var entrySizeLimits: EntrySizeLimits {
        var limits = EntrySizeLimits(diskSizeLimit: diskStorage.config.sizeLimit, memoryLimit: memoryStorage.config.totalCostLimit)
        limits.holdToQuotas(of: memoryStorage)
        return limits
    }
}

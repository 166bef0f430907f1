// The largest entry each tier can keep. A store larger than its tier's whole size limit
// would be acknowledged and then removed by the next trim or eviction without a word; the
// daemon refuses it up front instead (`valueTooLarge`), naming the limit.

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
}

extension HybridCache {
    /// The limits of this cache's tiers, as configured at init.
    public var entrySizeLimits: EntrySizeLimits {
        EntrySizeLimits(diskSizeLimit: diskStorage.config.sizeLimit, memoryLimit: memoryStorage.config.totalCostLimit)
    }
}

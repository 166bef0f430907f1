// Per-namespace bounds on the storage engine's tiers. The daemon builds them from its
// rules file and replaces them at run time (SIGHUP); the storage engine applies them to
// every key whose bytes name the namespace (`CacheKey.namespace`).

/// Each namespace's bounds on the bytes it may hold in the memory tier and in the disk tier.
///
/// A key with no namespace (tenancy off, or a key an admin stored in the whole keyspace)
/// has no quota, and neither has a namespace not listed here. A namespace over its quota
/// loses its own least recently used entries, never another's (`MemoryStorage.Backend`;
/// on disk LocalStore+DiskQuotas.swift).
///
/// Threading: a value; any thread.
public struct Quotas: Sendable, Equatable {
    /// One namespace's bounds.
    public struct Limits: Sendable, Equatable {
        /// Upper bound of the namespace's bytes in the memory tier (the sum of its entries'
        /// byte counts, as `MemoryStorage.Config.totalCostLimit` counts them); 0 = none.
        public var memory: Int
        /// Upper bound of the namespace's bytes in the disk tier (its files, counted as
        /// `DiskStorage.Config.sizeLimit` counts them, and its values not yet written to
        /// them); 0 = none.
        public var disk: UInt64

        public init(memory: Int = 0, disk: UInt64 = 0) {
            self.memory = memory
            self.disk = disk
        }
    }

    /// The bounds by namespace.
    public var limits: [Namespace: Limits]

    public init(_ limits: [Namespace: Limits] = [:]) {
        self.limits = limits
    }

    /// No quota at all.
    public static let none = Quotas()
}

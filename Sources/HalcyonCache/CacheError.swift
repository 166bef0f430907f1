// The one error type of the storage engine. Each case is a stage that can fail and
// carries what a caller needs to act on it; `reason` is the stable camelCase word the
// daemon puts on the wire as `data.reason`, so a case, once shipped, is never renamed.

import Foundation

/// Every failure the storage engine reports.
public enum CacheError: Error, Sendable, Equatable {
    /// The cache folder could not be created or used (a file in its place, no
    /// permission). Every disk call fails with this until the folder is usable.
    case diskStorageIsNotReady(path: String, errno: Int32)
    /// The value's file could not be created or written (ENOSPC, EACCES, EROFS, ...).
    case cannotCreateCacheFile(path: String, errno: Int32)
    /// The file was written but its expiration/last-access metadata could not be set.
    case cannotSetCacheFileAttribute(path: String, errno: Int32)
    /// A stored file exists but could not be read back.
    case cannotLoadDataFromDisk(path: String, errno: Int32)
    /// A file or folder could not be removed.
    case cannotRemoveCacheFile(path: String, errno: Int32)
    /// The key cannot name a file (only without hashed file names: `/`, NUL, `.`,
    /// `..`, or longer than 255 bytes).
    case invalidKey(key: CacheKey)
    /// The write-ahead journal could not be created, written or synced (ENOSPC, EIO,
    /// EROFS, ...): the write it carried was not made durable and did not happen.
    case cannotWriteJournal(path: String, errno: Int32)
    /// The journal or the entries not yet written to their files reached their bound
    /// and stayed there for the whole wait: the write was refused and did not happen.
    /// Nothing acknowledged is dropped; retry later.
    case diskBacklog(journalBytes: UInt64, unwrittenBytes: UInt64)
    /// The request was cancelled. `started` tells whether its work ran (its effects
    /// stand; only the result was withdrawn) or never began.
    case cancelled(started: Bool)
    /// The upstream shared by several hosts could not be reached for a shared key: a
    /// write may or may not have taken effect there, and nothing was stored locally.
    case upstreamUnavailable(detail: String)
    /// As `upstreamUnavailable`, because the upstream refused this host's credentials
    /// (a changed password, a removed ACL user): fix the password file or the user.
    case upstreamAuthenticationFailed(detail: String)
    /// The upstream refused the command for a shared key (the value under the key is not
    /// one Halcyon can use, the store is out of memory, ...); nothing was stored locally.
    case upstreamRefused(detail: String)
    /// A caller would wait on a lease while `limit` callers of this host wait already
    /// (`Leases.Limits.waiters`, `UpstreamConfig.leaseWaitersLimit`); it was refused, not
    /// parked.
    case tooManyLeaseWaiters(limit: Int)
    /// A caller would wait on a local key's lease while `limit` callers wait for that key
    /// already (`Leases.Limits.waitersPerKey`); it was refused, not parked.
    case tooManyLeaseWaitersForKey(limit: Int)

    /// The stable wire name of this error (`data.reason`).
    public var reason: String {
        switch self {
        case .diskStorageIsNotReady: return "diskStorageIsNotReady"
        case .cannotCreateCacheFile: return "cannotCreateCacheFile"
        case .cannotSetCacheFileAttribute: return "cannotSetCacheFileAttribute"
        case .cannotLoadDataFromDisk: return "cannotLoadDataFromDisk"
        case .cannotRemoveCacheFile: return "cannotRemoveCacheFile"
        case .invalidKey: return "invalidKey"
        case .cannotWriteJournal: return "cannotWriteJournal"
        case .diskBacklog: return "diskBacklog"
        case .cancelled: return "requestCancelled"
        case .upstreamUnavailable: return "upstreamUnavailable"
        case .upstreamAuthenticationFailed: return "upstreamAuthenticationFailed"
        case .upstreamRefused: return "upstreamRefused"
        case .tooManyLeaseWaiters: return "tooManyLeaseWaiters"
        case .tooManyLeaseWaitersForKey: return "tooManyLeaseWaitersForKey"
        }
    }

    /// The errno behind the failure, where there is one.
    public var errno: Int32? {
        switch self {
        case .diskStorageIsNotReady(_, let e), .cannotCreateCacheFile(_, let e),
             .cannotSetCacheFileAttribute(_, let e), .cannotLoadDataFromDisk(_, let e),
             .cannotRemoveCacheFile(_, let e), .cannotWriteJournal(_, let e):
            return e
        case .invalidKey, .cancelled, .diskBacklog, .upstreamUnavailable, .upstreamAuthenticationFailed, .upstreamRefused,
             .tooManyLeaseWaiters, .tooManyLeaseWaitersForKey:
            return nil
        }
    }
}

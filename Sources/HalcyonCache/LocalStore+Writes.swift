// The keyed writes of the hybrid cache: store, touch, remove. Each becomes a
// `WriteOperation` that `perform` applies on the ioQueue, changing both tiers there as
// one step (disk first, then memory, so memory never holds a value the disk refused);
// only a memory-only store of a key with nothing queued and certainly no file runs
// inline (through `perform` too).

import Foundation

extension LocalStore {
    /// Stores `entry` under `key` in memory and (unless `options.toDisk` is false) on disk.
    ///
    /// Runs on the ioQueue after every earlier write. With `toDisk: false` the value goes to
    /// memory only, its memory expiration is its lifetime, and any disk copy of `key` is
    /// removed, so that when memory later drops the value a read misses instead of finding
    /// an older one on disk; when no write to `key` (nor a whole-cache write) is queued and
    /// the maybeCached set says no file exists (no system call), that store runs inline on
    /// the caller's thread. With a disk copy, the disk expiration is the entry's lifetime
    /// and the memory expiration only its residency in RAM.
    /// An already-over expiration stores nothing (`stored: false`) and removes any older
    /// value of `key` from both tiers. A disk failure also removes `key` from memory, so a
    /// failed store never leaves the new value in one tier and the old one in the other
    /// visible; the completion gets the disk error.
    ///
    /// - Parameters:
    ///   - options: `toDisk`, `diskExpiration`, `memoryExpiration`, `forcedExtension`,
    ///     `referenceDate`, `priority` apply.
    ///   - callbackQueue: default `.untouch`.
    ///   - completion: called exactly once, unless nil.
    @discardableResult
    func store(
        _ entry: CacheEntry, forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<StoreResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        let operation = storeOperation(entry, forKey: key, options: options)
        if !options.toDisk {
            // Inline when nothing for this key is queued and the disk certainly has no file
            // (the maybeCached set answers without a system call, so the book's lock is never
            // held across disk I/O), and no direct commit is under way (it could put the key
            // in the unwritten table after the look and in memory before this store). The
            // memory store happens under the same lock, so a concurrent disk read cannot put
            // an older value back after it.
            let result = scheduler.runInlineWrite(forKey: key, {
                !mayHoldDiskCopy(key: key, forcedExtension: options.forcedExtension)
            }) {
                perform(operation, inline: true)
            }
            if let result {
                return runInline(callbackQueue, options.priority, completion) { result.map(LocalStore.storeResult) }
            }
        }
        return enqueueWrite(operation, scope: .key(key), callbackQueue, options.priority, completion, LocalStore.storeResult)
    }

    /// The write a store of `entry` under `key` with `options` is. A memory-only entry's
    /// lifetime is its memory expiration, else the expiration the caller gave (a TTL asked
    /// for is never silently replaced by the memory default), else the memory default.
    func storeOperation(_ entry: CacheEntry, forKey key: CacheKey, options: Options) -> WriteOperation {
        .store(.init(
            key: key, entry: entry, toDisk: options.toDisk,
            expiration: options.diskExpiration ?? diskStorage.defaultExpiration,
            memoryExpiration: options.memoryExpiration ?? (options.toDisk ? nil : options.diskExpiration)
                ?? config.memory.expiration,
            forcedExtension: options.forcedExtension, countedFrom: options.referenceDate))
    }

    /// Gives `key` a new expiration counted from now, without loading it.
    ///
    /// Runs on the ioQueue. The entry gets `options.diskExpiration` (nil: the disk tier's
    /// rule) as its new lifetime, in both tiers; a memory copy restarts its residency
    /// with `options.memoryExpiration` (nil: its own). A memory-only entry gets
    /// `options.memoryExpiration`, else `options.diskExpiration`, else its own memory
    /// expiration as its lifetime. A new lifetime already over (`.expired`, a past date)
    /// expires the entry now, as Redis's EXPIRE does: it is removed from both tiers,
    /// counted as an expiration, and the result is `touched: true` with `expiresAt` the
    /// current whole second.
    @discardableResult
    func touch(
        forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<TouchResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        let operation = WriteOperation.touch(.init(
            key: key, expiration: options.diskExpiration ?? diskStorage.defaultExpiration,
            memoryExpiration: options.memoryExpiration,
            memoryOnlyExpiration: options.memoryExpiration ?? options.diskExpiration,
            forcedExtension: options.forcedExtension, keepsAbsolute: options.diskExpiration == nil))
        return enqueueWrite(operation, scope: .key(key), callbackQueue, options.priority, completion) {
            if case .touched(let r) = $0 { return r }
            return TouchResult(touched: false, expiresAt: nil)
        }
    }

    /// Removes `key` from the chosen tiers. Runs on the ioQueue. Removing the memory copy
    /// alone keeps the disk copy, which then gets the lifetime memory extended.
    ///
    /// - Returns (through `completion`): whether either tier held the key.
    @discardableResult
    func remove(
        forKey key: CacheKey, fromMemory: Bool = true, fromDisk: Bool = true, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<Bool, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        let operation = WriteOperation.remove(
            key: key, fromMemory: fromMemory, fromDisk: fromDisk, forcedExtension: options.forcedExtension)
        return enqueueWrite(operation, scope: .key(key), callbackQueue, options.priority, completion) {
            if case .removed(let n) = $0 { return n > 0 }
            return false
        }
    }

    @Sendable static func storeResult(_ outcome: WriteOutcome) -> StoreResult {
        if case .stored(let r) = outcome { return r }
        return StoreResult(stored: false, size: 0, expiresAt: nil, version: nil)
    }
}

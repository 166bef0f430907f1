// The keyed writes of this host's keys: store, touch, remove. Each becomes a
// `WriteOperation` that `perform` applies on the ioQueue, changing both tiers there as
// one step (disk first, then memory, so memory never holds a value the disk refused);
// only a memory-only store of a key with nothing queued and certainly no file runs
// inline (through `perform` too).

import Foundation

extension LocalStore {
    /// `HybridCache.store` of a local key (see there).
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

    /// `HybridCache.touch` of a local key (see there).
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

    /// `HybridCache.remove` of a local key (see there).
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

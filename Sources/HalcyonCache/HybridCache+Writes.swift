// The keyed writes of the hybrid cache: store, touch, remove. Each runs on the ioQueue
// and changes both tiers there as one step (disk first, then memory, so memory never
// holds a value the disk refused); only a memory-only store of a key with nothing queued
// and nothing on disk runs inline.

import Foundation

extension HybridCache {
    /// Stores `entry` under `key` in memory and (unless `options.toDisk` is false) on disk.
    ///
    /// Runs on the ioQueue after every earlier write. With `toDisk: false` the value goes to
    /// memory only and any disk copy of `key` is removed, so that when memory later evicts
    /// the value a read misses instead of finding an older one on disk; when no write to
    /// `key` (nor a whole-cache write) is queued and the disk holds no live copy, that store
    /// runs inline on the caller's thread.
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
    public func store(
        _ entry: CacheEntry, forKey key: String, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<StoreResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        if !options.toDisk {
            // Inline when nothing for this key is queued and the disk has nothing to remove;
            // both checks hold while the book's lock is held (only a queued write could change
            // the key's file). The memory store happens under the same lock, so a concurrent
            // disk read cannot put an older value back after it.
            let result = writes.withLock { book -> Result<StoreResult, CacheError>? in
                guard !book.mustQueue(key),
                      !diskStorage.isCached(forKey: key, forcedExtension: options.forcedExtension)
                else { return nil }
                book.epoch &+= 1
                book.inlineEpoch &+= 1
                return .success(storeInMemory(entry, forKey: key, options: options))
            }
            if let result {
                counters.withLock { $0.sets += 1 }
                return runInline(callbackQueue, options.priority, completion) { result }
            }
        }
        return enqueue(write: .key(key), callbackQueue, options.priority, completion) { [self] in
            dispatchPrecondition(condition: .onQueue(ioQueue))
            let result = options.toDisk
                ? storeInBothTiers(entry, forKey: key, options: options)
                : storeInMemoryOnly(entry, forKey: key, options: options)
            counters.withLock { $0.sets += 1 }
            return result
        }
    }

    /// Gives `key` a new expiration counted from now in both tiers, without loading it.
    ///
    /// Runs on the ioQueue. The disk gets `options.diskExpiration` (nil: the disk tier's
    /// rule), memory gets `options.memoryExpiration` (nil: the entry's own), capped at the
    /// disk's new expiration.
    @discardableResult
    public func touch(
        forKey key: String, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<TouchResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueue(write: .key(key), callbackQueue, options.priority, completion) { [self] in
            dispatchPrecondition(condition: .onQueue(ioQueue))
            do throws(CacheError) {
                let diskMeta = try diskStorage.touch(
                    forKey: key, expiration: options.diskExpiration, forcedExtension: options.forcedExtension)
                var memoryDate = memoryStorage.touch(forKey: key, expiration: options.memoryExpiration)
                if let diskMeta, let date = memoryDate, date > diskMeta.expiration {
                    memoryDate = memoryStorage.touch(forKey: key, expiration: .date(diskMeta.expiration))
                }
                let expiresAt = diskMeta.map(\.expiration) ?? memoryDate
                return .success(TouchResult(
                    touched: diskMeta != nil || memoryDate != nil,
                    expiresAt: expiresAt.flatMap(HybridCache.optionalDate)))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Removes `key` from the chosen tiers. Runs on the ioQueue.
    ///
    /// - Returns (through `completion`): whether either tier held the key.
    @discardableResult
    public func remove(
        forKey key: String, fromMemory: Bool = true, fromDisk: Bool = true, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<Bool, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueue(write: .key(key), callbackQueue, options.priority, completion) { [self] in
            dispatchPrecondition(condition: .onQueue(ioQueue))
            let inMemory = fromMemory && memoryStorage.remove(forKey: key)
            do throws(CacheError) {
                let old = fromDisk ? existingFile(forKey: key, forcedExtension: options.forcedExtension) : nil
                let onDisk = fromDisk ? try diskStorage.remove(forKey: key, forcedExtension: options.forcedExtension) : false
                if onDisk { adjustDiskUsage(replacing: old, with: nil) }
                if inMemory || onDisk { counters.withLock { $0.removals += 1 } }
                return .success(inMemory || onDisk)
            } catch {
                if inMemory { counters.withLock { $0.removals += 1 } }
                return .failure(error)
            }
        }
    }

    // MARK: Helpers (ioQueue or inline under the write book)

    private func storeInMemory(_ entry: CacheEntry, forKey key: String, options: Options) -> StoreResult {
        let expiration = options.memoryExpiration ?? config.memory.expiration
        let stored = memoryStorage.store(entry, forKey: key, expiration: expiration)
        let expiresAt = stored ? memoryStorage.meta(forKey: key)?.expiration : nil
        return StoreResult(stored: stored, size: entry.bytes.count, expiresAt: expiresAt.flatMap(HybridCache.optionalDate))
    }

    /// A `toDisk: false` store on the ioQueue: memory gets the value, the disk loses its
    /// older copy. A disk that is not ready holds no copy, so that is no failure; a removal
    /// that fails otherwise is reported, with memory already holding the new value.
    private func storeInMemoryOnly(_ entry: CacheEntry, forKey key: String, options: Options) -> Result<StoreResult, CacheError> {
        let result = storeInMemory(entry, forKey: key, options: options)
        guard diskStorage.isReady else { return .success(result) }
        let old = existingFile(forKey: key, forcedExtension: options.forcedExtension)
        do throws(CacheError) {
            if try diskStorage.remove(forKey: key, forcedExtension: options.forcedExtension) {
                adjustDiskUsage(replacing: old, with: nil)
            }
            return .success(result)
        } catch {
            return .failure(error)
        }
    }

    private func storeInBothTiers(_ entry: CacheEntry, forKey key: String, options: Options) -> Result<StoreResult, CacheError> {
        let old = existingFile(forKey: key, forcedExtension: options.forcedExtension)
        do throws(CacheError) {
            let meta = try diskStorage.store(
                value: entry.bytes, flags: entry.flags, forKey: key, expiration: options.diskExpiration,
                forcedExtension: options.forcedExtension, referenceDate: options.referenceDate)
            guard let meta else {
                // Already expired: nothing stored; an older value must not outlive this write.
                memoryStorage.remove(forKey: key)
                if try diskStorage.remove(forKey: key, forcedExtension: options.forcedExtension) {
                    adjustDiskUsage(replacing: old, with: nil)
                }
                return .success(StoreResult(stored: false, size: entry.bytes.count, expiresAt: nil))
            }
            adjustDiskUsage(replacing: old, with: meta)
            memoryStorage.store(
                entry, forKey: key,
                expiration: cappedMemoryExpiration(options.memoryExpiration, diskExpiresAt: meta.expiration))
            enforceDiskSizeLimit()
            return .success(StoreResult(
                stored: true, size: entry.bytes.count, expiresAt: HybridCache.optionalDate(meta.expiration)))
        } catch {
            memoryStorage.remove(forKey: key)
            if (try? diskStorage.remove(forKey: key, forcedExtension: options.forcedExtension)) == true {
                adjustDiskUsage(replacing: old, with: nil)
            }
            return .failure(error)
        }
    }

    /// The memory expiration to use for a value whose disk copy expires at `diskExpiresAt`:
    /// the requested (or default) one, unless that would outlive the disk copy.
    func cappedMemoryExpiration(_ requested: StorageExpiration?, diskExpiresAt: Date) -> StorageExpiration {
        let expiration = requested ?? config.memory.expiration
        let now = config.memory.clock.now()
        return expiration.estimatedExpirationSince(now) > diskExpiresAt ? .date(diskExpiresAt) : expiration
    }

    /// After a store: keeps the disk tier within its size limit now, not at the next
    /// sweep. Checks the running account (O(1)); only when it says "over" does the disk
    /// tier list the folder, trim to half the limit, and the account get recounted.
    func enforceDiskSizeLimit() {
        dispatchPrecondition(condition: .onQueue(ioQueue))
        let limit = config.disk.sizeLimit
        guard limit > 0 else { return }
        if diskUsage.withLock({ $0 }) == nil { recountDiskUsage() }
        guard let usage = diskUsage.withLock({ $0 }), usage.bytes > limit else { return }
        do throws(CacheError) {
            let removed = try diskStorage.removeSizeExceededValues()
            counters.withLock { $0.diskEvictions += removed.count }
        } catch {
            counters.withLock { $0.maintenanceErrors += 1 }
        }
        recountDiskUsage()
    }
}

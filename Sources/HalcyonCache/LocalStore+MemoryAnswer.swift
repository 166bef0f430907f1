// The synchronous read entry point: what memory alone can answer, on the caller's
// thread, with no task, no completion and no callback queue. The transport's fast path
// uses it for reads of the `fast` kind; anything memory cannot answer goes on to the
// ordinary reads (LocalStore+Reads.swift), which keep every path and order.

import Foundation

extension LocalStore {

    /// Reads `key` from memory only, as `retrieve` would first: same lifetime judgement,
    /// extension and counters. Never blocks on the ioQueue.
    ///
    /// Threading: any thread; touches one memory shard's lock, and the write book's only
    /// while some write is queued.
    func memoryLookup(forKey key: CacheKey, options: Options = .init()) -> MemoryLookup<RetrieveResult> {
        switch readPlan(forKey: key, options: options, { memoryRetrieve(forKey: key, options: options) }) {
        case .memoryHit(let found): return .answered(found)
        case .memoryOnlyMiss: return .answered(RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil))
        case .behindWrite: return .behindWrite
        case .diskInline, .diskQueued: return .missed
        }
    }

    /// After `memoryLookup` answered `.missed`: `retrieve` without asking memory again
    /// (a read queued behind a write that arrived meanwhile still asks it, after the write).
    @discardableResult
    func retrieveAfterMemoryMiss(
        forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<RetrieveResult, CacheError>) -> Void
    ) -> CacheTask {
        retrieve(forKey: key, options: options, callbackQueue: callbackQueue, memoryAsked: true, completion: completion)
    }

    /// The description `describe` would give of a key memory holds, or nil when memory
    /// does not hold it live or a queued write concerns it: then take `describe` or
    /// `cachedType`. Never extends, never counts (as `describe`).
    ///
    /// Threading: any thread; touches one memory shard's lock, and the write book's only
    /// while some write is queued.
    func memoryDescription(forKey key: CacheKey, options: Options = .init()) -> EntryDescription? {
        let plan = readPlan(forKey: key, options: options) { memoryStorage.meta(forKey: key, referenceDate: options.referenceDate) }
        guard case .memoryHit(let meta) = plan else { return nil }
        return HybridCache.description(of: meta)
    }
}

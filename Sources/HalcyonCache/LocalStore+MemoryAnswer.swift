// The synchronous read entry point: what memory alone can answer, on the caller's
// thread, with no task, no completion and no callback queue. The transport's fast path
// uses it for reads of the `fast` kind; anything memory cannot answer goes on to the
// ordinary reads (LocalStore+Reads.swift), which keep every path and order.

import Foundation

extension LocalStore {

    /// `HybridCache.memoryLookup(forKey:options:taking:)` of a local key (see there): a hit
    /// is lent to `take` where it lies (`memoryRead`).
    func memoryLookup(
        forKey key: CacheKey, options: Options, taking take: (LentEntry, _ expiresAt: Date?) -> Bool
    ) -> MemoryLookup<RetrieveResult?> {
        let plan = readPlan(forKey: key, options: options) { () -> RetrieveResult?? in
            memoryRead(forKey: key, options: options, taking: take)
        }
        switch plan {
        case .memoryHit(let answer): return .answered(answer)
        case .memoryOnlyMiss: return .answered(RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil))
        case .behindWrite: return .behindWrite
        case .diskInline, .diskQueued: return .missed
        }
    }


    /// `HybridCache.memoryDescription` of a local key (see there).
    func memoryDescription(forKey key: CacheKey, options: Options = .init()) -> EntryDescription? {
        let plan = readPlan(forKey: key, options: options) { memoryStorage.meta(forKey: key, referenceDate: options.referenceDate) }
        guard case .memoryHit(let meta) = plan else { return nil }
        return HybridCache.description(of: meta)
    }
}

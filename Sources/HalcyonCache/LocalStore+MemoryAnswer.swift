// The synchronous read entry point: what memory alone can answer, on the caller's
// thread, with no task, no completion and no callback queue. The transport's fast path
// uses it for reads of the `fast` kind; anything memory cannot answer goes on to the
// ordinary reads (LocalStore+Reads.swift), which keep every path and order.

import Foundation

extension LocalStore {

    /// `HybridCache.memoryLookup` of a local key (see there).
    func memoryLookup(forKey key: CacheKey, options: Options = .init()) -> MemoryLookup<RetrieveResult> {
        memoryLend(
            forKey: key, options: options,
            found: { entry, expiresAt in RetrieveResult(cacheType: .memory, entry: copy entry, expiresAt: expiresAt) },
            absent: { RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil) })
    }

    /// A memory lookup of a local key answered by `found` of the entry lent where it lies
    /// (`memoryRead`), or by `absent` for a `fromMemoryOnly` miss: the one read behind
    /// both `HybridCache.memoryLookup`s.
    @inline(__always)
    func memoryLend<Answer>(
        forKey key: CacheKey, options: Options,
        found: (borrowing CacheEntry, _ expiresAt: Date?) -> Answer, absent: () -> Answer
    ) -> MemoryLookup<Answer> {
        switch readPlan(forKey: key, options: options, { memoryRead(forKey: key, options: options, found) }) {
        case .memoryHit(let answer): return .answered(answer)
        case .memoryOnlyMiss: return .answered(absent())
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

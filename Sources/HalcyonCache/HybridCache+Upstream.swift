// The public operations of the hybrid cache on shared keys (`Config.upstream`): reads go
// memory → upstream, writes take effect upstream before their completion, and this host
// keeps a memory-only copy under the rule of `NearCache`. Shared keys never get a disk
// file or a journal record, so a restart starts with no copy of them and cannot serve a
// stale one. The public methods call into here from one-line hooks at their entry.

import Foundation
import HalcyonSupport

extension HybridCache {
    /// The near-cache of shared keys when `key` is one of them.
    func shared(_ key: CacheKey) -> NearCache? {
        guard let nearCache, nearCache.shares(key) else { return nil }
        return nearCache
    }

    // MARK: Reads

    /// `retrieve` of a shared key. A memory copy answers (`.memory`) unless a write of the
    /// key is on its way upstream, in which case the read queues behind it; otherwise the
    /// upstream answers (`.upstream`) and its value is kept as this host's copy. A shared
    /// key's lifetime is the upstream key's (PTTL); a read extends it there, now and then
    /// (`extendIfDue`), never locally alone. While the upstream is unreachable a read
    /// without a copy is a miss.
    func retrieveShared(
        _ near: NearCache, forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: @escaping @Sendable (Result<RetrieveResult, CacheError>) -> Void
    ) -> CacheTask {
        if !near.writePending(key), let copy = memoryCopy(forKey: key, options: options) {
            let hit = extendIfDue(near, key, copy, options)
            return runInline(callbackQueue, options.priority, completion) { .success(hit) }
        }
        let task = makeTask(callbackQueue, options.priority, completion)
        near.admit(key, write: false) { [self] in
            guard task.begin() else { return near.finish(key, write: false) }
            readShared(near, forKey: key, options: options) { result in
                // Delivered before the next operation of the key starts: replies keep the order.
                self.deliver(result, task: task, callbackQueue, options.priority, completion)
                near.finish(key, write: false)
            }
        }
        return task
    }

    /// Memory, then the upstream, for an admitted read.
    private func readShared(
        _ near: NearCache, forKey key: CacheKey, options: Options,
        _ done: @escaping @Sendable (Result<RetrieveResult, CacheError>) -> Void
    ) {
        if let copy = memoryCopy(forKey: key, options: options) {
            return done(.success(extendIfDue(near, key, copy, options)))
        }
        let miss = RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil)
        if options.fromMemoryOnly { return done(.success(miss)) }
        near.tier.get(key) { result in
            switch result {
            case .success(let found?):
                near.keep(key, found.entry, timeToLive: found.timeToLive, sequence: found.sequence, sliding: found.slidingTimeToLive)
                near.count { $0.hits += 1 }
                let read = RetrieveResult(cacheType: .upstream, entry: found.entry, expiresAt: HybridCache.expiry(found.timeToLive))
                done(.success(self.extendIfDue(near, key, read, options)))
            case .success(nil):
                near.count { $0.misses += 1 }
                done(.success(miss))
            case .failure(let failure):
                HybridCache.count(failure, near)
                done(.success(miss))
            }
        }
    }

    /// What a read of a shared key does to its lifetime upstream (in the background, never
    /// a round trip in the read's way), and the reply it gives: `.cacheTime` (the default)
    /// renews a sliding lifetime (`slideIfDue`); `.expirationTime` gives the key the asked
    /// lifetime (`renewIfDue`), and the reply carries the asked end, as a local read's
    /// does; `.none` leaves it.
    func extendIfDue(_ near: NearCache, _ key: CacheKey, _ hit: RetrieveResult, _ options: Options) -> RetrieveResult {
        switch options.extendingExpiration {
        case ExpirationExtending.none:
            return hit
        case .cacheTime:
            slideIfDue(near, key, hit)
            return hit
        case .expirationTime(let asked):
            return renewIfDue(near, key, hit, asked)
        }
    }

    /// Renews a shared key's sliding lifetime when a read hit a copy with less than half of
    /// it left (`NearCache.slideDue`): at most one renewal per half lifetime per key and host.
    private func slideIfDue(_ near: NearCache, _ key: CacheKey, _ hit: RetrieveResult) {
        // A copy with no end has nothing to renew: no lock taken on that hit.
        guard let entry = hit.entry, let expiresAt = hit.expiresAt,
              let sliding = near.slideDue(key, remaining: expiresAt.timeIntervalSince(config.memory.clock.now())) else { return }
        near.tier.slide(key, version: entry.version, lifetime: sliding, completion: renewalEnd(near, key, entry.version, sliding: sliding))
    }

    /// Gives a shared key the lifetime a read asked for when `NearCache.renewalDue` says
    /// so: about twice per lifetime per key and host, whatever the read rate.
    private func renewIfDue(_ near: NearCache, _ key: CacheKey, _ hit: RetrieveResult, _ asked: StorageExpiration) -> RetrieveResult {
        guard let entry = hit.entry else { return hit }
        // A lifetime already over ends the key now, as it ends a local entry.
        let now = config.memory.clock.now()
        let lifetime = HybridCache.upstreamLifetime(asked, now: now) ?? .milliseconds(1)
        let askedEnd = lifetime.milliseconds.map { now.addingTimeInterval(Double($0) / 1000) }
        guard near.renewalDue(key, asked: lifetime, askedEnd: askedEnd ?? .distantFuture,
                              copyEnd: hit.expiresAt ?? .distantFuture, now: now) else { return hit }
        near.tier.renew(key, version: entry.version, lifetime: lifetime,
                        completion: renewalEnd(near, key, entry.version, sliding: lifetime.slidingMilliseconds))
        var renewed = hit
        renewed.expiresAt = askedEnd
        return renewed
    }

    /// The completion of a slide or a renewal: a failure is counted, and the copy follows
    /// the outcome (`NearCache.renewalEnded`).
    private func renewalEnd(
        _ near: NearCache, _ key: CacheKey, _ version: UInt64, sliding: Int64?
    ) -> @Sendable (Result<Upstream.Renewal, Upstream.Failure>) -> Void {
        { result in
            if case .failure(let failure) = result { HybridCache.count(failure, near) }
            near.renewalEnded(key, version: version, sliding: sliding, try? result.get())
        }
    }

    /// This host's copy of a shared key, without extending it.
    private func memoryCopy(forKey key: CacheKey, options: Options) -> RetrieveResult? {
        memoryStorage.valueAndMeta(forKey: key, referenceDate: options.referenceDate, extendingExpiration: ExpirationExtending.none)
            .map { entry, meta in
                RetrieveResult(cacheType: .memory, entry: entry, expiresAt: HybridCache.optionalDate(meta.expiration))
            }
    }

    /// `memoryLookup` of a shared key: memory answers only when no write of it is pending.
    func memoryLookupShared(_ near: NearCache, forKey key: CacheKey, options: Options) -> MemoryLookup<RetrieveResult> {
        if near.writePending(key) { return .behindWrite }
        if let copy = memoryCopy(forKey: key, options: options) {
            return .answered(extendIfDue(near, key, copy, options))
        }
        return options.fromMemoryOnly ? .answered(RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil)) : .missed
    }

    /// `describe` (and `cachedType`) of a shared key: from the memory copy, else from a
    /// read of the upstream (which then keeps a copy).
    func describeShared(
        _ near: NearCache, forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: @escaping @Sendable (Result<EntryDescription, CacheError>) -> Void
    ) -> CacheTask {
        if !near.writePending(key), let meta = memoryStorage.meta(forKey: key, referenceDate: options.referenceDate) {
            return runInline(callbackQueue, options.priority, completion) { .success(HybridCache.description(of: meta)) }
        }
        return retrieveShared(near, forKey: key, options: options, callbackQueue: callbackQueue) { result in
            completion(result.map { found in
                guard let entry = found.entry else {
                    return EntryDescription(cacheType: .none, size: 0, flags: 0, expiresAt: nil, lastAccessAt: nil)
                }
                return EntryDescription(
                    cacheType: found.cacheType, size: entry.bytes.count, flags: entry.flags, expiresAt: found.expiresAt,
                    memoryExpiresAt: found.cacheType == .memory ? found.expiresAt : nil, lastAccessAt: Date(),
                    version: entry.version)
            })
        }
    }

    // MARK: Writes

    /// Runs `body` as a write of `key` in the key's order, delivering its result.
    func writeShared<T: Sendable>(
        _ near: NearCache, _ key: CacheKey, _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<T, CacheError>) -> Void)?,
        _ body: @escaping @Sendable (_ done: @escaping @Sendable (Result<T, CacheError>) -> Void) -> Void
    ) -> CacheTask {
        let task = makeTask(callbackQueue, priority, completion)
        near.admit(key, write: true) { [self] in
            guard task.begin() else { return near.finish(key, write: true) }
            body { result in
                if case .failure = result { near.drop(key) }
                self.deliver(result, task: task, callbackQueue, priority, completion)
                near.finish(key, write: true)
            }
        }
        return task
    }

    /// `store` of a shared key: `SET` upstream, then the value is this host's copy.
    func storeShared(
        _ near: NearCache, _ entry: CacheEntry, forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: (@Sendable (Result<StoreResult, CacheError>) -> Void)?
    ) -> CacheTask {
        let lifetime = upstreamLifetime(options)
        return writeShared(near, key, callbackQueue, options.priority, completion) { [self] done in
            guard let lifetime else {
                // An expiration already over stores nothing and removes any older value.
                return near.tier.remove(key) { result in
                    done(HybridCache.mapped(result, near) { _ in
                        near.drop(key)
                        return StoreResult(stored: false, size: 0, expiresAt: nil, version: nil)
                    })
                }
            }
            near.tier.set(key, entry, lifetime: lifetime) { result in
                done(HybridCache.mapped(result, near) { written in
                    var kept = entry
                    kept.version = written.version ?? 0
                    near.keep(key, kept, timeToLive: written.timeToLive, sequence: written.sequence, sliding: lifetime.slidingMilliseconds)
                    self.counters.withLock { $0.sets += 1 }
                    return StoreResult(
                        stored: true, size: entry.bytes.count, expiresAt: HybridCache.expiry(written.timeToLive), version: written.version)
                })
            }
        }
    }

    /// `add` and `compareAndStore` of a shared key (`version` nil: add).
    func conditionalStoreShared(
        _ near: NearCache, _ entry: CacheEntry, forKey key: CacheKey, version: UInt64?, options: Options,
        callbackQueue: CallbackQueue, completion: (@Sendable (Result<ConditionalStoreResult, CacheError>) -> Void)?
    ) -> CacheTask {
        let lifetime = upstreamLifetime(options)
        return writeShared(near, key, callbackQueue, options.priority, completion) { done in
            guard let lifetime else {
                return done(.success(ConditionalStoreResult(stored: false, version: nil, expiresAt: nil)))
            }
            let finished: @Sendable (Result<Upstream.Written, Upstream.Failure>) -> Void = { result in
                done(HybridCache.mapped(result, near) { written in
                    if written.stored {
                        var kept = entry
                        kept.version = written.version ?? 0
                        near.keep(key, kept, timeToLive: written.timeToLive, sequence: written.sequence,
                                  sliding: lifetime.slidingMilliseconds)
                    }
                    return ConditionalStoreResult(
                        stored: written.stored, version: written.version, expiresAt: HybridCache.expiry(written.timeToLive))
                })
            }
            if let version {
                near.tier.compareAndSet(key, entry, version: version, lifetime: lifetime, completion: finished)
            } else {
                near.tier.add(key, entry, lifetime: lifetime, completion: finished)
            }
        }
    }

    /// `increment` of a shared key: `INCRBY` upstream (Redis's 64-bit arithmetic), in one
    /// script with the check for a missing key when `initial` is nil, so it is atomic
    /// across hosts either way.
    func incrementShared(
        _ near: NearCache, forKey key: CacheKey, by delta: Int64, initial: Int64?, flags: UInt32, options: Options,
        callbackQueue: CallbackQueue, completion: (@Sendable (Result<IncrementOutcome, CacheError>) -> Void)?
    ) -> CacheTask {
        let lifetime: Upstream.Lifetime? = options.diskExpiration == nil ? .keep : upstreamLifetime(options)
        return writeShared(near, key, callbackQueue, options.priority, completion) { done in
            near.tier.increment(key, by: delta, initial: initial, flags: flags, lifetime: lifetime ?? .milliseconds(1)) { result in
                // The flags of an existing key are Redis's to keep: the copy goes, the next read brings it.
                near.drop(key)
                done(HybridCache.mapped(result, near) { outcome in
                    switch outcome {
                    case .value(let sum, let written):
                        return .incremented(value: sum, version: written.version ?? 0, expiresAt: HybridCache.expiry(written.timeToLive))
                    case .notAnInteger: return .notAnInteger
                    case .overflow: return .overflow
                    case .missing: return .missing
                    }
                })
            }
        }
    }

    /// `touch` of a shared key: a new lifetime upstream (an expiration already over
    /// removes the key, as `EXPIRE` with a past time does). The copy goes.
    func touchShared(
        _ near: NearCache, forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: (@Sendable (Result<TouchResult, CacheError>) -> Void)?
    ) -> CacheTask {
        let expiration = options.diskExpiration ?? options.memoryExpiration ?? diskStorage.defaultExpiration
        let lifetime = HybridCache.upstreamLifetime(expiration)
        return writeShared(near, key, callbackQueue, options.priority, completion) { done in
            let finished: @Sendable (Result<Bool, Upstream.Failure>) -> Void = { result in
                near.drop(key)
                done(HybridCache.mapped(result, near) { touched in
                    TouchResult(touched: touched, expiresAt: touched ? lifetime.flatMap(HybridCache.expiry) : nil)
                })
            }
            if let lifetime {
                near.tier.touch(key, lifetime: lifetime, completion: finished)
            } else {
                near.tier.remove(key, completion: finished)
            }
        }
    }

    /// `remove` of a shared key: from the upstream and this host; `fromDisk: false`
    /// (memory only) drops this host's copy alone.
    func removeShared(
        _ near: NearCache, forKey key: CacheKey, fromMemory: Bool, fromDisk: Bool, options: Options,
        callbackQueue: CallbackQueue, completion: (@Sendable (Result<Bool, CacheError>) -> Void)?
    ) -> CacheTask {
        writeShared(near, key, callbackQueue, options.priority, completion) { [self] done in
            guard fromDisk else {
                let held = fromMemory && memoryStorage.isCached(forKey: key)
                if fromMemory { near.drop(key) }
                return done(.success(held))
            }
            near.tier.remove(key) { result in
                near.drop(key)
                done(HybridCache.mapped(result, near) { removed in
                    if removed { self.counters.withLock { $0.removals += 1 } }
                    return removed
                })
            }
        }
    }

    // MARK: Several keys

    /// `retrieveMany` when some keys are shared: every key through `retrieve`.
    func retrieveManySplit(
        _ keys: [CacheKey], options: Options, callbackQueue: CallbackQueue,
        completion: @escaping @Sendable (Result<[RetrieveResult], CacheError>) -> Void
    ) {
        _ = gather(keys.count, callbackQueue, options.priority, completion) { index, done in
            retrieve(forKey: keys[index], options: options, completion: done)
        }
    }

    /// Starts `count` calls (`start(index, done)`, in order) and delivers their results
    /// together, in order, or the first failure, once all have answered.
    func gather<T: Sendable>(
        _ count: Int, _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<[T], CacheError>) -> Void)?,
        _ start: (Int, @escaping @Sendable (Result<T, CacheError>) -> Void) -> CacheTask
    ) -> CacheTask {
        let state = Locked(Gathered<T>(results: Array(repeating: nil, count: count), failure: nil, left: count))
        let finish: @Sendable () -> Void = {
            let done = state.withLock { $0 }
            let outcome: Result<[T], CacheError> = done.failure.map { .failure($0) } ?? .success(done.results.map { $0! })
            callbackQueue.execute(priority: priority) { completion?(outcome) }
        }
        guard count > 0 else {
            finish()
            return CacheTask.finished()
        }
        let tasks = (0..<count).map { index in
            start(index) { result in
                let last = state.withLock { g -> Bool in
                    switch result {
                    case .success(let value): g.results[index] = value
                    case .failure(let error): if g.failure == nil { g.failure = error }
                    }
                    g.left -= 1
                    return g.left == 0
                }
                if last { finish() }
            }
        }
        return CacheTask.cancellable { tasks.forEach { $0.cancel() } }
    }

    /// `removePrefix` when shared keys may start with `prefix`: removed upstream (on
    /// every primary), this host's copies of them dropped, then the host-local keys
    /// removed as usual; the count is both together. In the shared keys' order
    /// (`NearCache.admitPrefix`): it starts after every operation already admitted on a
    /// matching key, and operations on matching keys admitted after it wait for its reply.
    func removePrefixShared(
        _ near: NearCache, _ prefix: CacheKey, callbackQueue: CallbackQueue,
        completion: (@Sendable (Result<Int, CacheError>) -> Void)?
    ) -> CacheTask {
        let task = makeTask(callbackQueue, .normal, completion)
        near.admitPrefix(prefix) { [self] id in
            let reply: @Sendable (Result<Int, CacheError>) -> Void = { result in
                self.deliver(result, task: task, callbackQueue, .normal, completion)
                near.finishPrefix(id)
            }
            guard task.begin() else { return near.finishPrefix(id) }
            near.tier.removePrefix(prefix) { [self] result in
                for key in memoryStorage.keys(prefix: prefix, memoryOnly: false) where near.shares(key) { near.drop(key) }
                switch HybridCache.mapped(result, near, { $0 }) {
                case .failure(let error):
                    reply(.failure(error))
                case .success(let upstream):
                    _ = removeLocalPrefix(prefix, callbackQueue: .untouch) { local in reply(local.map { $0 + upstream }) }
                }
            }
        }
        return task
    }

    /// `clear(shared: true)`: this host's tiers are cleared as by `clear` (a whole-cache
    /// write, in the ioQueue's order), and every shared key is removed upstream, for every
    /// host: `removePrefix` of each shared prefix (of everything when every key is
    /// shared), on every primary; lease keys are left to end on their own. The upstream
    /// part keeps the shared keys' order as a prefix removal of "" does
    /// (`NearCache.admitPrefix`), and the copies kept meanwhile by operations admitted
    /// before it go after it. Both parts start now; the reply waits for both (an upstream
    /// failure fails it, this host cleared all the same), and a cancel only changes the
    /// reply.
    func clearShared(
        _ near: NearCache, memory: Bool, disk: Bool, callbackQueue: CallbackQueue,
        completion: (@Sendable (Result<ClearResult, CacheError>) -> Void)?
    ) -> CacheTask {
        let task = makeTask(callbackQueue, .normal, completion)
        _ = task.begin()
        let parts = Locked(ClearParts())
        // The second part to arrive delivers; the prefix hold ends after the reply.
        let finish: @Sendable () -> Void = { [self] in
            guard let (local, shared, hold) = parts.withLock({ $0.take() }) else { return }
            let result = local.flatMap { local in
                shared.map { ClearResult(removed: local.removed, droppedShared: local.droppedShared + $0.dropped, removedShared: $0.removed) }
            }
            deliver(result, task: task, callbackQueue, .normal, completion)
            near.finishPrefix(hold)
        }
        _ = enqueueWrite(.clear(memory: memory, disk: disk), scope: .wholeCache, .untouch, .normal, { local in
            parts.withLock { $0.local = local }
            finish()
        }, HybridCache.clearResult)
        near.admitPrefix("") { [self] hold in
            removeSharedKeys(near) { removed in
                let dropped = near.dropCopies()
                parts.withLock {
                    $0.shared = HybridCache.mapped(removed, near) { ($0, dropped) }
                    $0.hold = hold
                }
                finish()
            }
        }
        return task
    }

    /// Removes upstream every key this host shares (`removePrefix` of each shared prefix
    /// not under another one, or of "" when every key is shared); how many.
    private func removeSharedKeys(_ near: NearCache, completion: @escaping @Sendable (Result<Int, Upstream.Failure>) -> Void) {
        let prefixes = near.prefixes.isEmpty ? [""]
            : Set(near.prefixes.filter { prefix in !near.prefixes.contains { $0 != prefix && prefix.hasPrefix($0) } })
        let gathered = Locked((removed: 0, failure: Upstream.Failure?.none, left: prefixes.count))
        for prefix in prefixes {
            near.tier.removePrefix(prefix) { result in
                let done = gathered.withLock { g -> Result<Int, Upstream.Failure>? in
                    switch result {
                    case .success(let n): g.removed += n
                    case .failure(let failure): g.failure = g.failure ?? failure
                    }
                    g.left -= 1
                    guard g.left == 0 else { return nil }
                    return g.failure.map { .failure($0) } ?? .success(g.removed)
                }
                if let done { completion(done) }
            }
        }
    }

    // MARK: Conversions

    /// The upstream lifetime of a store with `options` (as `storeOperation` chooses the
    /// local one); nil when it is already over.
    func upstreamLifetime(_ options: Options) -> Upstream.Lifetime? {
        let expiration = options.diskExpiration
            ?? (options.toDisk ? diskStorage.defaultExpiration : options.memoryExpiration ?? config.memory.expiration)
        return HybridCache.upstreamLifetime(expiration)
    }

    /// A span (`.seconds`, `.days`) slides, as it does on the local tiers; an instant
    /// (`.date`) does not.
    static func upstreamLifetime(_ expiration: StorageExpiration, now: Date = Date()) -> Upstream.Lifetime? {
        if expiration.isExpired { return nil }
        if case .never = expiration { return .never }
        // A span is taken as given, not through an instant (whose rounding could add a millisecond).
        let seconds: TimeInterval
        switch expiration {
        case .seconds(let span): seconds = span
        case .days(let days): seconds = TimeInterval(days) * 86_400
        default: seconds = expiration.estimatedExpirationSince(now).timeIntervalSince(now)
        }
        guard seconds > 0 else { return nil }
        let milliseconds = max(1, Int64((seconds * 1000).rounded(.up)))
        return expiration.isAbsolute ? .milliseconds(milliseconds) : .sliding(milliseconds)
    }

    static func expiry(_ lifetime: Upstream.Lifetime) -> Date? {
        lifetime.milliseconds.flatMap { expiry($0) }
    }

    /// The instant a PTTL (milliseconds) runs out; nil = never.
    static func expiry(_ timeToLive: Int64?) -> Date? {
        timeToLive.map { Date().addingTimeInterval(Double($0) / 1000) }
    }

    static func count(_ failure: Upstream.Failure, _ near: NearCache) {
        switch failure {
        case .unavailable, .unauthorized: near.count { $0.unavailable += 1 }
        case .refused: near.count { $0.refused += 1 }
        }
    }

    static func cacheError(_ failure: Upstream.Failure, _ near: NearCache) -> CacheError {
        count(failure, near)
        switch failure {
        case .unavailable(let detail): return .upstreamUnavailable(detail: detail)
        case .unauthorized(let detail): return .upstreamAuthenticationFailed(detail: detail)
        case .refused(let detail): return .upstreamRefused(detail: detail)
        }
    }

    static func mapped<T, U>(
        _ result: Result<T, Upstream.Failure>, _ near: NearCache, _ transform: (T) -> U
    ) -> Result<U, CacheError> {
        switch result {
        case .success(let value): return .success(transform(value))
        case .failure(let failure): return .failure(cacheError(failure, near))
        }
    }
}

/// The parts of `clearShared` that have arrived.
private struct ClearParts: Sendable {
    var local: Result<HybridCache.ClearResult, CacheError>?
    var shared: Result<(removed: Int, dropped: Int), CacheError>?
    var hold: UInt64?

    /// Both parts and the prefix hold, once all are here (then emptied, so only one caller gets them).
    mutating func take() -> (Result<HybridCache.ClearResult, CacheError>, Result<(removed: Int, dropped: Int), CacheError>, UInt64)? {
        guard let local, let shared, let hold else { return nil }
        self = ClearParts()
        return (local, shared, hold)
    }
}

/// The results of `gather` so far.
private struct Gathered<T: Sendable>: Sendable {
    var results: [T?]
    var failure: CacheError?
    var left: Int
}

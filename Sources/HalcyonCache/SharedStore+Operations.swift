// The operations on shared keys (`Config.upstream`): reads go memory copy → upstream,
// writes take effect upstream before their completion, and this host keeps a memory-only
// copy under the rule of `SharedStore` (SharedStore.swift). Shared keys never get a disk
// file or a journal record, so a restart starts with no copy of them and cannot serve a
// stale one. `HybridCache` calls these for every key it places here.

import Foundation
import HalcyonSupport

extension SharedStore {
    // MARK: Reads

    /// `retrieve` of a shared key. A memory copy answers (`.memory`) unless a write of the
    /// key is on its way upstream, in which case the read queues behind it; otherwise the
    /// upstream answers (`.upstream`) and its value is kept as this host's copy. A shared
    /// key's lifetime is the upstream key's (PTTL); a read extends it there, now and then
    /// (`extendIfDue`), never locally alone. While the upstream is unreachable a read
    /// without a copy is a miss.
    func retrieve(
        forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: @escaping @Sendable (Result<RetrieveResult, CacheError>) -> Void
    ) -> CacheTask {
        if !self.writePending(key), let copy = memoryCopy(forKey: key, options: options) {
            let hit = extendIfDue(key, copy, options)
            return runInline(callbackQueue, options.priority, completion) { .success(hit) }
        }
        let task = makeTask(callbackQueue, options.priority, completion)
        self.admit(key, write: false) { [self] in
            guard task.begin() else { return self.finish(key, write: false) }
            read(forKey: key, options: options) { result in
                // Delivered before the next operation of the key starts: replies keep the order.
                self.deliver(result, task: task, callbackQueue, options.priority, completion)
                self.finish(key, write: false)
            }
        }
        return task
    }

    /// Memory, then the upstream, for an admitted read.
    private func read(
        forKey key: CacheKey, options: Options,
        _ done: @escaping @Sendable (Result<RetrieveResult, CacheError>) -> Void
    ) {
        if let copy = memoryCopy(forKey: key, options: options) {
            return done(.success(extendIfDue(key, copy, options)))
        }
        let miss = RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil)
        if options.fromMemoryOnly { return done(.success(miss)) }
        self.tier.get(key) { result in
            switch result {
            case .success(let found?):
                self.keep(key, found.entry, timeToLive: found.timeToLive, sequence: found.sequence, sliding: found.slidingTimeToLive)
                self.count { $0.hits += 1 }
                let read = RetrieveResult(cacheType: .upstream, entry: found.entry, expiresAt: SharedStore.expiry(found.timeToLive))
                done(.success(self.extendIfDue(key, read, options)))
            case .success(nil):
                self.count { $0.misses += 1 }
                done(.success(miss))
            case .failure(let failure):
                self.count(failure)
                done(.success(miss))
            }
        }
    }

    /// What a read of a shared key does to its lifetime upstream (in the background, never
    /// a round trip in the read's way), and the reply it gives: `.cacheTime` (the default)
    /// renews a sliding lifetime (`slideIfDue`); `.expirationTime` gives the key the asked
    /// lifetime (`renewIfDue`), and the reply carries the asked end, as a local read's
    /// does; `.none` leaves it.
    func extendIfDue(_ key: CacheKey, _ hit: RetrieveResult, _ options: Options) -> RetrieveResult {
        switch options.extendingExpiration {
        case ExpirationExtending.none:
            return hit
        case .cacheTime:
            slideIfDue(key, hit)
            return hit
        case .expirationTime(let asked):
            return renewIfDue(key, hit, asked)
        }
    }

    /// Renews a shared key's sliding lifetime when a read hit a copy with less than half of
    /// it left (`slideDue`): at most one renewal per half lifetime per key and host.
    private func slideIfDue(_ key: CacheKey, _ hit: RetrieveResult) {
        // A copy with no end has nothing to renew: no lock taken on that hit.
        guard let entry = hit.entry, let expiresAt = hit.expiresAt,
              let sliding = self.slideDue(key, remaining: expiresAt.timeIntervalSince(clock.now())) else { return }
        self.tier.slide(key, version: entry.version, lifetime: sliding, completion: renewalEnd(key, entry.version, sliding: sliding))
    }

    /// Gives a shared key the lifetime a read asked for when `renewalDue` says
    /// so: about twice per lifetime per key and host, whatever the read rate.
    private func renewIfDue(_ key: CacheKey, _ hit: RetrieveResult, _ asked: StorageExpiration) -> RetrieveResult {
        guard let entry = hit.entry else { return hit }
        // A lifetime already over ends the key now, as it ends a local entry.
        let now = clock.now()
        let lifetime = SharedStore.upstreamLifetime(asked, now: now) ?? .milliseconds(1)
        let askedEnd = lifetime.milliseconds.map { now.addingTimeInterval(Double($0) / 1000) }
        guard self.renewalDue(key, asked: lifetime, askedEnd: askedEnd ?? .distantFuture,
                              copyEnd: hit.expiresAt ?? .distantFuture, now: now) else { return hit }
        self.tier.renew(key, version: entry.version, lifetime: lifetime,
                        completion: renewalEnd(key, entry.version, sliding: lifetime.slidingMilliseconds))
        var renewed = hit
        renewed.expiresAt = askedEnd
        return renewed
    }

    /// The completion of a slide or a renewal: a failure is counted, and the copy follows
    /// the outcome (`renewalEnded`).
    private func renewalEnd(
        _ key: CacheKey, _ version: UInt64, sliding: Int64?
    ) -> @Sendable (Result<Upstream.Renewal, Upstream.Failure>) -> Void {
        { result in
            if case .failure(let failure) = result { self.count(failure) }
            self.renewalEnded(key, version: version, sliding: sliding, try? result.get())
        }
    }

    /// This host's copy of a shared key, without extending it.
    private func memoryCopy(forKey key: CacheKey, options: Options) -> RetrieveResult? {
        copies.copy(forKey: key, referenceDate: options.referenceDate)
            .map { entry, meta in
                RetrieveResult(cacheType: .memory, entry: entry, expiresAt: HybridCache.optionalDate(meta.expiration))
            }
    }

    /// `memoryLookup` of a shared key: memory answers only when no write of it is pending.
    func memoryLookup(forKey key: CacheKey, options: Options) -> MemoryLookup<RetrieveResult> {
        if self.writePending(key) { return .behindWrite }
        if let copy = memoryCopy(forKey: key, options: options) {
            return .answered(extendIfDue(key, copy, options))
        }
        return options.fromMemoryOnly ? .answered(RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil)) : .missed
    }

    /// `describe` (and `cachedType`) of a shared key: from the memory copy, else from a
    /// read of the upstream (which then keeps a copy).
    func describe(
        forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: @escaping @Sendable (Result<EntryDescription, CacheError>) -> Void
    ) -> CacheTask {
        if !self.writePending(key), let meta = copies.meta(forKey: key, referenceDate: options.referenceDate) {
            return runInline(callbackQueue, options.priority, completion) { .success(HybridCache.description(of: meta)) }
        }
        return retrieve(forKey: key, options: options, callbackQueue: callbackQueue) { result in
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

    /// The description `describe` would give of a key this host holds a copy of, or nil
    /// when it holds none or a write of the key is pending (then take `describe`).
    func memoryDescription(forKey key: CacheKey, options: Options) -> EntryDescription? {
        guard !writePending(key), let meta = copies.meta(forKey: key, referenceDate: options.referenceDate) else { return nil }
        return HybridCache.description(of: meta)
    }

    // MARK: Writes

    /// Runs `body` as a write of `key` in the key's order, delivering its result.
    func writeInOrder<T: Sendable>(
        _ key: CacheKey, _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<T, CacheError>) -> Void)?,
        _ body: @escaping @Sendable (_ done: @escaping @Sendable (Result<T, CacheError>) -> Void) -> Void
    ) -> CacheTask {
        let task = makeTask(callbackQueue, priority, completion)
        self.admit(key, write: true) { [self] in
            guard task.begin() else { return self.finish(key, write: true) }
            body { result in
                if case .failure = result { self.drop(key) }
                self.deliver(result, task: task, callbackQueue, priority, completion)
                self.finish(key, write: true)
            }
        }
        return task
    }

    /// `store` of a shared key: `SET` upstream, then the value is this host's copy.
    func store(
        _ entry: CacheEntry, forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: (@Sendable (Result<StoreResult, CacheError>) -> Void)?
    ) -> CacheTask {
        let lifetime = upstreamLifetime(options)
        return writeInOrder(key, callbackQueue, options.priority, completion) { [self] done in
            guard let lifetime else {
                // An expiration already over stores nothing and removes any older value.
                return self.tier.remove(key) { result in
                    done(self.mapped(result) { _ in
                        self.drop(key)
                        return StoreResult(stored: false, size: 0, expiresAt: nil, version: nil)
                    })
                }
            }
            self.tier.set(key, entry, lifetime: lifetime) { result in
                done(self.mapped(result) { written in
                    var kept = entry
                    kept.version = written.version ?? 0
                    self.keep(key, kept, timeToLive: written.timeToLive, sequence: written.sequence, sliding: lifetime.slidingMilliseconds)
                    self.counters.withLock { $0.sets += 1 }
                    self.copies.countSet(key)
                    return StoreResult(
                        stored: true, size: entry.bytes.count, expiresAt: SharedStore.expiry(written.timeToLive), version: written.version)
                })
            }
        }
    }

    /// `add` and `compareAndStore` of a shared key (`version` nil: add).
    func conditionalStore(
        _ entry: CacheEntry, forKey key: CacheKey, version: UInt64?, options: Options,
        callbackQueue: CallbackQueue, completion: (@Sendable (Result<ConditionalStoreResult, CacheError>) -> Void)?
    ) -> CacheTask {
        let lifetime = upstreamLifetime(options)
        return writeInOrder(key, callbackQueue, options.priority, completion) { done in
            guard let lifetime else {
                return done(.success(ConditionalStoreResult(stored: false, version: nil, expiresAt: nil)))
            }
            let finished: @Sendable (Result<Upstream.Written, Upstream.Failure>) -> Void = { result in
                done(self.mapped(result) { written in
                    if written.stored {
                        var kept = entry
                        kept.version = written.version ?? 0
                        self.keep(key, kept, timeToLive: written.timeToLive, sequence: written.sequence,
                                  sliding: lifetime.slidingMilliseconds)
                    }
                    return ConditionalStoreResult(
                        stored: written.stored, version: written.version, expiresAt: SharedStore.expiry(written.timeToLive))
                })
            }
            if let version {
                self.tier.compareAndSet(key, entry, version: version, lifetime: lifetime, completion: finished)
            } else {
                self.tier.add(key, entry, lifetime: lifetime, completion: finished)
            }
        }
    }

    /// `increment` of a shared key: `INCRBY` upstream (Redis's 64-bit arithmetic), in one
    /// script with the check for a missing key when `initial` is nil, so it is atomic
    /// across hosts either way.
    func increment(
        forKey key: CacheKey, by delta: Int64, initial: Int64?, flags: UInt32, options: Options,
        callbackQueue: CallbackQueue, completion: (@Sendable (Result<IncrementOutcome, CacheError>) -> Void)?
    ) -> CacheTask {
        let lifetime: Upstream.Lifetime? = options.diskExpiration == nil ? .keep : upstreamLifetime(options)
        return writeInOrder(key, callbackQueue, options.priority, completion) { done in
            self.tier.increment(key, by: delta, initial: initial, flags: flags, lifetime: lifetime ?? .milliseconds(1)) { result in
                // The flags of an existing key are Redis's to keep: the copy goes, the next read brings it.
                self.drop(key)
                done(self.mapped(result) { outcome in
                    switch outcome {
                    case .value(let sum, let written):
                        return .incremented(value: sum, version: written.version ?? 0, expiresAt: SharedStore.expiry(written.timeToLive))
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
    func touch(
        forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: (@Sendable (Result<TouchResult, CacheError>) -> Void)?
    ) -> CacheTask {
        let expiration = options.diskExpiration ?? options.memoryExpiration ?? defaults.disk
        let lifetime = SharedStore.upstreamLifetime(expiration)
        return writeInOrder(key, callbackQueue, options.priority, completion) { done in
            let finished: @Sendable (Result<Bool, Upstream.Failure>) -> Void = { result in
                self.drop(key)
                done(self.mapped(result) { touched in
                    TouchResult(touched: touched, expiresAt: touched ? lifetime.flatMap(SharedStore.expiry) : nil)
                })
            }
            if let lifetime {
                self.tier.touch(key, lifetime: lifetime, completion: finished)
            } else {
                self.tier.remove(key, completion: finished)
            }
        }
    }

    /// `remove` of a shared key: from the upstream and this host; `fromDisk: false`
    /// (memory only) drops this host's copy alone.
    func remove(
        forKey key: CacheKey, fromMemory: Bool, fromDisk: Bool, options: Options,
        callbackQueue: CallbackQueue, completion: (@Sendable (Result<Bool, CacheError>) -> Void)?
    ) -> CacheTask {
        writeInOrder(key, callbackQueue, options.priority, completion) { [self] done in
            guard fromDisk else {
                let held = fromMemory && copies.holds(key)
                if fromMemory { self.drop(key) }
                return done(.success(held))
            }
            self.tier.remove(key) { result in
                self.drop(key)
                done(self.mapped(result) { removed in
                    if removed { self.counters.withLock { $0.removals += 1 } }
                    return removed
                })
            }
        }
    }

    // MARK: Several keys

    /// `storeMany` of shared keys as one upstream batch (`Upstream.Tier.writeMany`: the
    /// Redis tier writes them together, one pipelined write per node) instead of one
    /// round trip per key; per item, its result.
    func storeMany(
        _ items: [HybridCache.StoreItem], options: Options,
        _ done: @escaping @Sendable ([Result<StoreResult, CacheError>]) -> Void
    ) {
        let writes: [Upstream.Write] = items.map { item in
            var itemOptions = options
            itemOptions.diskExpiration = item.diskExpiration ?? options.diskExpiration
            itemOptions.memoryExpiration = item.memoryExpiration ?? options.memoryExpiration
            // An expiration already over stores nothing and removes any older value.
            guard let lifetime = upstreamLifetime(itemOptions) else { return .remove(item.key) }
            return .set(item.key, item.entry, lifetime)
        }
        writeMany(writes, options.priority) { results in
            done(results.map { outcome in
                outcome.map { write, written in
                    guard case .set(_, let entry, _) = write else {
                        return StoreResult(stored: false, size: 0, expiresAt: nil, version: nil)
                    }
                    return StoreResult(stored: true, size: entry.bytes.count, expiresAt: SharedStore.expiry(written.timeToLive),
                                       version: written.version)
                }
            })
        }
    }

    /// `removeMany` of shared keys (from the upstream and this host) as one upstream
    /// batch; per key, whether it held a value.
    func removeMany(_ keys: [CacheKey], options: Options, _ done: @escaping @Sendable ([Result<Bool, CacheError>]) -> Void) {
        writeMany(keys.map { Upstream.Write.remove($0) }, options.priority) { results in
            done(results.map { outcome in outcome.map { _, written in written.stored } })
        }
    }

    /// Runs `writes` of shared keys as one upstream batch once the order of every key
    /// named allows (`admitWrites`), keeps this host's copies of what was
    /// stored (drops the others: a failed write's outcome is not known), and hands back
    /// each outcome with its write, before the keys' next operations may start.
    func writeMany(
        _ writes: [Upstream.Write], _ priority: Operation.QueuePriority,
        _ done: @escaping @Sendable ([Result<(Upstream.Write, Upstream.Written), CacheError>]) -> Void
    ) {
        let keys = Set(writes.map(\.key))
        admitWrites(keys) { [self] in
            self.tier.writeMany(writes) { results in
                let outcomes = zip(writes, results).map { write, result -> Result<(Upstream.Write, Upstream.Written), CacheError> in
                    switch (write, result) {
                    case (.set(let key, var entry, let lifetime), .success(let written)):
                        entry.version = written.version ?? 0
                        self.keep(key, entry, timeToLive: written.timeToLive, sequence: written.sequence,
                                  sliding: lifetime.slidingMilliseconds)
                        self.counters.withLock { $0.sets += 1 }
                        self.copies.countSet(key)
                    case (.remove(let key), .success(let written)):
                        self.drop(key)
                        if written.stored { self.counters.withLock { $0.removals += 1 } }
                    case (_, .failure):
                        self.drop(write.key)
                    }
                    return self.mapped(result) { (write, $0) }
                }
                done(outcomes)
                for key in keys { self.finish(key, write: true) }
            }
        }
    }


    // MARK: Prefixes

    /// Removes every shared key starting with `prefix` upstream (on every primary) and
    /// drops this host's copies of them; how many the upstream removed. Keys upstream
    /// that this host would not share (`shares`) stay. The caller holds the prefix's
    /// order (`admitPrefix`).
    func removePrefixUpstream(_ prefix: CacheKey, completion: @escaping @Sendable (Result<Int, CacheError>) -> Void) {
        tier.removePrefix(prefix, where: { [self] in shares($0) }) { result in
            for key in self.copies.keys(prefix: prefix) where self.shares(key) { self.drop(key) }
            completion(self.mapped(result) { $0 })
        }
    }

    /// Removes upstream every key this host shares (`removePrefix` of each shared prefix
    /// not under another one, or of "" when every key is shared or, with `namespaced`,
    /// when the shared keys of every namespace are meant); how many.
    func removeSharedKeys(completion: @escaping @Sendable (Result<Int, CacheError>) -> Void) {
        let shared = self.prefixes
        let outermost: Set<CacheKey> = shared.isEmpty || namespaced ? [""]
            : Set(shared.filter { prefix in !shared.contains { $0 != prefix && prefix.hasPrefix($0) } })
        let gathered = Locked((removed: 0, failure: Upstream.Failure?.none, left: outermost.count))
        for prefix in outermost {
            tier.removePrefix(prefix, where: { [self] in shares($0) }) { result in
                let done = gathered.withLock { g -> Result<Int, Upstream.Failure>? in
                    switch result {
                    case .success(let n): g.removed += n
                    case .failure(let failure): g.failure = g.failure ?? failure
                    }
                    g.left -= 1
                    guard g.left == 0 else { return nil }
                    return g.failure.map { .failure($0) } ?? .success(g.removed)
                }
                if let done { completion(self.mapped(done) { $0 }) }
            }
        }
    }

    // MARK: Conversions

    /// The upstream lifetime of a store with `options` (as `storeOperation` chooses the
    /// local one); nil when it is already over.
    func upstreamLifetime(_ options: Options) -> Upstream.Lifetime? {
        let expiration = options.diskExpiration
            ?? (options.toDisk ? defaults.disk : options.memoryExpiration ?? defaults.memory)
        return SharedStore.upstreamLifetime(expiration)
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

    /// Counts a failed upstream call (`UpstreamStats.unavailable`, `.refused`).
    func count(_ failure: Upstream.Failure) {
        switch failure {
        case .unavailable, .unauthorized: count { $0.unavailable += 1 }
        case .refused: count { $0.refused += 1 }
        }
    }

    /// The cache error of a failed upstream call, counted.
    func cacheError(_ failure: Upstream.Failure) -> CacheError {
        count(failure)
        switch failure {
        case .unavailable(let detail): return .upstreamUnavailable(detail: detail)
        case .unauthorized(let detail): return .upstreamAuthenticationFailed(detail: detail)
        case .refused(let detail): return .upstreamRefused(detail: detail)
        }
    }

    /// `result` with its failure as a counted cache error.
    func mapped<T, U>(
        _ result: Result<T, Upstream.Failure>, _ transform: (T) -> U
    ) -> Result<U, CacheError> {
        switch result {
        case .success(let value): return .success(transform(value))
        case .failure(let failure): return .failure(cacheError(failure))
        }
    }
}

// The hybrid cache with shared keys, over the in-memory upstream: reads memory →
// upstream with the tier named, copies dropped by invalidations and flushes, writes
// upstream before their completion, unavailability, and the per-key order of a write
// still on its way upstream. (The same against real Redis and two daemons: the Python
// suite's test_upstream.py.)

import Foundation
@testable import HalcyonCache
import HalcyonSupport
import HalcyonTestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct HybridCacheUpstreamTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("halcyon-upstream-\(UUID().uuidString)")
    let upstream: Upstream.InMemory
    let cache: HybridCache

    /// An upstream whose calls wait until `release()`, to hold a write on its way.
    final class Gate: Upstream.Tier {
        let inner: Upstream.InMemory
        let held = Locked<[@Sendable () -> Void]?>(nil)
        init(_ inner: Upstream.InMemory) { self.inner = inner }
        func close() { held.withLock { $0 = [] } }
        func release() { for work in held.withLock({ h -> [@Sendable () -> Void] in defer { h = nil }; return h ?? [] }) { work() } }
        private func run(_ work: @escaping @Sendable () -> Void) {
            let now = held.withLock { h -> Bool in
                guard h != nil else { return true }
                h!.append(work)
                return false
            }
            if now { work() }
        }
        func observe(_ observer: any Upstream.Observer) { inner.observe(observer) }
        func get(_ key: CacheKey, completion: @escaping @Sendable (Result<Upstream.Entry?, Upstream.Failure>) -> Void) {
            run { self.inner.get(key, completion: completion) }
        }
        func set(_ key: CacheKey, _ entry: CacheEntry, lifetime: Upstream.Lifetime,
                 completion: @escaping @Sendable (Result<Upstream.Written, Upstream.Failure>) -> Void) {
            run { self.inner.set(key, entry, lifetime: lifetime, completion: completion) }
        }
        func add(_ key: CacheKey, _ entry: CacheEntry, lifetime: Upstream.Lifetime,
                 completion: @escaping @Sendable (Result<Upstream.Written, Upstream.Failure>) -> Void) {
            run { self.inner.add(key, entry, lifetime: lifetime, completion: completion) }
        }
        func compareAndSet(_ key: CacheKey, _ entry: CacheEntry, version: UInt64, lifetime: Upstream.Lifetime,
                           completion: @escaping @Sendable (Result<Upstream.Written, Upstream.Failure>) -> Void) {
            run { self.inner.compareAndSet(key, entry, version: version, lifetime: lifetime, completion: completion) }
        }
        func increment(_ key: CacheKey, by delta: Int64, initial: Int64?, flags: UInt32, lifetime: Upstream.Lifetime,
                       completion: @escaping @Sendable (Result<Upstream.Incremented, Upstream.Failure>) -> Void) {
            run { self.inner.increment(key, by: delta, initial: initial, flags: flags, lifetime: lifetime, completion: completion) }
        }
        func touch(_ key: CacheKey, lifetime: Upstream.Lifetime, completion: @escaping @Sendable (Result<Bool, Upstream.Failure>) -> Void) {
            run { self.inner.touch(key, lifetime: lifetime, completion: completion) }
        }
        func remove(_ key: CacheKey, completion: @escaping @Sendable (Result<Bool, Upstream.Failure>) -> Void) {
            run { self.inner.remove(key, completion: completion) }
        }
        func slide(_ key: CacheKey, version: UInt64, lifetime: Int64, completion: @escaping @Sendable (Result<Upstream.Renewal, Upstream.Failure>) -> Void) {
            run { self.inner.slide(key, version: version, lifetime: lifetime, completion: completion) }
        }
        func renew(_ key: CacheKey, version: UInt64, lifetime: Upstream.Lifetime, completion: @escaping @Sendable (Result<Upstream.Renewal, Upstream.Failure>) -> Void) {
            run { self.inner.renew(key, version: version, lifetime: lifetime, completion: completion) }
        }
        func listKeys(prefix: CacheKey, cursor: String?, limit: Int, completion: @escaping @Sendable (Result<Upstream.KeyPage, Upstream.Failure>) -> Void) {
            run { self.inner.listKeys(prefix: prefix, cursor: cursor, limit: limit, completion: completion) }
        }
        func leaseStatus(_ key: CacheKey, completion: @escaping @Sendable (Result<Int64??, Upstream.Failure>) -> Void) {
            run { self.inner.leaseStatus(key, completion: completion) }
        }
        func removePrefix(
            _ prefix: CacheKey, where include: @escaping @Sendable (CacheKey) -> Bool,
            completion: @escaping @Sendable (Result<Int, Upstream.Failure>) -> Void
        ) {
            run { self.inner.removePrefix(prefix, where: include, completion: completion) }
        }
        func acquireLease(_ key: CacheKey, token: String, lifetime: Int64,
                          completion: @escaping @Sendable (Result<Upstream.LeaseAttempt, Upstream.Failure>) -> Void) {
            run { self.inner.acquireLease(key, token: token, lifetime: lifetime, completion: completion) }
        }
        func releaseLease(_ key: CacheKey, token: String, completion: @escaping @Sendable (Result<Bool, Upstream.Failure>) -> Void) {
            run { self.inner.releaseLease(key, token: token, completion: completion) }
        }
    }

    let gate: Gate

    init() {
        upstream = Upstream.InMemory()
        gate = Gate(upstream)
        var config = HybridCache.Config(memory: MemoryStorage.Config(), disk: DiskStorage.Config(name: "t", sizeLimit: 0, directory: root))
        config.sweepInterval = 0
        config.upstream = UpstreamConfig(tier: gate, prefixes: ["s:"])
        cache = HybridCache(config: config)
    }

    func get(_ key: CacheKey) async throws -> HybridCache.RetrieveResult {
        try await withCheckedThrowingContinuation { continuation in
            cache.retrieve(forKey: key) { continuation.resume(with: $0) }
        }
    }

    func set(_ key: CacheKey, _ text: String) async throws -> HybridCache.StoreResult {
        try await withCheckedThrowingContinuation { continuation in
            cache.store(CacheEntry(bytes: Array(text.utf8)), forKey: key) { continuation.resume(with: $0) }
        }
    }

    /// Runs `operation` (`name`: a removal of the shared keys under `prefix`) between two
    /// writes of keys under `prefix`, the upstream held until all three are asked for: they
    /// must finish in that order, a key with nothing on its way waits too, and the memory
    /// copy of `prefix + "old"` must not answer while the operation waits.
    func betweenTwoWrites<T: Sendable>(
        under prefix: String, _ name: String, _ operation: (@escaping @Sendable (Result<T, CacheError>) -> Void) -> Void
    ) async throws -> T {
        gate.close()
        let order = Locked<[String]>([])
        cache.store(CacheEntry(bytes: [1]), forKey: "\(prefix)before") { _ in order.withLock { $0.append("before") } }
        let afterStored = Locked<CheckedContinuation<Void, Never>?>(nil)
        let result: T = try await withCheckedThrowingContinuation { continuation in
            operation { result in
                order.withLock { $0.append(name) }
                continuation.resume(with: result)
            }
            cache.store(CacheEntry(bytes: [2]), forKey: "\(prefix)after") { _ in
                order.withLock { $0.append("after") }
                afterStored.withLock { $0?.resume(); $0 = nil }
            }
            #expect(cache.memoryLookup(forKey: "\(prefix)old").isBehindWrite)
            #expect(order.withLock { $0 }.isEmpty)
            gate.release()
        }
        // The operation's reply may come back before the last write's completion runs.
        await withCheckedContinuation { (stored: CheckedContinuation<Void, Never>) in
            let done = afterStored.withLock { slot -> Bool in
                if order.withLock({ $0.contains("after") }) { return true }
                slot = stored
                return false
            }
            if done { stored.resume() }
        }
        #expect(order.withLock { $0 } == ["before", name, "after"])
        return result
    }

    @Test func readsComeFromUpstreamThenMemoryUntilInvalidated() async throws {
        upstream.externalWrite("s:a", CacheEntry(bytes: Array("one".utf8)), lifetime: .milliseconds(60_000))
        let first = try await get("s:a")
        #expect(first.cacheType == .upstream)
        #expect(first.entry?.bytes == Array("one".utf8))
        let expiresIn = first.expiresAt.map { $0.timeIntervalSinceNow } ?? 0
        #expect(expiresIn > 50 && expiresIn <= 60)
        #expect(try await get("s:a").cacheType == .memory)
        upstream.externalWrite("s:a", CacheEntry(bytes: Array("two".utf8)))
        let after = try await get("s:a")
        #expect(after.cacheType == .upstream)
        #expect(after.entry?.bytes == Array("two".utf8))
        // Both external writes were announced (the in-memory upstream announces every one).
        #expect(cache.stats().upstream?.invalidations == 2)
        // A host-local key never reaches the upstream.
        _ = try await set("local", "x")
        #expect(try await get("local").cacheType == .memory)
        #expect(try await withCheckedThrowingContinuation { c in upstream.get("local") { c.resume(with: $0) } } == nil)
    }

    @Test func writesReachTheUpstreamBeforeTheirCompletion() async throws {
        let stored = try await set("s:w", "v")
        let there = try await withCheckedThrowingContinuation { c in upstream.get("s:w") { c.resume(with: $0) } }
        #expect(there?.entry.bytes == Array("v".utf8))
        #expect(there?.entry.version == stored.version)
        // The writer keeps the value it wrote.
        let read = try await get("s:w")
        #expect(read.cacheType == .memory && read.entry?.version == stored.version)
    }

    @Test func unreachableWritesFailAndReadsMiss() async throws {
        _ = try await set("s:d", "v")
        upstream.setReachable(false)
        // The flush dropped the copy: a read misses rather than risk a stale hit.
        #expect(try await get("s:d").cacheType == .none)
        await #expect(throws: CacheError.self) { try await set("s:d", "w") }
        #expect(cache.memoryStorage.isCached(forKey: "s:d") == false)
        #expect(cache.stats().upstream?.unavailable ?? 0 >= 2)
        upstream.setReachable(true)
        #expect(try await get("s:d").entry?.bytes == Array("v".utf8))
    }

    @Test func aReadWaitsForTheWriteOfItsKeyOnItsWay() async throws {
        _ = try await set("s:o", "old")
        #expect(try await get("s:o").cacheType == .memory)
        gate.close()
        let order = Locked<[String]>([])
        cache.store(CacheEntry(bytes: Array("new".utf8)), forKey: "s:o") { _ in order.withLock { $0.append("set") } }
        // The memory copy ("old") must not answer while the write is on its way.
        #expect(cache.memoryLookup(forKey: "s:o").isBehindWrite)
        let read: HybridCache.RetrieveResult = try await withCheckedThrowingContinuation { continuation in
            cache.retrieve(forKey: "s:o") { result in
                order.withLock { $0.append("get") }
                continuation.resume(with: result)
            }
            #expect(order.withLock { $0 }.isEmpty)
            gate.release()
        }
        #expect(read.entry?.bytes == Array("new".utf8))
        #expect(order.withLock { $0 } == ["set", "get"])
    }

    @Test func removePrefixKeepsItsPlaceAmongWritesOfMatchingKeys() async throws {
        _ = try await set("s:p:old", "v")
        let removed: Int = try await betweenTwoWrites(under: "s:p:", "removePrefix") { cache.removePrefix("s:p:", completion: $0) }
        #expect(removed == 2)
        let there = try await withCheckedThrowingContinuation { c in upstream.get("s:p:after") { c.resume(with: $0) } }
        #expect(there?.entry.bytes == [2])
        #expect(try await get("s:p:before").cacheType == .none)
    }

    func clear(shared: Bool = false) async throws -> HybridCache.ClearResult {
        try await withCheckedThrowingContinuation { continuation in
            cache.clear(shared: shared) { continuation.resume(with: $0) }
        }
    }

    @Test func clearCountsThisHostsSharedCopiesApartAndLeavesTheKeys() async throws {
        _ = try await set("local", "x")
        _ = try await set("s:a", "one")
        upstream.externalWrite("s:b", CacheEntry(bytes: Array("two".utf8)))
        #expect(try await get("s:b").cacheType == .upstream)
        #expect(try await clear() == HybridCache.ClearResult(removed: 1, droppedShared: 2))
        #expect(try await get("local").cacheType == .none)
        let again = try await get("s:a")
        #expect(again.cacheType == .upstream && again.entry?.bytes == Array("one".utf8))
    }

    @Test func clearSharedKeepsItsPlaceAmongWritesOfSharedKeys() async throws {
        _ = try await set("s:old", "v")
        _ = try await set("local", "x")
        let cleared: HybridCache.ClearResult = try await betweenTwoWrites(under: "s:", "clear") { cache.clear(shared: true, completion: $0) }
        // s:old's copy went with the local part, s:before's after the upstream removal.
        #expect(cleared == HybridCache.ClearResult(removed: 1, droppedShared: 2, removedShared: 2))
        #expect(try await withCheckedThrowingContinuation { c in upstream.get("s:before") { c.resume(with: $0) } } == nil)
        #expect(try await get("s:after").entry?.bytes == [2])
    }

    @Test func clearSharedWithTheUpstreamUnreachableClearsThisHostAndFails() async throws {
        _ = try await set("local", "x")
        _ = try await set("s:k", "v")
        upstream.setReachable(false)
        await #expect(throws: CacheError.upstreamUnavailable(detail: "unreachable")) { try await clear(shared: true) }
        #expect(try await get("local").cacheType == .none)
        upstream.setReachable(true)
        #expect(try await get("s:k").entry?.bytes == Array("v".utf8))
    }

    @Test func storeManyOfSharedKeysKeepsEachKeysOrder() async throws {
        gate.close()
        let order = Locked<[String]>([])
        let items = { (tag: UInt8, keys: [CacheKey]) in keys.map { HybridCache.StoreItem(key: $0, entry: CacheEntry(bytes: [tag])) } }
        cache.store(CacheEntry(bytes: [0]), forKey: "s:m:a") { _ in order.withLock { $0.append("single") } }
        cache.storeMany(items(1, ["s:m:a", "s:m:b"])) { _ in order.withLock { $0.append("first") } }
        // The same keys in the other order: queued behind the first, never waiting on each other.
        let results: [HybridCache.StoreResult] = try await withCheckedThrowingContinuation { continuation in
            cache.storeMany(items(2, ["s:m:b", "s:m:a"])) { result in
                order.withLock { $0.append("second") }
                continuation.resume(with: result)
            }
            #expect(cache.memoryLookup(forKey: "s:m:b").isBehindWrite)
            gate.release()
        }
        #expect(results.map(\.stored) == [true, true])
        #expect(order.withLock { $0 } == ["single", "first", "second"])
        for key in ["s:m:a", "s:m:b"] as [CacheKey] {
            let read = try await get(key)
            #expect(read.entry?.bytes == [2] && read.cacheType == .memory)
        }
        // Local and shared keys together: each part as one step, the results in place.
        let mixed: [HybridCache.StoreResult] = try await withCheckedThrowingContinuation { continuation in
            cache.storeMany(items(3, ["s:m:c", "local"])) { continuation.resume(with: $0) }
        }
        #expect(mixed.map(\.stored) == [true, true])
        #expect(try await get("local").entry?.bytes == [3])
        let removed: [Bool] = try await withCheckedThrowingContinuation { continuation in
            cache.removeMany(forKeys: ["s:m:a", "local", "s:m:none"]) { continuation.resume(with: $0) }
        }
        #expect(removed == [true, true, false])
        #expect(try await withCheckedThrowingContinuation { c in upstream.get("s:m:a") { c.resume(with: $0) } } == nil)
    }

    @Test func anOwnersSharedLeasesEndWhenItGoes() async throws {
        func acquire(_ key: CacheKey, _ token: String, owner: UInt64) async throws -> Bool {
            try await withCheckedThrowingContinuation { continuation in
                cache.shared!.acquireLease(key, token: token, ttl: 60, owner: owner, changed: {}) { continuation.resume(with: $0) }
            }
        }
        #expect(try await acquire("s:l1", "A", owner: 7))
        #expect(try await acquire("s:l2", "B", owner: 8))
        #expect(try await !acquire("s:l1", "C", owner: 9))
        // A lease released by its token is no longer the owner's to give back.
        let released: Bool = try await withCheckedThrowingContinuation { c in cache.shared!.releaseLease("s:l1", token: "A") { c.resume(with: $0) } }
        #expect(released)
        #expect(try await acquire("s:l1", "D", owner: 9))
        cache.shared!.releaseLeases(owner: 7)
        #expect(try await !acquire("s:l1", "E", owner: 10), "owner 7's going ended a lease it no longer held")
        cache.shared!.releaseLeases(owner: 8)
        #expect(try await acquire("s:l2", "F", owner: 10))
        #expect(try await !acquire("s:l2", "G", owner: 11))
    }

    func acquireShared(_ key: CacheKey, _ token: String, owner: UInt64, waits: Bool) async throws -> Bool {
        let wake: @Sendable () -> Void = {}
        return try await withCheckedThrowingContinuation { continuation in
            cache.shared!.acquireLease(key, token: token, ttl: 60, owner: owner, changed: waits ? wake : nil) { continuation.resume(with: $0) }
        }
    }

    /// Polls `condition` every 10 ms for at most `seconds`.
    func eventually(_ seconds: Double, _ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return try await condition()
    }

    @Test func aReleaseThatCannotReachTheUpstreamIsRetriedUntilItCan() async throws {
        #expect(try await acquireShared("s:r1", "A", owner: 7, waits: false))
        upstream.setReachable(false)
        cache.shared!.releaseLeases(owner: 7)
        #expect(await eventually(2) { cache.pendingSharedLeaseReleases == 1 })
        upstream.setReachable(true)
        // Free again without anyone asking: the retry gave it back.
        #expect(try await eventually(2) { try await acquireShared("s:r1", "B", owner: 8, waits: false) })
        #expect(cache.pendingSharedLeaseReleases == 0)
    }

    @Test func onlyCallersThatWaitLeaveAWatch() async throws {
        #expect(try await acquireShared("s:w1", "A", owner: 1, waits: false))
        for index in 0..<100 {
            #expect(try await !acquireShared("s:w1", "N\(index)", owner: 2, waits: false))
        }
        #expect(cache.sharedLeaseWaiters == 0)
        #expect(try await !acquireShared("s:w1", "W", owner: 3, waits: true))
        #expect(cache.sharedLeaseWaiters == 1)
        cache.shared!.withdrawLeaseWatch("s:w1", token: "W")
        #expect(cache.sharedLeaseWaiters == 0)
    }

    @Test func waitingCallersAreBounded() async throws {
        var config = HybridCache.Config(memory: MemoryStorage.Config(),
                                        disk: DiskStorage.Config(name: "t", sizeLimit: 0, directory: root.appendingPathComponent("bounded")))
        config.sweepInterval = 0
        config.upstream = UpstreamConfig(tier: upstream, prefixes: ["s:"])
        config.upstream?.leaseWaitersLimit = 2
        let bounded = HybridCache(config: config)
        func acquire(_ token: String, waits: Bool) async throws -> Bool {
            let wake: @Sendable () -> Void = {}
            return try await withCheckedThrowingContinuation { continuation in
                bounded.shared!.acquireLease("s:b1", token: token, ttl: 60, owner: 1, changed: waits ? wake : nil) { continuation.resume(with: $0) }
            }
        }
        #expect(try await acquire("A", waits: false))
        #expect(try await !acquire("W1", waits: true))
        #expect(try await !acquire("W2", waits: true))
        await #expect(throws: CacheError.tooManyLeaseWaiters(limit: 2)) { try await acquire("W3", waits: true) }
        #expect(try await !acquire("N", waits: false), "a caller that does not wait is never refused")
        #expect(bounded.sharedLeaseWaiters == 2 && bounded.stats().upstream?.leaseWaitersRefused == 1)
    }

    /// With namespaced keys, the shared prefixes are matched within each key's namespace,
    /// the key kept upstream is the stored key, a prefix that names a namespace may share
    /// by its bytes after it, and a clear of the shared keys takes every namespace's and
    /// nothing the prefixes do not cover.
    @Test func namespacedKeysShareByTheirKeyWithinTheNamespace() async throws {
        let upstream = Upstream.InMemory()
        var config = HybridCache.Config(memory: MemoryStorage.Config(),
                                        disk: DiskStorage.Config(name: "t", sizeLimit: 0, directory: root.appendingPathComponent("ns")))
        config.sweepInterval = 0
        config.upstream = UpstreamConfig(tier: upstream, prefixes: ["s:"])
        config.upstream?.namespaced = true
        let cache = HybridCache(config: config)
        let web = Namespace("web")!, api = Namespace("api")!
        #expect(cache.isShared(Namespace.cacheKey("s:1", in: web)))
        #expect(!cache.isShared(Namespace.cacheKey("t:1", in: web)))
        #expect(cache.isShared("s:1") && !cache.isShared("web\u{1F}t:1") && !cache.isShared("we b\u{1F}s:1"))
        let shared = try #require(cache.shared)
        #expect(shared.mayShare(prefix: Namespace.cacheKey("s", in: web)))
        #expect(!shared.mayShare(prefix: Namespace.cacheKey("t", in: web)))
        #expect(shared.mayShare(prefix: "we") && !shared.mayShare(prefix: "t:") && !shared.mayShare(prefix: "w b"))

        for key in [Namespace.cacheKey("s:1", in: web), Namespace.cacheKey("s:1", in: api), "s:2"] as [CacheKey] {
            _ = try await withCheckedThrowingContinuation { continuation in
                cache.store(CacheEntry(bytes: [1]), forKey: key) { continuation.resume(with: $0) }
            }
            let kept = try await withCheckedThrowingContinuation { continuation in upstream.get(key) { continuation.resume(with: $0) } }
            #expect(kept != nil, "\(key) upstream under its stored key")
        }
        upstream.externalWrite("web\u{1F}t:9", CacheEntry(bytes: [9]), lifetime: .never)
        let cleared = try await withCheckedThrowingContinuation { continuation in
            cache.clear(shared: true) { continuation.resume(with: $0) }
        }
        #expect(cleared.removedShared == 3)
        let foreign = try await withCheckedThrowingContinuation { continuation in upstream.get("web\u{1F}t:9") { continuation.resume(with: $0) } }
        #expect(foreign != nil, "a key the prefixes do not cover stays")
    }

    /// A cache and its upstream on one manual clock, so that "later" is exact.
    struct Clocked {
        let clock = ManualClock(Date())
        let upstream: Upstream.InMemory
        let cache: HybridCache

        init(root: URL) {
            upstream = Upstream.InMemory(clock: clock)
            var config = HybridCache.Config(memory: MemoryStorage.Config(), disk: DiskStorage.Config(name: "t", sizeLimit: 0, directory: root))
            config.sweepInterval = 0
            config.memory.clock = clock
            config.upstream = UpstreamConfig(tier: upstream, prefixes: ["s:"])
            cache = HybridCache(config: config)
        }

        func read(_ key: CacheKey, _ extending: ExpirationExtending = .cacheTime) async throws -> HybridCache.RetrieveResult {
            var options = HybridCache.Options()
            options.extendingExpiration = extending
            return try await withCheckedThrowingContinuation { c in cache.retrieve(forKey: key, options: options) { c.resume(with: $0) } }
        }

        func upstreamEntry(_ key: CacheKey) async throws -> Upstream.Entry? {
            try await withCheckedThrowingContinuation { c in upstream.get(key) { c.resume(with: $0) } }
        }

        func store(_ key: CacheKey, _ expiration: StorageExpiration) async throws {
            var options = HybridCache.Options()
            options.diskExpiration = expiration
            _ = try await withCheckedThrowingContinuation { (c: CheckedContinuation<HybridCache.StoreResult, Error>) in
                cache.store(CacheEntry(bytes: [1]), forKey: key, options: options) { c.resume(with: $0) }
            }
        }

        var renewals: Int? { cache.stats().upstream?.slides }

        /// Whether `key` lives `milliseconds` upstream, give or take the PTTL's rounding.
        func upstreamLifetime(_ key: CacheKey, isAbout milliseconds: Int64) async throws -> Bool {
            guard let left = try await upstreamEntry(key)?.timeToLive else { return false }
            return abs(left - milliseconds) <= 1
        }
    }

    @Test func readsOfACopyRenewASlidingLifetimeUpstreamAtMostOncePerHalf() async throws {
        let clocked = Clocked(root: root)
        let (clock, cache) = (clocked.clock, clocked.cache)
        try await clocked.store("s:slide", .seconds(2))
        #expect(try await clocked.upstreamEntry("s:slide")?.slidingTimeToLive == 2000)
        // More than half left: reads renew nothing.
        clock.advance(by: 0.9)
        for _ in 0..<10 { #expect(try await clocked.read("s:slide").cacheType == .memory) }
        #expect(cache.stats().upstream?.slides == 0)
        // Less than half left: a read that does not slide renews nothing; the next read
        // renews once, and the copy follows.
        clock.advance(by: 0.3)
        _ = try await clocked.read("s:slide", ExpirationExtending.none)
        #expect(cache.stats().upstream?.slides == 0)
        for _ in 0..<10 { #expect(try await clocked.read("s:slide").cacheType == .memory) }
        #expect(cache.stats().upstream?.slides == 1)
        #expect(try await clocked.read("s:slide").expiresAt == clock.now().addingTimeInterval(2))
        // Past the first lifetime: alive upstream and here.
        clock.advance(by: 1.2)
        #expect(try await clocked.upstreamEntry("s:slide") != nil)
        #expect(try await clocked.read("s:slide").entry?.bytes == [1])
        #expect(cache.stats().upstream?.slides == 2, "less than half was left again")
        // An instant never slides.
        try await clocked.store("s:fixed", .date(clock.now().addingTimeInterval(2)))
        #expect(try await clocked.upstreamEntry("s:fixed")?.slidingTimeToLive == nil)
    }

    @Test func aReadAskingALifetimeGivesItUpstreamAboutTwicePerLifetime() async throws {
        let clocked = Clocked(root: root)
        let clock = clocked.clock
        let asked = ExpirationExtending.expirationTime(.seconds(10))
        try await clocked.store("s:renew", .seconds(2))
        #expect(try await clocked.read("s:renew").cacheType == .memory)
        // The first read asking 10 s gives the key 10 s upstream, sliding by 10 s from then
        // on, and answers with that end, as a local read does.
        let first = try await clocked.read("s:renew", asked)
        #expect(first.expiresAt.map { abs($0.timeIntervalSince(clock.now()) - 10) < 0.01 } == true)
        #expect(clocked.renewals == 1)
        #expect(try await clocked.upstreamLifetime("s:renew", isAbout: 10_000))
        #expect(try await clocked.upstreamEntry("s:renew")?.slidingTimeToLive == 10_000)
        // Reads asking the same renew nothing more while more than half of it is left ...
        clock.advance(by: 4)
        for _ in 0..<10 { #expect(try await clocked.read("s:renew", asked).entry?.bytes == [1]) }
        #expect(clocked.renewals == 1)
        #expect(try await clocked.upstreamLifetime("s:renew", isAbout: 6_000))
        // ... and once when less is.
        clock.advance(by: 1.5)
        for _ in 0..<10 { #expect(try await clocked.read("s:renew", asked).entry?.bytes == [1]) }
        #expect(clocked.renewals == 2)
        #expect(try await clocked.upstreamLifetime("s:renew", isAbout: 10_000))
        // A shorter lifetime is given at once; so is an instant, which no read slides; so is no end.
        _ = try await clocked.read("s:renew", .expirationTime(.seconds(1)))
        #expect(clocked.renewals == 3)
        #expect(try await clocked.upstreamLifetime("s:renew", isAbout: 1_000))
        _ = try await clocked.read("s:renew", .expirationTime(.date(clock.now().addingTimeInterval(30))))
        #expect(clocked.renewals == 4)
        let fixed = try await clocked.upstreamEntry("s:renew")
        #expect(fixed?.slidingTimeToLive == nil)
        #expect(fixed.flatMap(\.timeToLive).map { abs($0 - 30_000) <= 1_000 } == true)
        _ = try await clocked.read("s:renew", .expirationTime(.never))
        #expect(clocked.renewals == 5)
        let endless = try await clocked.upstreamEntry("s:renew")
        #expect(endless != nil && endless?.timeToLive == nil)
        // A read that does not ask renews nothing, and neither does a key with no copy.
        _ = try await clocked.read("s:renew", ExpirationExtending.none)
        _ = try await clocked.read("s:none", asked)
        #expect(clocked.renewals == 5)
        #expect(clocked.cache.stats().upstream?.slidesRefused == 0)
    }

    @Test func anInvalidationAfterAnUpstreamReadDropsItsCopy() async throws {
        upstream.externalWrite("s:r", CacheEntry(bytes: [1]))
        gate.close()
        let read: HybridCache.RetrieveResult = try await withCheckedThrowingContinuation { continuation in
            cache.retrieve(forKey: "s:r") { continuation.resume(with: $0) }
            gate.release()
        }
        #expect(read.cacheType == .upstream)
        #expect(try await get("s:r").cacheType == .memory)
        // An invalidation numbered after the read arrives: the copy goes.
        upstream.externalWrite("s:r", CacheEntry(bytes: [2]))
        #expect(try await get("s:r").entry?.bytes == [2])
    }
}

extension HybridCache.MemoryLookup {
    var isBehindWrite: Bool {
        if case .behindWrite = self { return true }
        return false
    }
}

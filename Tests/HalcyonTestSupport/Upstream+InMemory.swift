// A stand-in for a shared store in unit tests of the hybrid cache: the `Upstream.Tier`
// contract over a dictionary, with a movable clock, an on/off switch for reachability,
// and the events a tracking Redis would send. It lives with the tests, not in the storage
// engine: the daemon only ever talks to a real store.

import Foundation
import HalcyonCache
import HalcyonSupport

extension Upstream {
    /// An in-process `Upstream.Tier`.
    ///
    /// It behaves as the Redis tier does for one host: a change of a key by someone else
    /// (`externalWrite`, standing for another host or a Redis client) or an expiry
    /// (`expireDue`) is announced to observers as an invalidation, while changes made
    /// through its own calls are not (their completions carry the sequence); `setReachable(false)` makes every call
    /// fail with `.unavailable` and announces a `.flushed`, as a lost connection does.
    /// Lifetimes follow `clock`; expired keys vanish when next touched, and
    /// `expireDue()` announces those that ran out, as Redis's active expiry does.
    ///
    /// ```swift
    /// let upstream = Upstream.InMemory(clock: ManualClock())
    /// upstream.observe(invalidations)
    /// upstream.set("k", CacheEntry(bytes: [1]), lifetime: .milliseconds(5_000)) { _ in }
    /// ```
    ///
    /// Threading: thread-safe; `state` (a `Locked`) guards everything, and observers and
    /// completions are called after the lock is released, on the caller's thread.
    public final class InMemory: Tier {
        struct Stored {
            var entry: CacheEntry
            var expiresAt: Date?
            /// `Lifetime.sliding`'s milliseconds, for `slide`.
            var sliding: Int64?
        }

        struct State {
            var entries: [CacheKey: Stored] = [:]
            var leases: [CacheKey: (token: String, expiresAt: Date)] = [:]
            var sequence: UInt64 = 0
            var reachable = true
            var observers: [any Observer] = []
        }

        private let state = Locked(State())
        private let clock: any CacheClock
        private let versions: VersionClock

        public init(clock: any CacheClock = SystemClock()) {
            self.clock = clock
            versions = VersionClock(clock: clock)
        }

        /// The name of the key a lease on `key` is kept under.
        public static func leaseKey(_ key: CacheKey) -> CacheKey { key + "\u{0}lease" }

        public func observe(_ observer: any Observer) {
            state.withLock { $0.observers.append(observer) }
        }

        /// Makes the store reachable or not. Going unreachable announces `.flushed`.
        public func setReachable(_ reachable: Bool) {
            let (observers, event) = state.withLock { state -> ([any Observer], Event?) in
                defer { state.reachable = reachable }
                guard state.reachable, !reachable else { return ([], nil) }
                state.sequence += 1
                return (state.observers, .flushed(sequence: state.sequence))
            }
            if let event { observers.forEach { $0.upstream(event) } }
        }

        /// A write by someone else (another host, `redis-cli`): `entry` with a fresh
        /// version, or a removal when nil; announced like any change.
        public func externalWrite(_ key: CacheKey, _ entry: CacheEntry?, lifetime: Lifetime = .never) {
            mutate(key) { state, now in
                if let entry {
                    state.entries[key] = Stored(entry: self.versioned(entry), expiresAt: self.expiry(lifetime, now: now, previous: nil),
                                                sliding: lifetime.slidingMilliseconds)
                } else {
                    state.entries[key] = nil
                }
                return ((), true)
            }
        }

        /// Another host takes the lease on `key` (whoever holds it now or not).
        public func externalAcquireLease(_ key: CacheKey, token: String, lifetime: Int64) {
            let now = clock.now()
            state.withLock { $0.leases[key] = (token, now.addingTimeInterval(Double(max(lifetime, 1)) / 1000)) }
        }

        /// Another host releases the lease on `key`; announced as an invalidation of its lease key.
        public func externalReleaseLease(_ key: CacheKey) {
            let (observers, event) = state.withLock { state -> ([any Observer], Event?) in
                guard state.leases.removeValue(forKey: key) != nil else { return ([], nil) }
                state.sequence += 1
                return (state.observers, .invalidated(keys: [InMemory.leaseKey(key)], sequence: state.sequence))
            }
            if let event { observers.forEach { $0.upstream(event) } }
        }

        /// Removes every expired key and lease and announces them.
        public func expireDue() {
            let now = clock.now()
            let (observers, event) = state.withLock { state -> ([any Observer], Event?) in
                var gone = state.entries.filter { ($0.value.expiresAt ?? .distantFuture) <= now }.map(\.key)
                gone += state.leases.filter { $0.value.expiresAt <= now }.map { InMemory.leaseKey($0.key) }
                state.entries = state.entries.filter { ($0.value.expiresAt ?? .distantFuture) > now }
                state.leases = state.leases.filter { $0.value.expiresAt > now }
                guard !gone.isEmpty else { return ([], nil) }
                state.sequence += 1
                return (state.observers, .invalidated(keys: gone.sorted(), sequence: state.sequence))
            }
            if let event { observers.forEach { $0.upstream(event) } }
        }

        // MARK: Tier

        public func get(_ key: CacheKey, completion: @escaping @Sendable (Result<Entry?, Failure>) -> Void) {
            completion(read { state, now in
                guard let stored = self.live(key, in: &state, now: now) else { return nil }
                return Entry(entry: stored.entry, timeToLive: self.ttl(stored, now: now), sequence: state.sequence,
                             slidingTimeToLive: stored.sliding)
            })
        }

        public func set(
            _ key: CacheKey, _ entry: CacheEntry, lifetime: Lifetime, completion: @escaping @Sendable (Result<Written, Failure>) -> Void
        ) {
            completion(store(key, entry, lifetime: lifetime) { _ in true })
        }

        public func add(
            _ key: CacheKey, _ entry: CacheEntry, lifetime: Lifetime, completion: @escaping @Sendable (Result<Written, Failure>) -> Void
        ) {
            completion(store(key, entry, lifetime: lifetime) { $0 == nil })
        }

        public func compareAndSet(
            _ key: CacheKey, _ entry: CacheEntry, version: UInt64, lifetime: Lifetime,
            completion: @escaping @Sendable (Result<Written, Failure>) -> Void
        ) {
            completion(store(key, entry, lifetime: lifetime) { $0?.entry.version == version })
        }

        public func increment(
            _ key: CacheKey, by delta: Int64, initial: Int64?, flags: UInt32, lifetime: Lifetime,
            completion: @escaping @Sendable (Result<Incremented, Failure>) -> Void
        ) {
            completion(mutateIfReachable(key) { state, now -> (Incremented, Bool) in
                let live = self.live(key, in: &state, now: now)
                guard live != nil || initial != nil else { return (.missing, false) }
                var current = initial ?? 0
                if let live {
                    guard let text = String(bytes: live.entry.bytes, encoding: .utf8), let parsed = Int64(text),
                          !text.hasPrefix("+") else { return (.notAnInteger, false) }
                    current = parsed
                }
                let (sum, overflow) = current.addingReportingOverflow(delta)
                if overflow { return (.overflow, false) }
                let stored = Stored(
                    entry: self.versioned(CacheEntry(bytes: Array(String(sum).utf8), flags: flags)),
                    expiresAt: self.expiry(lifetime, now: now, previous: live))
                state.entries[key] = stored
                return (.value(sum, Written(stored: true, version: stored.entry.version, timeToLive: self.ttl(stored, now: now),
                                            sequence: state.sequence)), true)
            })
        }

        public func touch(_ key: CacheKey, lifetime: Lifetime, completion: @escaping @Sendable (Result<Bool, Failure>) -> Void) {
            completion(mutateIfReachable(key) { state, now in
                guard var stored = self.live(key, in: &state, now: now) else { return (false, false) }
                stored.expiresAt = self.expiry(lifetime, now: now, previous: stored)
                stored.sliding = lifetime.slidingMilliseconds
                state.entries[key] = stored
                return (true, true)
            })
        }

        public func slide(_ key: CacheKey, version: UInt64, lifetime: Int64, completion: @escaping @Sendable (Result<Renewal, Failure>) -> Void) {
            completion(mutateIfReachable(key) { state, now -> (Renewal, Bool) in
                guard var stored = self.live(key, in: &state, now: now), stored.entry.version == version, stored.sliding == lifetime
                else { return (.changed, false) }
                stored.expiresAt = self.expiry(.sliding(lifetime), now: now, previous: stored)
                state.entries[key] = stored
                return (.renewed(timeToLive: self.ttl(stored, now: now)), true)
            })
        }

        public func renew(_ key: CacheKey, version: UInt64, lifetime: Lifetime, completion: @escaping @Sendable (Result<Renewal, Failure>) -> Void) {
            completion(mutateIfReachable(key) { state, now -> (Renewal, Bool) in
                guard var stored = self.live(key, in: &state, now: now), stored.entry.version == version else { return (.changed, false) }
                stored.expiresAt = self.expiry(lifetime, now: now, previous: stored)
                stored.sliding = lifetime.slidingMilliseconds
                state.entries[key] = stored
                return (.renewed(timeToLive: self.ttl(stored, now: now)), true)
            })
        }

        public func remove(_ key: CacheKey, completion: @escaping @Sendable (Result<Bool, Failure>) -> Void) {
            completion(mutateIfReachable(key) { state, now in
                let existed = self.live(key, in: &state, now: now) != nil
                state.entries[key] = nil
                return (existed, existed)
            })
        }

        public func removePrefix(
            _ prefix: CacheKey, where include: @escaping @Sendable (CacheKey) -> Bool,
            completion: @escaping @Sendable (Result<Int, Failure>) -> Void
        ) {
            let now = clock.now()
            let result = state.withLock { state -> (Result<Int, Failure>, [any Observer], Event?) in
                guard state.reachable else { return (.failure(.unavailable("unreachable")), [], nil) }
                let keys = state.entries.filter { $0.key.hasPrefix(prefix) && ($0.value.expiresAt ?? .distantFuture) > now }.map(\.key)
                    .filter(include)
                for key in keys { state.entries[key] = nil }
                return (.success(keys.count), [], nil)
            }
            if let event = result.2 { result.1.forEach { $0.upstream(event) } }
            completion(result.0)
        }

        /// The cursor is the last key listed; keys come in byte order.
        public func listKeys(prefix: CacheKey, cursor: String?, limit: Int, completion: @escaping @Sendable (Result<KeyPage, Failure>) -> Void) {
            completion(read { state, now in
                let keys = state.entries.filter { $0.key.hasPrefix(prefix) && ($0.value.expiresAt ?? .distantFuture) > now }.map(\.key)
                    .filter { key in cursor.map { $0.utf8.lexicographicallyPrecedes(key.utf8) } ?? true }
                    .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
                let page = Array(keys.prefix(max(1, limit)))
                return KeyPage(keys: page, cursor: keys.count > page.count ? page.last?.string : nil)
            })
        }

        public func leaseStatus(_ key: CacheKey, completion: @escaping @Sendable (Result<Int64??, Failure>) -> Void) {
            completion(read { state, now -> Int64?? in
                guard let held = state.leases[key], held.expiresAt > now else { return nil }
                return .some(max(1, Int64((held.expiresAt.timeIntervalSince(now) * 1000).rounded(.up))))
            })
        }

        public func acquireLease(
            _ key: CacheKey, token: String, lifetime: Int64, completion: @escaping @Sendable (Result<LeaseAttempt, Failure>) -> Void
        ) {
            let now = clock.now()
            completion(state.withLock { state -> Result<LeaseAttempt, Failure> in
                guard state.reachable else { return .failure(.unavailable("unreachable")) }
                if let held = state.leases[key], held.expiresAt > now {
                    let left = Int64((held.expiresAt.timeIntervalSince(now) * 1000).rounded(.up))
                    return .success(.held(timeToLive: left, leaseKey: InMemory.leaseKey(key), sequence: state.sequence))
                }
                state.leases[key] = (token, now.addingTimeInterval(Double(max(lifetime, 1)) / 1000))
                return .success(.acquired)
            })
        }

        public func releaseLease(_ key: CacheKey, token: String, completion: @escaping @Sendable (Result<Bool, Failure>) -> Void) {
            let now = clock.now()
            let result = state.withLock { state -> (Result<Bool, Failure>, [any Observer], Event?) in
                guard state.reachable else { return (.failure(.unavailable("unreachable")), [], nil) }
                guard let held = state.leases[key], held.token == token, held.expiresAt > now else { return (.success(false), [], nil) }
                state.leases[key] = nil
                return (.success(true), [], nil)
            }
            if let event = result.2 { result.1.forEach { $0.upstream(event) } }
            completion(result.0)
        }

        // MARK: Helpers (inside the lock unless said otherwise)

        private func versioned(_ entry: CacheEntry) -> CacheEntry {
            var entry = entry
            entry.version = versions.next()
            return entry
        }

        private func live(_ key: CacheKey, in state: inout State, now: Date) -> Stored? {
            guard let stored = state.entries[key] else { return nil }
            if let expiresAt = stored.expiresAt, expiresAt <= now {
                state.entries[key] = nil
                return nil
            }
            return stored
        }

        private func ttl(_ stored: Stored, now: Date) -> Int64? {
            stored.expiresAt.map { max(1, Int64(($0.timeIntervalSince(now) * 1000).rounded(.up))) }
        }

        private func expiry(_ lifetime: Lifetime, now: Date, previous: Stored?) -> Date? {
            switch lifetime {
            case .never: return nil
            case .milliseconds(let ms), .sliding(let ms): return now.addingTimeInterval(Double(max(ms, 1)) / 1000)
            case .keep: return previous?.expiresAt
            }
        }

        /// A read under the lock, failing when unreachable.
        private func read<T>(_ body: (inout State, Date) -> T) -> Result<T, Failure> {
            let now = clock.now()
            return state.withLock { state in
                guard state.reachable else { return .failure(.unavailable("unreachable")) }
                return .success(body(&state, now))
            }
        }

        /// A conditional store: `condition` sees the live entry.
        private func store(
            _ key: CacheKey, _ entry: CacheEntry, lifetime: Lifetime, when condition: @escaping (Stored?) -> Bool
        ) -> Result<Written, Failure> {
            mutateIfReachable(key) { state, now in
                let live = self.live(key, in: &state, now: now)
                guard condition(live) else {
                    return (Written(stored: false, version: live?.entry.version, timeToLive: live.flatMap { self.ttl($0, now: now) },
                                    sequence: state.sequence), false)
                }
                let stored = Stored(entry: self.versioned(entry), expiresAt: self.expiry(lifetime, now: now, previous: live),
                                    sliding: lifetime == .keep ? live?.sliding : lifetime.slidingMilliseconds)
                state.entries[key] = stored
                return (Written(stored: true, version: stored.entry.version, timeToLive: self.ttl(stored, now: now),
                                sequence: state.sequence), true)
            }
        }

        private func mutateIfReachable<T>(_ key: CacheKey, _ body: @escaping (inout State, Date) -> (T, Bool)) -> Result<T, Failure> {
            var unreachable = false
            let value: T? = mutate(key, announced: false) { state, now in
                guard state.reachable else {
                    unreachable = true
                    return (nil, false)
                }
                let (value, changed) = body(&state, now)
                return (value, changed)
            }
            if unreachable { return .failure(.unavailable("unreachable")) }
            return .success(value!)
        }

        /// Runs `body` under the lock; when it reports a change and `announced`, announces
        /// an invalidation of `key` after the lock is released.
        @discardableResult
        private func mutate<T>(_ key: CacheKey, announced: Bool = true, _ body: (inout State, Date) -> (T, Bool)) -> T {
            let now = clock.now()
            let (value, observers, event) = state.withLock { state -> (T, [any Observer], Event?) in
                let (value, changed) = body(&state, now)
                guard changed, announced else { return (value, [], nil) }
                state.sequence += 1
                return (value, state.observers, .invalidated(keys: [key], sequence: state.sequence))
            }
            if let event { observers.forEach { $0.upstream(event) } }
            return value
        }
    }
}

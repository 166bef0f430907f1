// The upstream tier over real Redis, standalone and cluster: every call of the seam, the
// interoperation with plain Redis clients (redis-cli GET shows the bytes; a foreign SET
// reads through as raw bytes with a fresh version), versions for cas, and leases with
// their release arriving as an invalidation.

import Foundation
import HalcyonCache
import HalcyonUpstream
import HalcyonUpstreamTier
import NIOCore
import Testing

/// Collects a tier's events.
final class Collected: Upstream.Observer {
    let log = EventLog<Upstream.Event>()
    func upstream(_ event: Upstream.Event) { log.append(event) }

    func invalidation(of key: String, timeout: TimeInterval = 5) -> Upstream.Event? {
        log.wait(timeout: timeout) { event in
            if case .invalidated(let keys, _) = event { return keys.contains(CacheKey(key)) }
            return false
        }
    }
}

extension Upstream.Tier {
    func get(_ key: String) async -> Result<Upstream.Entry?, Upstream.Failure> {
        await withCheckedContinuation { continuation in get(CacheKey(key)) { continuation.resume(returning: $0) } }
    }
    func set(_ key: String, _ entry: CacheEntry, lifetime: Upstream.Lifetime = .never) async -> Result<Upstream.Written, Upstream.Failure> {
        await withCheckedContinuation { continuation in set(CacheKey(key), entry, lifetime: lifetime) { continuation.resume(returning: $0) } }
    }
    func add(_ key: String, _ entry: CacheEntry, lifetime: Upstream.Lifetime = .never) async -> Result<Upstream.Written, Upstream.Failure> {
        await withCheckedContinuation { continuation in add(CacheKey(key), entry, lifetime: lifetime) { continuation.resume(returning: $0) } }
    }
    func compareAndSet(_ key: String, _ entry: CacheEntry, version: UInt64) async -> Result<Upstream.Written, Upstream.Failure> {
        await withCheckedContinuation { continuation in
            compareAndSet(CacheKey(key), entry, version: version, lifetime: .keep) { continuation.resume(returning: $0) }
        }
    }
    func increment(_ key: String, by delta: Int64, initial: Int64? = 0, lifetime: Upstream.Lifetime = .keep) async -> Result<Upstream.Incremented, Upstream.Failure> {
        await withCheckedContinuation { continuation in
            increment(CacheKey(key), by: delta, initial: initial, flags: 3, lifetime: lifetime) { continuation.resume(returning: $0) }
        }
    }
    func touch(_ key: String, lifetime: Upstream.Lifetime) async -> Result<Bool, Upstream.Failure> {
        await withCheckedContinuation { continuation in touch(CacheKey(key), lifetime: lifetime) { continuation.resume(returning: $0) } }
    }
    func renew(_ key: String, version: UInt64, lifetime: Upstream.Lifetime) async -> Result<Upstream.Renewal, Upstream.Failure> {
        await withCheckedContinuation { continuation in renew(CacheKey(key), version: version, lifetime: lifetime) { continuation.resume(returning: $0) } }
    }
    func remove(_ key: String) async -> Result<Bool, Upstream.Failure> {
        await withCheckedContinuation { continuation in remove(CacheKey(key)) { continuation.resume(returning: $0) } }
    }
    func removePrefix(_ prefix: String, where include: @escaping @Sendable (CacheKey) -> Bool = { _ in true }) async -> Result<Int, Upstream.Failure> {
        await withCheckedContinuation { continuation in
            removePrefix(CacheKey(prefix), where: include) { continuation.resume(returning: $0) }
        }
    }
    func acquireLease(_ key: String, token: String, lifetime: Int64) async -> Result<Upstream.LeaseAttempt, Upstream.Failure> {
        await withCheckedContinuation { continuation in
            acquireLease(CacheKey(key), token: token, lifetime: lifetime) { continuation.resume(returning: $0) }
        }
    }
    func writeMany(_ writes: [Upstream.Write]) async -> [Result<Upstream.Written, Upstream.Failure>] {
        await withCheckedContinuation { continuation in writeMany(writes) { continuation.resume(returning: $0) } }
    }
    func listKeys(prefix: String, cursor: String?, limit: Int) async -> Result<Upstream.KeyPage, Upstream.Failure> {
        await withCheckedContinuation { continuation in listKeys(prefix: CacheKey(prefix), cursor: cursor, limit: limit) { continuation.resume(returning: $0) } }
    }
    func leaseStatus(_ key: String) async -> Result<Int64??, Upstream.Failure> {
        await withCheckedContinuation { continuation in leaseStatus(CacheKey(key)) { continuation.resume(returning: $0) } }
    }
    func releaseLease(_ key: String, token: String) async -> Result<Bool, Upstream.Failure> {
        await withCheckedContinuation { continuation in releaseLease(CacheKey(key), token: token) { continuation.resume(returning: $0) } }
    }
}

enum Deployment: String, CaseIterable, Sendable {
    case standalone, cluster

    var seeds: [NodeAddress] {
        switch self {
        case .standalone: return [SharedServers.standalone.address]
        case .cluster: return SharedServers.cluster.seeds
        }
    }

    /// redis-cli arguments that reach `key`'s node.
    func cli(for key: String) throws -> [String] {
        switch self {
        case .standalone: return ["-p", String(SharedServers.standalone.port)]
        case .cluster: return ["-p", String(try SharedServers.cluster.node(serving: key).port)]
        }
    }
}

@Suite(.timeLimit(.minutes(2)))
struct RedisTierTests {
    func start(_ deployment: Deployment) async throws -> (RedisTier, Collected) {
        let tier = RedisTier(configuration: .init(seeds: deployment.seeds), eventLoop: testGroup.next())
        try await tier.start().get()
        let observer = Collected()
        tier.observe(observer)
        return (tier, observer)
    }

    func unique(_ name: String) -> String { "\(name):\(UUID().uuidString.prefix(8))" }

    /// Whether `remaining` milliseconds is what is left of a `lifetime` given at or after
    /// `start`: at most the lifetime, and at least the lifetime less the time since `start`.
    /// The bound follows the clock rather than a fixed margin, so a slow machine cannot fail it.
    func isRemainder(_ remaining: Int?, of lifetime: Int, since start: ContinuousClock.Instant) -> Bool {
        guard let remaining else { return false }
        let elapsed = start.duration(to: .now)
        let elapsedMilliseconds = Int(elapsed.components.seconds) * 1000 + Int(elapsed.components.attoseconds / 1_000_000_000_000_000) + 1
        return remaining <= lifetime && remaining >= lifetime - elapsedMilliseconds
    }

    @Test(arguments: Deployment.allCases)
    func setAndGetInteroperateWithPlainClients(deployment: Deployment) async throws {
        let (tier, _) = try await start(deployment)
        defer { _ = tier.shutdown() }
        let key = unique("interop")
        let writtenAt = ContinuousClock.now
        let written = try await tier.set(key, CacheEntry(bytes: Array("héllo".utf8), flags: 1), lifetime: .milliseconds(60_000)).get()
        #expect(written.stored && (written.version ?? 0) > 0)
        #expect(isRemainder(written.timeToLive.map(Int.init), of: 60_000, since: writtenAt))
        // redis-cli sees exactly the bytes.
        #expect(try redisCLI(try deployment.cli(for: key) + ["GET", key]).trimmingCharacters(in: .newlines) == "héllo")
        let read = try await tier.get(key).get()
        #expect(read?.entry == CacheEntry(bytes: Array("héllo".utf8), flags: 1, version: written.version!))
        #expect(isRemainder(read?.timeToLive.map(Int.init), of: 60_000, since: writtenAt))
        // A plain SET from another client: read through as raw bytes with a new version,
        // and every later read agrees on that version.
        try redisCLI(try deployment.cli(for: key) + ["SET", key, "foreign"])
        let foreign = try await tier.get(key).get()
        #expect(foreign?.entry.bytes == Array("foreign".utf8))
        #expect(foreign?.entry.flags == 0)
        #expect((foreign?.entry.version ?? 0) > written.version!)
        #expect(foreign?.timeToLive == nil)
        #expect(try await tier.get(key).get()?.entry.version == foreign?.entry.version)
        // A key nobody wrote: a miss.
        #expect(try await tier.get(unique("missing")).get() == nil)
    }

    @Test(arguments: Deployment.allCases)
    func casAddIncrementTouchRemove(deployment: Deployment) async throws {
        let (tier, _) = try await start(deployment)
        defer { _ = tier.shutdown() }
        let key = unique("atomic")
        // add stores only when absent.
        let added = try await tier.add(key, CacheEntry(bytes: [1], flags: 2)).get()
        #expect(added.stored)
        let again = try await tier.add(key, CacheEntry(bytes: [2], flags: 2)).get()
        #expect(!again.stored && again.version == added.version)
        // cas with the current version stores; with a stale one it does not.
        let swapped = try await tier.compareAndSet(key, CacheEntry(bytes: [3], flags: 2), version: added.version!).get()
        #expect(swapped.stored && swapped.version! > added.version!)
        let stale = try await tier.compareAndSet(key, CacheEntry(bytes: [4], flags: 2), version: added.version!).get()
        #expect(!stale.stored && stale.version == swapped.version)
        #expect(try await tier.get(key).get()?.entry.bytes == [3])
        #expect(try await !tier.compareAndSet(unique("none"), CacheEntry(bytes: [1]), version: 1).get().stored)
        // A foreign write changes the version a cas must name.
        try redisCLI(try deployment.cli(for: key) + ["SET", key, "x"])
        #expect(try await !tier.compareAndSet(key, CacheEntry(bytes: [5], flags: 2), version: swapped.version!).get().stored)
        // incr: initial, sums, refusals.
        let counter = unique("counter")
        guard case .value(15, let first) = try await tier.increment(counter, by: 5, initial: 10).get() else {
            Issue.record("first incr")
            return
        }
        guard case .value(12, let second) = try await tier.increment(counter, by: -3).get() else {
            Issue.record("second incr")
            return
        }
        #expect(second.version! > first.version!)
        #expect(try await tier.get(counter).get()?.entry == CacheEntry(bytes: Array("12".utf8), flags: 3, version: second.version!))
        #expect(try await tier.increment(key, by: 1).get() == .notAnInteger)
        #expect(try await tier.increment(counter, by: Int64.max).get() == .overflow)
        let fresh = unique("fresh")
        #expect(try await tier.increment(fresh, by: Int64.max, initial: 1).get() == .overflow)
        #expect(try await tier.get(fresh).get() == nil, "a refused increment of a new key left a key behind")
        // Without an initial value a missing key is refused in the same script, and stays missing.
        #expect(try await tier.increment(fresh, by: 1, initial: nil).get() == .missing)
        #expect(try await tier.get(fresh).get() == nil, "an increment without an initial value created the key")
        guard case .value(13, _) = try await tier.increment(counter, by: 1, initial: nil).get() else {
            Issue.record("an increment without an initial value of an existing key")
            return
        }
        // touch gives a lifetime and the metadata follows it.
        let touchedAt = ContinuousClock.now
        #expect(try await tier.touch(counter, lifetime: .milliseconds(30_000)).get())
        let pttl = try redisCLI(try deployment.cli(for: counter) + ["PTTL", KeyLayout.meta(counter)])
        #expect(isRemainder(Int(pttl.trimmingCharacters(in: .whitespacesAndNewlines)), of: 30_000, since: touchedAt))
        #expect(try await !tier.touch(unique("none"), lifetime: .never).get())
        // remove takes the metadata with it.
        #expect(try await tier.remove(counter).get())
        #expect(try await !tier.remove(counter).get())
        #expect(try redisCLI(try deployment.cli(for: counter) + ["EXISTS", KeyLayout.meta(counter)]).hasPrefix("0"))
    }

    @Test(arguments: Deployment.allCases)
    func renewGivesTheAskedLifetimeOnlyToTheVersionRead(deployment: Deployment) async throws {
        let (tier, _) = try await start(deployment)
        defer { _ = tier.shutdown() }
        let key = unique("renew")
        let cli = try deployment.cli(for: key)
        func field(_ name: String) throws -> String {
            try redisCLI(cli + ["HGET", KeyLayout.meta(key), name]).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let written = try await tier.set(key, CacheEntry(bytes: [1]), lifetime: .sliding(60_000)).get()
        // The version read: the asked lifetime, its span the one reads slide by, a lifetime
        // another client set notwithstanding (on the value alone: the metadata keeps 60 s).
        try redisCLI(cli + ["PEXPIRE", key, "90000"])
        let renewedAt = ContinuousClock.now
        guard case .renewed(let timeToLive) = try await tier.renew(key, version: written.version!, lifetime: .sliding(120_000)).get() else {
            Issue.record("the version read was not renewed")
            return
        }
        #expect(isRemainder(timeToLive.map(Int.init), of: 120_000, since: renewedAt))
        #expect(try field("s") == "120000")
        // An instant: no span left to slide by; no end: PERSIST on both keys.
        #expect(try await tier.renew(key, version: written.version!, lifetime: .milliseconds(30_000)).get() != .changed)
        #expect(try field("s").isEmpty)
        #expect(try await tier.renew(key, version: written.version!, lifetime: .never).get() == .renewed(timeToLive: nil))
        #expect(try redisCLI(cli + ["PTTL", KeyLayout.meta(key)]).hasPrefix("-1"))
        // Written again since (through Halcyon, or by any client): the read's version
        // renews nothing.
        let again = try await tier.set(key, CacheEntry(bytes: [2]), lifetime: .milliseconds(9_000)).get()
        #expect(try await tier.renew(key, version: written.version!, lifetime: .never).get() == .changed)
        try redisCLI(cli + ["SET", key, "foreign", "PX", "9000"])
        #expect(try await tier.renew(key, version: again.version!, lifetime: .never).get() == .changed)
        #expect(try Int(redisCLI(cli + ["PTTL", key]).trimmingCharacters(in: .whitespacesAndNewlines)).map { $0 > 0 } == true)
        #expect(try await tier.renew(unique("none"), version: 1, lifetime: .never).get() == .changed)
    }

    @Test(arguments: Deployment.allCases)
    func removePrefixReachesEveryNode(deployment: Deployment) async throws {
        let (tier, _) = try await start(deployment)
        defer { _ = tier.shutdown() }
        let prefix = unique("prefix") + ":"
        for index in 0..<60 { _ = try await tier.set("\(prefix)\(index)", CacheEntry(bytes: [UInt8(index)])).get() }
        let other = unique("kept")
        _ = try await tier.set(other, CacheEntry(bytes: [1])).get()
        #expect(try await tier.removePrefix(prefix).get() == 60)
        #expect(try await tier.get("\(prefix)7").get() == nil)
        #expect(try await tier.get(other).get() != nil)
    }

    /// A removal by prefix takes only the keys its filter accepts (the shared keys of a
    /// namespace, when keys carry one), on every node; the others, and their metadata, stay.
    @Test(arguments: Deployment.allCases)
    func removePrefixKeepsWhatItsFilterRefuses(deployment: Deployment) async throws {
        let (tier, _) = try await start(deployment)
        defer { _ = tier.shutdown() }
        let base = unique("ns") + "\u{1F}"
        for index in 0..<20 {
            _ = try await tier.set("\(base)sess:\(index)", CacheEntry(bytes: [1])).get()
            _ = try await tier.set("\(base)other:\(index)", CacheEntry(bytes: [2])).get()
        }
        let sessions = CacheKey(base + "sess:")
        #expect(try await tier.removePrefix(base, where: { $0.hasPrefix(sessions) }).get() == 20)
        #expect(try await tier.get("\(base)sess:3").get() == nil)
        #expect(try await tier.get("\(base)other:3").get()?.entry.bytes == [2])
        #expect(try await tier.removePrefix(base).get() == 20)
    }

    /// A prefix is bytes, and so is its glob escape: `[` followed by a combining mark is one
    /// `Character` and still the byte `SCAN MATCH` reads as a class; a listing's order and
    /// prefix are those of the bytes.
    @Test func prefixesAndListingsAreBytes() async throws {
        let (tier, _) = try await start(.standalone)
        defer { _ = tier.shutdown() }
        let base = unique("bytes") + ":"
        let marked = base + "[\u{301}"
        for key in [marked + "1", marked + "2", base + "caf\u{E9}", base + "cafe\u{301}"] {
            _ = try await tier.set(key, CacheEntry(bytes: Array(key.utf8))).get()
        }
        var listed: [CacheKey] = []
        var cursor: String?
        var pages = 0
        repeat {
            let page = try await tier.listKeys(prefix: base + "cafe", cursor: cursor, limit: 100).get()
            listed += page.keys
            cursor = page.cursor
            pages += 1
        } while cursor != nil && pages < 1000
        #expect(listed == [CacheKey(base + "cafe\u{301}")])
        #expect(try await tier.get(base + "caf\u{E9}").get()?.entry.bytes == Array((base + "caf\u{E9}").utf8))
        #expect(try await tier.get(base + "cafe\u{301}").get()?.entry.bytes == Array((base + "cafe\u{301}").utf8))
        #expect(try await tier.removePrefix(marked).get() == 2)
        #expect(try await tier.get(marked + "1").get() == nil)
        #expect(try await tier.removePrefix(base + "caf\u{E9}").get() == 1)
        #expect(try await tier.get(base + "cafe\u{301}").get() != nil)
    }

    @Test(arguments: Deployment.allCases)
    func writeManyIsOneWritePerNode(deployment: Deployment) async throws {
        let (tier, _) = try await start(deployment)
        defer { _ = tier.shutdown() }
        let keys = (0..<30).map { unique("batch\($0)") }   // over every primary of a cluster
        let nodes = deployment == .cluster ? 3 : 1
        if deployment == .cluster {
            #expect(Set(try keys.map { try SharedServers.cluster.node(serving: $0).port }).count == 3)
        }
        // The first batch may find the scripts missing on a node (NOSCRIPT, sent again whole).
        _ = await tier.writeMany(keys.map { .set(CacheKey($0), CacheEntry(bytes: [0]), .never) } + keys.map { .remove(CacheKey($0)) })
        let before = try await tier.client.stats().get()
        let writes: [Upstream.Write] = keys.enumerated().map { index, key in
            .set(CacheKey(key), CacheEntry(bytes: Array("v\(index)".utf8), flags: 1), index == 0 ? .milliseconds(60_000) : .never)
        }
        let results = await tier.writeMany(writes)
        let after = try await tier.client.stats().get()
        #expect(results.count == keys.count)
        for (index, result) in results.enumerated() {
            let written = try result.get()
            #expect(written.stored && (written.version ?? 0) > 0)
            #expect(try await tier.get(keys[index]).get()?.entry == CacheEntry(bytes: Array("v\(index)".utf8), flags: 1, version: written.version!))
        }
        #expect(try results[0].get().timeToLive != nil && results[1].get().timeToLive == nil)
        // One pipelined write per node for 30 commands.
        #expect(after.writes - before.writes == nodes)
        #expect(after.batchedCommands - before.batchedCommands == keys.count)
        // Removals, and a key named twice keeps its order: set, remove, set again.
        let twice = keys[3]
        let mixed = await tier.writeMany([.remove(CacheKey(keys[1])), .remove(CacheKey(unique("none"))), .set(CacheKey(twice), CacheEntry(bytes: [1]), .never),
                                          .remove(CacheKey(twice)), .set(CacheKey(twice), CacheEntry(bytes: [2]), .never)])
        #expect(try mixed.map { try $0.get().stored } == [true, false, true, true, true])
        #expect(try await tier.get(keys[1]).get() == nil)
        #expect(try await tier.get(twice).get()?.entry.bytes == [2])
        #expect(try redisCLI(try deployment.cli(for: keys[1]) + ["EXISTS", KeyLayout.meta(keys[1])]).hasPrefix("0"))
    }

    @Test(arguments: Deployment.allCases)
    func listKeysPagesThroughEveryNode(deployment: Deployment) async throws {
        let (tier, _) = try await start(deployment)
        defer { _ = tier.shutdown() }
        let prefix = unique("list") + ":"
        let keys = Set((0..<45).map { "\(prefix)\($0)" })
        _ = await tier.writeMany(keys.map { .set(CacheKey($0), CacheEntry(bytes: [1]), .never) })
        _ = await tier.acquireLease("\(prefix)0", token: "t", lifetime: 30_000)   // its lease key is not listed
        _ = try await tier.set(unique("other"), CacheEntry(bytes: [1])).get()
        var listed: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let page = try await tier.listKeys(prefix: prefix, cursor: cursor, limit: 4).get()
            #expect(page.keys.count <= 4)
            listed += page.keys.map(\.string)
            cursor = page.cursor
            pages += 1
        } while cursor != nil && pages < 1000
        #expect(listed.count == keys.count, "every key once")
        #expect(Set(listed) == keys)
        #expect(pages >= 45 / 4)
    }

    @Test(arguments: Deployment.allCases)
    func leaseStatusIsTheUpstreamLease(deployment: Deployment) async throws {
        let (tier, _) = try await start(deployment)
        let (other, _) = try await start(deployment)
        defer { _ = tier.shutdown(); _ = other.shutdown() }
        let key = unique("status")
        #expect(try await tier.leaseStatus(key).get() == .none)
        let takenAt = ContinuousClock.now
        #expect(try await other.acquireLease(key, token: "A", lifetime: 30_000).get() == .acquired)
        guard case .some(.some(let left)) = try await tier.leaseStatus(key).get() else {
            Issue.record("a lease held on another host is not seen")
            return
        }
        #expect(isRemainder(Int(left), of: 30_000, since: takenAt))
        #expect(try await other.releaseLease(key, token: "A").get())
        #expect(try await tier.leaseStatus(key).get() == .none)
    }

    @Test(arguments: Deployment.allCases)
    func writesElsewhereInvalidateAReadCopy(deployment: Deployment) async throws {
        let (tier, observer) = try await start(deployment)
        let (other, _) = try await start(deployment)
        defer { _ = tier.shutdown(); _ = other.shutdown() }
        let key = unique("coherent")
        _ = try await other.set(key, CacheEntry(bytes: [1])).get()
        let read = try await tier.get(key).get()!
        // Another host's write.
        _ = try await other.set(key, CacheEntry(bytes: [2])).get()
        let event = observer.invalidation(of: key)
        #expect(event != nil && event!.sequence > read.sequence)
        // Our own write re-tracks the key: a later foreign write is heard again.
        let mine = try await tier.set(key, CacheEntry(bytes: [3])).get()
        let count = observer.log.all.count
        try redisCLI(try deployment.cli(for: key) + ["SET", key, "x"])
        let later = observer.log.wait(timeout: 5) { event in
            if case .invalidated(let keys, let sequence) = event { return keys.contains(CacheKey(key)) && sequence > mine.sequence }
            return false
        }
        #expect(later != nil, "after \(count) events")
    }

    @Test(arguments: Deployment.allCases)
    func leasesAreHeldInRedisAndTheirEndIsHeard(deployment: Deployment) async throws {
        let (holder, _) = try await start(deployment)
        let (waiter, observer) = try await start(deployment)
        defer { _ = holder.shutdown(); _ = waiter.shutdown() }
        let key = unique("leased")
        let leasedAt = ContinuousClock.now
        #expect(try await holder.acquireLease(key, token: "A", lifetime: 30_000).get() == .acquired)
        guard case .held(let ttl, let leaseKey, let sequence) = try await waiter.acquireLease(key, token: "B", lifetime: 30_000).get() else {
            Issue.record("a held lease was granted again")
            return
        }
        #expect(isRemainder(ttl.map(Int.init), of: 30_000, since: leasedAt) && leaseKey == CacheKey(KeyLayout.lease(key)))
        // Only the token's owner can release it.
        #expect(try await !waiter.releaseLease(key, token: "B").get())
        #expect(try await holder.releaseLease(key, token: "A").get())
        let woken = observer.invalidation(of: leaseKey.string)
        #expect(woken != nil && woken!.sequence > sequence)
        // A lifetime long enough that the holder's next try surely finds it held on a busy
        // machine, short enough that its end comes within the wait below.
        #expect(try await waiter.acquireLease(key, token: "B", lifetime: 3_000).get() == .acquired)
        // A lease whose holder vanished ends at its lifetime, and that is heard too.
        let holderEvents = Collected()
        holder.observe(holderEvents)
        guard case .held = try await holder.acquireLease(key, token: "A", lifetime: 30_000).get() else {
            Issue.record("lease B not held")
            return
        }
        #expect(holderEvents.invalidation(of: leaseKey.string, timeout: 10) != nil)
        #expect(try await holder.acquireLease(key, token: "A", lifetime: 1000).get() == .acquired)
    }

    @Test func aStoppedServerIsUnavailable() async throws {
        let server = try RedisServer()
        defer { server.remove() }
        let tier = RedisTier(configuration: .init(seeds: [server.address]), eventLoop: testGroup.next())
        try await tier.start().get()
        defer { _ = tier.shutdown() }
        let observer = Collected()
        tier.observe(observer)
        _ = try await tier.set("k", CacheEntry(bytes: [1])).get()
        server.kill()
        let flushed = observer.log.wait(timeout: 5) { if case .flushed = $0 { return true } else { return false } }
        #expect(flushed != nil)
        guard case .failure(.unavailable) = await tier.set("k", CacheEntry(bytes: [2])) else {
            Issue.record("a write to a stopped server did not fail as unavailable")
            return
        }
        guard case .failure(.unavailable) = await tier.get("k") else {
            Issue.record("a read from a stopped server did not fail as unavailable")
            return
        }
    }
}

// The in-memory upstream tier that hybrid-cache tests stand in for Redis with: the same
// contract as the Redis tier (versions, conditional writes, leases, events in sequence
// order, unavailability), checked here so a test built on it tests the real rules.

import Foundation
import HalcyonCache
import HalcyonSupport
import HalcyonTestSupport
import Testing

@Suite(.timeLimit(.minutes(1)))
struct UpstreamInMemoryTests {
    final class Recorder: Upstream.Observer {
        let events = Locked<[Upstream.Event]>([])
        func upstream(_ event: Upstream.Event) { events.withLock { $0.append(event) } }
        var all: [Upstream.Event] { events.withLock { $0 } }
    }

    /// The fake completes synchronously; this reads the result.
    func sync<T>(_ call: (@escaping @Sendable (T) -> Void) -> Void) -> T {
        let box = Locked<T?>(nil)
        call { value in box.withLock { $0 = value } }
        return box.withLock { $0! }
    }

    @Test func writesVersionAndAnnounce() throws {
        let clock = ManualClock()
        let upstream = Upstream.InMemory(clock: clock)
        let recorder = Recorder()
        upstream.observe(recorder)
        let first = try sync { upstream.set("k", CacheEntry(bytes: [1], flags: 3), lifetime: .milliseconds(1000), completion: $0) }.get()
        let read = try sync { upstream.get("k", completion: $0) }.get()
        #expect(read?.entry == CacheEntry(bytes: [1], flags: 3, version: first.version!))
        #expect(read?.timeToLive == 1000)
        // Its own writes are not announced back (their completions say so).
        #expect(recorder.all.isEmpty)
        #expect(first.sequence == 0)
        upstream.externalWrite("k", CacheEntry(bytes: [2]))
        #expect(recorder.all == [.invalidated(keys: ["k"], sequence: 1)])
        #expect(recorder.all[0].sequence > read!.sequence)
        #expect(try sync { upstream.get("k", completion: $0) }.get()!.entry.version > first.version!)
        clock.advance(by: 2)
        upstream.externalWrite("t", CacheEntry(bytes: [1]), lifetime: .milliseconds(10))
        clock.advance(by: 1)
        upstream.expireDue()
        #expect(recorder.all.last == .invalidated(keys: ["t"], sequence: 3))
    }

    @Test func conditionalWritesAndIncrements() throws {
        let upstream = Upstream.InMemory(clock: ManualClock())
        let added = try sync { upstream.add("k", CacheEntry(bytes: [1]), lifetime: .never, completion: $0) }.get()
        #expect(added.stored)
        #expect(try !sync { upstream.add("k", CacheEntry(bytes: [2]), lifetime: .never, completion: $0) }.get().stored)
        let swapped = try sync { upstream.compareAndSet("k", CacheEntry(bytes: [3]), version: added.version!, lifetime: .keep, completion: $0) }.get()
        #expect(swapped.stored)
        let stale = try sync { upstream.compareAndSet("k", CacheEntry(bytes: [4]), version: added.version!, lifetime: .keep, completion: $0) }.get()
        #expect(!stale.stored && stale.version == swapped.version)
        #expect(try sync { upstream.increment("n", by: 2, initial: 5, flags: 3, lifetime: .keep, completion: $0) }.get() != .overflow)
        guard case .value(9, _) = try sync({ upstream.increment("n", by: 2, initial: 0, flags: 3, lifetime: .keep, completion: $0) }).get() else {
            Issue.record("sum")
            return
        }
        #expect(try sync { upstream.increment("k", by: 1, initial: 0, flags: 3, lifetime: .keep, completion: $0) }.get() == .notAnInteger)
        #expect(try sync { upstream.increment("n", by: .max, initial: 0, flags: 3, lifetime: .keep, completion: $0) }.get() == .overflow)
        #expect(try sync { upstream.increment("absent", by: 1, initial: nil, flags: 3, lifetime: .keep, completion: $0) }.get() == .missing)
        #expect(try sync { upstream.get("absent", completion: $0) }.get() == nil)
        #expect(try sync { upstream.removePrefix("", completion: $0) }.get() == 2)
    }

    @Test func leasesAndTheirRelease() throws {
        let clock = ManualClock()
        let upstream = Upstream.InMemory(clock: clock)
        let recorder = Recorder()
        upstream.observe(recorder)
        #expect(try sync { upstream.acquireLease("k", token: "a", lifetime: 1000, completion: $0) }.get() == .acquired)
        guard case .held(let ttl, let leaseKey, _) = try sync({ upstream.acquireLease("k", token: "b", lifetime: 1000, completion: $0) }).get() else {
            Issue.record("granted twice")
            return
        }
        #expect(ttl == 1000)
        #expect(try !sync { upstream.releaseLease("k", token: "b", completion: $0) }.get())
        #expect(try sync { upstream.releaseLease("k", token: "a", completion: $0) }.get())
        #expect(recorder.all.isEmpty, "an own release is known from its completion")
        // Another host's lease and its release, heard as the lease key's invalidation.
        upstream.externalAcquireLease("k", token: "x", lifetime: 1000)
        guard case .held = try sync({ upstream.acquireLease("k", token: "b", lifetime: 10, completion: $0) }).get() else {
            Issue.record("another host's lease was not held")
            return
        }
        upstream.externalReleaseLease("k")
        #expect(recorder.all == [.invalidated(keys: [leaseKey], sequence: 1)])
        #expect(try sync { upstream.acquireLease("k", token: "b", lifetime: 10, completion: $0) }.get() == .acquired)
        clock.advance(by: 1)
        upstream.expireDue()
        #expect(recorder.all.last == .invalidated(keys: [leaseKey], sequence: 2))
        #expect(try sync { upstream.acquireLease("k", token: "c", lifetime: 10, completion: $0) }.get() == .acquired)
    }

    @Test func unreachableFailsEveryCallAndFlushes() {
        let upstream = Upstream.InMemory(clock: ManualClock())
        let recorder = Recorder()
        upstream.observe(recorder)
        upstream.setReachable(false)
        #expect(recorder.all == [.flushed(sequence: 1)])
        #expect(sync { upstream.get("k", completion: $0) } == .failure(.unavailable("unreachable")))
        #expect(sync { upstream.set("k", CacheEntry(bytes: [1]), lifetime: .never, completion: $0) } == .failure(.unavailable("unreachable")))
        upstream.setReachable(true)
        #expect(sync { upstream.get("k", completion: $0) } == .success(nil))
    }
}

// The ioQueue's rounds as completions see them: a wake-up deferred with
// `DeliveryRound.whenRoundEnds` from a queued read runs once the round ends, together
// with the others of the round; anywhere else it runs at once.

import Dispatch
import Foundation
import HalcyonSupport
import Testing
@testable import HalcyonCache

@Suite("DeliveryRound", .timeLimit(.minutes(1)))
struct DeliveryRoundTests {
    /// What a completion and the wake-up it deferred record.
    enum Event: Hashable, Sendable {
        case done(Int)
        case wake(Int)
    }

    /// Queues `count` disk reads (misses: the keys are nowhere) whose completions each
    /// record `.done(i)` and defer `.wake(i)`.
    static func queueReads(_ cache: HybridCache, _ count: Int, from first: Int = 0, into events: Recorder<Event>) {
        for i in first..<(first + count) {
            cache.retrieve(forKey: CacheKey("absent\(i)")) { _ in
                events.append(.done(i))
                DeliveryRound.whenRoundEnds { events.append(.wake(i)) }
            }
        }
    }

    /// Waits until every job queued so far has run and the wake-ups they deferred have
    /// run too: the drain's own answer is deferred the same way, after theirs.
    static func drain(_ cache: HybridCache) async {
        _ = await result { (done: @escaping @Sendable (Result<Void, CacheError>) -> Void) in
            cache.debugSleep(seconds: 0) { outcome in DeliveryRound.whenRoundEnds { done(outcome) } }
        }
    }

    /// Reads queued together (behind a held queue) complete in rounds: each round's
    /// wake-ups run after its last completion, in the order they were deferred; a round
    /// holds at most `roundJobLimit` jobs, and the reads share far fewer rounds than
    /// there are reads (only a thread held off its CPU past `roundTimeLimit` in the middle
    /// of a round ends it early).
    @Test func wakeUpsOfQueuedReadsRunAtTheEndOfTheirRound() async {
        let f = HybridCacheFixture()
        let events = Recorder<Event>()
        let gate = DispatchSemaphore(value: 0)
        f.cache.local.scheduler.holdForTesting { gate.wait() }
        let count = 40
        Self.queueReads(f.cache, count, into: events)
        gate.signal()
        await Self.drain(f.cache)

        // Split the record into rounds: completions, then their wake-ups.
        var rounds: [(done: [Int], woken: [Int])] = []
        for event in events.all {
            switch event {
            case .done(let i):
                if rounds.isEmpty || !(rounds.last!.woken.isEmpty) { rounds.append(([], [])) }
                rounds[rounds.count - 1].done.append(i)
            case .wake(let i):
                rounds[rounds.count - 1].woken.append(i)
            }
        }
        #expect(rounds.flatMap(\.done) == Array(0..<count))
        for (n, round) in rounds.enumerated() {
            #expect(round.woken == round.done, "round \(n): wake-ups \(round.woken) for completions \(round.done)")
            #expect(round.done.count <= LocalStore.IOScheduler.roundJobLimit)
        }
        #expect(rounds.count < count / 2, "\(rounds.count) rounds for \(count) reads")
    }

    /// A job that is not a read (it may hold the queue long) ends the round before it
    /// runs: the wake-ups of the reads before it do not wait for it.
    @Test func aWriteEndsTheRoundBeforeItRuns() async throws {
        let f = HybridCacheFixture()
        let events = Recorder<Event>()
        let gate = DispatchSemaphore(value: 0)
        f.cache.local.scheduler.holdForTesting { gate.wait() }
        Self.queueReads(f.cache, 3, into: events)
        f.cache.store(CacheEntry(bytes: [1]), forKey: "w") { _ in events.append(.done(100)) }
        Self.queueReads(f.cache, 3, from: 3, into: events)
        gate.signal()
        await Self.drain(f.cache)
        let all = events.all
        let stored = try #require(all.firstIndex(of: .done(100)))
        for i in 0..<3 {
            #expect(try #require(all.firstIndex(of: .wake(i))) < stored, "wake-up \(i) waited for the write")
        }
        #expect(Set(all) == Set((0..<6).flatMap { [Event.done($0), .wake($0)] } + [.done(100)]))
    }

    /// Off an ioQueue a wake-up runs at once, on the caller's thread.
    @Test func offTheIOQueueAWakeUpRunsAtOnce() {
        let ran = Locked(false)
        DeliveryRound.whenRoundEnds { ran.withLock { $0 = true } }
        #expect(ran.withLock { $0 })
    }
}

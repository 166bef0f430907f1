// Where each CallbackQueue case runs its block. Queues are tagged with a
// DispatchSpecificKey so a block can tell which queue it runs on; the main queue carries
// CallbackQueue's own marker (`isOnMainQueue`). Under `swift test` the main queue is
// drained (Swift Testing's async entry point parks the main thread in the main
// executor, which is the main dispatch queue), so main-queue cases are tested here.

import Dispatch
import Foundation
import HalcyonSupport
import Testing

@testable import HalcyonCache

/// A thread-safe list of observations made from callbacks.
final class Recorder<T: Sendable>: Sendable {
    private let items = Locked<[T]>([])
    func append(_ item: T) { items.withLock { $0.append(item) } }
    var all: [T] { items.withLock { $0 } }
}

@Suite("CallbackQueue", .timeLimit(.minutes(1)))
struct CallbackQueueTests {
    static let queueKey = DispatchSpecificKey<String>()

    static func taggedQueue(_ name: String) -> DispatchQueue {
        let queue = DispatchQueue(label: "halcyon.tests.\(name)")
        queue.setSpecific(key: queueKey, value: name)
        return queue
    }

    /// Runs `body` with a callback to call from the block; returns what the block observed.
    static func observe<T: Sendable>(_ body: @escaping @Sendable (@escaping @Sendable (T) -> Void) -> Void) async -> T {
        await withCheckedContinuation { continuation in
            body { continuation.resume(returning: $0) }
        }
    }

    @Test func untouchRunsInlineOnTheCallingThread() {
        let ranInline = Locked(false)
        let caller = pthread_self()
        CallbackQueue.untouch.execute {
            ranInline.withLock { $0 = pthread_equal(pthread_self(), caller) != 0 }
        }
        #expect(ranInline.withLock { $0 })
    }

    @Test func dispatchRunsAsynchronouslyOnThatQueue() async {
        let queue = Self.taggedQueue("dispatch")
        queue.suspend()
        let ran = Locked(false)
        let observed: String? = await Self.observe { done in
            CallbackQueue.dispatch(queue).execute {
                ran.withLock { $0 = true }
                done(DispatchQueue.getSpecific(key: Self.queueKey))
            }
            // Async: nothing ran while the queue is suspended.
            #expect(!ran.withLock { $0 })
            queue.resume()
        }
        #expect(observed == "dispatch")
    }

    @Test func operationQueueRunsOnThatQueueInPriorityOrder() {
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.isSuspended = true
        let order = Recorder<String>()
        let onQueue = Recorder<Bool>()
        let priorities: [(String, Operation.QueuePriority)] = [("low", .low), ("veryHigh", .veryHigh), ("normal", .normal), ("high", .high)]
        for (name, priority) in priorities {
            CallbackQueue.operationQueue(queue).execute(priority: priority) {
                onQueue.append(OperationQueue.current === queue)
                order.append(name)
            }
        }
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        #expect(order.all == ["veryHigh", "high", "normal", "low"])
        #expect(onQueue.all == [true, true, true, true])
    }

    @Test func mainAsyncAlwaysHopsToTheMainQueue() async {
        // From a background queue.
        let fromBackground: Bool = await Self.observe { done in
            Self.taggedQueue("bg").async {
                CallbackQueue.mainAsync.execute { done(CallbackQueue.isOnMainQueue) }
            }
        }
        #expect(fromBackground)
        // From the main queue itself it still does not run inline.
        let (inline, onMain): (Bool, Bool) = await Self.observe { done in
            DispatchQueue.main.async {
                let ran = Locked(false)
                CallbackQueue.mainAsync.execute {
                    ran.withLock { $0 = true }
                }
                let ranInline = ran.withLock { $0 }
                CallbackQueue.mainAsync.execute { done((ranInline, CallbackQueue.isOnMainQueue)) }
            }
        }
        #expect(!inline)
        #expect(onMain)
    }

    @Test func mainCurrentOrAsyncRunsInlineOnlyOnTheMainQueue() async {
        let (inline, onMain): (Bool, Bool) = await Self.observe { done in
            DispatchQueue.main.async {
                let ran = Locked(false)
                CallbackQueue.mainCurrentOrAsync.execute { ran.withLock { $0 = true } }
                done((ran.withLock { $0 }, CallbackQueue.isOnMainQueue))
            }
        }
        #expect(inline)
        #expect(onMain)
        let (inlineFromBackground, landedOnMain): (Bool, Bool) = await Self.observe { done in
            Self.taggedQueue("bg2").async {
                CallbackQueue.mainCurrentOrAsync.execute {
                    // Inline would mean still on "bg2". (Checking a flag after execute returns
                    // would race: the main queue may already have run the block.)
                    done((DispatchQueue.getSpecific(key: Self.queueKey) == "bg2", CallbackQueue.isOnMainQueue))
                }
            }
        }
        #expect(!inlineFromBackground)
        #expect(landedOnMain)
    }

    @Test func isOnMainQueueIsFalseOffTheMainQueue() async {
        let onMain: Bool = await Self.observe { done in
            Self.taggedQueue("bg3").async { done(CallbackQueue.isOnMainQueue) }
        }
        #expect(!onMain)
    }
}

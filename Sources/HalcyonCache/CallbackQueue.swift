// Where a completion runs: the delivery policy of every asynchronous cache call, with
// Kingfisher's five meanings. The one Linux-specific part is how "already on the main
// queue" is detected: Foundation's main-thread test answers false inside main-queue
// blocks under `dispatchMain()`, so the main queue carries a `DispatchSpecificKey` instead.

import Dispatch
import Foundation

/// Where and how a completion block runs.
///
/// Threading: `execute` may be called from any thread. The block runs where the case says:
/// - `mainAsync`: always asynchronously on `DispatchQueue.main`.
/// - `mainCurrentOrAsync`: inline when the caller is already running on the main queue,
///   otherwise asynchronously on it.
/// - `untouch`: inline, on the calling thread (for ioQueue work: on the ioQueue, so the
///   block must only hand off, never block or re-enter the cache synchronously).
/// - `dispatch(q)`: asynchronously on `q`.
/// - `operationQueue(q)`: as a `BlockOperation` added to `q` with the given priority.
public enum CallbackQueue: Sendable {
    /// Always hop to the main queue.
    case mainAsync
    /// Run inline when already on the main queue, else hop to it.
    case mainCurrentOrAsync
    /// Run inline on whatever thread finished the work.
    case untouch
    /// Run asynchronously on this queue.
    case dispatch(DispatchQueue)
    /// Run as an operation on this queue; `priority` orders queued operations.
    case operationQueue(OperationQueue)

    /// Runs `block` according to the policy.
    ///
    /// - Parameters:
    ///   - priority: the `queuePriority` of the operation; used by `.operationQueue` only.
    ///     Default `.normal`.
    ///   - block: the work to run; never run more than once.
    public func execute(priority: Operation.QueuePriority = .normal, _ block: @escaping @Sendable () -> Void) {
        switch self {
        case .mainAsync:
            DispatchQueue.main.async(execute: block)
        case .mainCurrentOrAsync:
            if CallbackQueue.isOnMainQueue {
                block()
            } else {
                DispatchQueue.main.async(execute: block)
            }
        case .untouch:
            block()
        case .dispatch(let queue):
            queue.async(execute: block)
        case .operationQueue(let queue):
            let operation = BlockOperation(block: block)
            operation.queuePriority = priority
            queue.addOperation(operation)
        }
    }

    /// True while the caller runs a block of `DispatchQueue.main` (or the main thread
    /// draining it). Reads the key that `mainQueueKey` installs on first use.
    public static var isOnMainQueue: Bool {
        DispatchQueue.getSpecific(key: mainQueueMarker.key) != nil
    }

    /// The marker on the main queue. A `static let` is initialised exactly once, under the
    /// runtime's once-lock, so concurrent first callers cannot install two keys.
    private static let mainQueueMarker: MainQueueMarker = {
        let marker = MainQueueMarker()
        DispatchQueue.main.setSpecific(key: marker.key, value: ())
        return marker
    }()
}

/// Holds the key tagging `DispatchQueue.main`.
///
/// `@unchecked Sendable`: `key` is immutable after init and libdispatch reads specific
/// values under its own lock; the key object itself carries no mutable state we touch.
private final class MainQueueMarker: @unchecked Sendable {
    let key = DispatchSpecificKey<Void>()
}

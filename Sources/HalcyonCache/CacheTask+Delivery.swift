// How every operation of the cache's stores is answered: a task made when the call
// arrives, and one delivery of its result through the caller's `CallbackQueue`. Both
// homes of a key (`LocalStore`, `SharedStore`) and the façade answer this one way.

import Foundation

/// A type whose operations answer through `CacheTask`s and `CallbackQueue`s.
///
/// Threading: every method may be called from any thread; none holds a lock while it
/// delivers (a completion runs on its callback queue, never inside a caller's lock).
protocol DeliversTasks: Sendable {}

extension DeliversTasks {
    /// A pending task whose early cancel delivers `.cancelled(started: false)` through
    /// `callbackQueue` from inside `cancel()`.
    func makeTask<T: Sendable>(
        _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<T, CacheError>) -> Void)?
    ) -> CacheTask {
        guard let completion else { return CacheTask(onCancelBeforeStart: nil) }
        return CacheTask(onCancelBeforeStart: {
            callbackQueue.execute(priority: priority) { completion(.failure(.cancelled(started: false))) }
        })
    }

    /// Hands `result` to the callback queue. The task's delivery claim runs there, right
    /// before the completion, so a cancel that returned first always wins.
    func deliver<T: Sendable>(
        _ result: Result<T, CacheError>, task: CacheTask, _ callbackQueue: CallbackQueue,
        _ priority: Operation.QueuePriority, _ completion: (@Sendable (Result<T, CacheError>) -> Void)?
    ) {
        task.workFinished()
        guard let completion else {
            _ = task.claimDelivery()
            return
        }
        callbackQueue.execute(priority: priority) {
            if task.claimDelivery() {
                completion(result)
            } else {
                completion(.failure(.cancelled(started: true)))
            }
        }
    }

    /// Runs `work` now, on the caller's thread, and delivers its result.
    func runInline<T: Sendable>(
        _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<T, CacheError>) -> Void)?,
        _ work: () -> Result<T, CacheError>
    ) -> CacheTask {
        let task = CacheTask(onCancelBeforeStart: nil)
        _ = task.begin()
        deliver(work(), task: task, callbackQueue, priority, completion)
        return task
    }
}

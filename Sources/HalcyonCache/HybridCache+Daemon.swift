// What the daemon needs from the composite cache at shutdown, so that it never reaches
// for the ioQueue itself.

import Dispatch

extension HybridCache {
    /// Blocks the calling thread until every write and disk read queued before this call
    /// has finished: the last step of a drain, so no file is left half-written at exit.
    ///
    /// Threading: any thread except the ioQueue itself (that would deadlock, and is
    /// checked); blocks, so never call it from an event loop.
    public func waitForQueuedWork() {
        dispatchPrecondition(condition: .notOnQueue(ioQueue))
        ioQueue.sync {}
    }
}

// How many jobs the ioQueue has queued or running.

import Dispatch
import Synchronization

/// Counts the ioQueue's jobs from the moment they are queued until they have run.
///
/// `HybridCache.commitDirect` makes its caller wait for the ioQueue (`sync`); a caller
/// that must not wait behind a long job (an event loop, behind a sweep or a
/// `debug.sleep`) asks `isIdle` first. Some jobs are counted only from the moment they
/// start (`counting`): those a timer queues (the sweep), and the materializer's slices,
/// each about one file operation, which every group commit schedules: counted from their
/// queueing, they would keep the next commits off the direct path for nothing; so are
/// queued updates whose store goes to the journal (`enqueue`'s `short`). Queued
/// journaled sets are not counted at all (see `enqueueJournaled`).
///
/// Threading: any thread; one atomic counter.
final class IOQueueJobs: Sendable {
    private let count = Atomic<Int>(0)

    /// No job is queued or running (a commit that starts now waits for no one but
    /// another `commitDirect`, or a job queued at this very instant).
    var isIdle: Bool { count.load(ordering: .sequentiallyConsistent) == 0 }

    /// Queues `job` on `queue`, counted until it has run.
    func submit(_ job: @escaping @Sendable () -> Void, on queue: DispatchQueue) {
        count.add(1, ordering: .sequentiallyConsistent)
        queue.async { [self] in
            job()
            count.subtract(1, ordering: .sequentiallyConsistent)
        }
    }

    /// `job`, counted while it runs: for blocks a timer queues.
    func counting(_ job: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        { [self] in
            count.add(1, ordering: .sequentiallyConsistent)
            job()
            count.subtract(1, ordering: .sequentiallyConsistent)
        }
    }
}

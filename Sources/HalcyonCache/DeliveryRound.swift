// Wake-ups of the threads that completions hand replies to, grouped by the ioQueue's
// rounds: a burst of queued reads wakes each waiting thread once, not once per reply.

import Dispatch

/// Where a completion defers the wake-up of the thread it hands its result to.
///
/// A completion that runs on an ioQueue (`CallbackQueue.untouch`) and leaves its result
/// where another thread will take it (a connection's mailbox) calls `whenRoundEnds` with
/// the wake-up of that thread. On an ioQueue the wake-up runs when the queue's current
/// round ends (`LocalStore.IOScheduler`: no job queued behind, `roundJobLimit` jobs
/// run, the first wake-up waited `roundTimeLimit`, or a job that is not a read comes
/// next), so the replies of one round share it. Anywhere else it runs at once.
///
/// The contract for `wake`: it only wakes (schedules a drain of what was left); the
/// result itself must already be where the woken thread finds it, so a thread that
/// looks before the wake-up (it drains on its own for another reason) still finds it.
///
/// Threading: any thread; `wake` runs on the calling thread, now or at the round's end.
public enum DeliveryRound {
    /// Runs `wake` at the end of the ioQueue's current round when called on an ioQueue,
    /// at once otherwise.
    public static func whenRoundEnds(_ wake: @escaping @Sendable () -> Void) {
        if let round = DispatchQueue.getSpecific(key: LocalStore.Round.key) {
            round.postpone(wake)
        } else {
            wake()
        }
    }
}

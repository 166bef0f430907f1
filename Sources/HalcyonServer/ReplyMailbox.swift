// Replies produced off a connection's event loop, waiting for it.

import HalcyonRPC
import HalcyonSupport

/// Replies that other threads (the ioQueue, a callback queue) produced for one connection,
/// waiting for its event loop.
///
/// A burst of replies costs one hop: only the post that finds the mailbox idle schedules a
/// drain on the loop, and that drain completes everything posted until it runs. (One hop
/// per reply made every reply a loop task of its own, with its own flush and `write(2)`,
/// and a wake-up of the loop for each.) Order: the order of posting.
///
/// Threading: `post` from any thread; `takeAll` on the connection's event loop. `Locked`
/// guards the queue and the scheduled flag; held only to append or swap.
final class ReplyMailbox: Sendable {
    /// One reply, with what the in-flight table and the metrics need to finish it.
    struct Posted: Sendable {
        var seq: UInt64
        var reply: RPCReply
        var observed: Observer.Request?
    }

    private struct State {
        var replies: [Posted] = []
        var drainScheduled = false
    }

    private let state = Locked(State())

    /// Queues a reply; true when the caller must schedule a drain (none is pending).
    func post(_ posted: Posted) -> Bool {
        state.withLock { s in
            s.replies.append(posted)
            if s.drainScheduled { return false }
            s.drainScheduled = true
            return true
        }
    }

    /// Whether replies wait (a quick look; the loop drains them before answering in order).
    var hasPending: Bool { state.withLock { !$0.replies.isEmpty } }

    /// Everything posted so far; the next post schedules a new drain.
    func takeAll() -> [Posted] {
        state.withLock { s in
            s.drainScheduled = false
            let taken = s.replies
            s.replies = []
            return taken
        }
    }
}

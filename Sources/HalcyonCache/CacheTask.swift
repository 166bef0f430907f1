// The cancellation token every asynchronous cache call returns, and the small state
// machine behind its guarantees:
//
//   pending ──begin()──▶ running ──workFinished()──▶ awaitingDelivery ──claimDelivery()──▶ done
//      │                    │                              │
//   cancel()             cancel()                       cancel()
//      ▼                    ▼                              ▼
//   cancelledBeforeStart  running+cancelled ──▶  awaitingDelivery+cancelled ──claim──▶ done
//
// Every transition happens under one lock (`state`); nothing is ever called while it is
// held. Why the guarantees hold under races:
// - "Cancelled before start, the work never runs": the work queue calls `begin()` first;
//   `begin()` and `cancel()` take the same lock, so exactly one wins. If cancel won, begin
//   returns false and the work is skipped.
// - "Cancelled before start, completion gets cancelled(started: false) promptly, once":
//   only the transition out of `pending` by `cancel()` fires `onCancelBeforeStart`, and that
//   transition can happen once.
// - "No success completion begins after cancel() returned": a success is delivered only by
//   the block that wins `claimDelivery()` in `awaitingDelivery` without the cancelled flag,
//   and that check is made on the callback queue immediately before the completion is
//   called. A cancel() that returned first has set the flag under the same lock, so the
//   claim sees it and delivers cancelled(started: true) instead.
// - "Exactly one completion": either `onCancelBeforeStart` fires (and `begin()` then fails,
//   so no delivery block is ever made), or `begin()` succeeded and exactly one delivery
//   block is scheduled, which claims once.
//
// Tested: the state machine directly (8 threads cancelling at once fire once); a queued
// store cancelled behind `debugSleep` leaves both tiers empty and is answered before the
// sleep ends; a store and a memory hit cancelled while their delivery waits on a suspended
// queue get `started: true` and the store's value stands; 2,000 tasks (reads, stores,
// describes, removes; dispatch and untouch delivery) with cancels racing from another
// queue: every task got exactly one completion, no success began after its `cancel()`
// returned, and both outcomes occurred.

import HalcyonSupport

/// A handle on one asynchronous cache request, used to cancel it.
///
/// Threading: thread-safe; `cancel()` may be called from any thread, any number of times.
/// When the request had not started, its completion (with
/// `CacheError.cancelled(started: false)`) is handed to the request's callback queue from
/// inside `cancel()` — inline on the cancelling thread under `.untouch`.
public final class CacheTask: Sendable {
    enum Phase: Sendable {
        case pending
        case cancelledBeforeStart
        case running
        case awaitingDelivery
        case done
    }

    struct State: Sendable {
        var phase: Phase = .pending
        var cancelled = false
        /// Delivers the cancelled(started: false) completion; dropped once used or no
        /// longer possible, releasing what it captured.
        var onCancelBeforeStart: (@Sendable () -> Void)?
    }

    /// Guards the phase and the cancelled flag; held only for the transitions.
    private let state: Locked<State>

    /// - Parameter onCancelBeforeStart: run (outside the lock) by the `cancel()` that finds
    ///   the task still pending.
    init(onCancelBeforeStart: (@Sendable () -> Void)?) {
        state = Locked(State(onCancelBeforeStart: onCancelBeforeStart))
    }

    /// A task for work that completed before the caller got the token.
    /// A handle on work that is not a storage request (a parked `cache.lease`): it never
    /// begins, and its first `cancel()` calls `onCancel`, on the cancelling thread.
    public static func cancellable(onCancel: @escaping @Sendable () -> Void) -> CacheTask {
        CacheTask(onCancelBeforeStart: onCancel)
    }

    static func finished() -> CacheTask {
        let task = CacheTask(onCancelBeforeStart: nil)
        task.state.withLock { $0.phase = .done }
        return task
    }

    /// Withdraws the request. Before it started: it never runs, and its completion gets
    /// `.cancelled(started: false)` now. After it started but before its completion began:
    /// the completion gets `.cancelled(started: true)` (the work's effects stand). After
    /// the completion began: no effect.
    public func cancel() {
        let fire = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.cancelled else { return nil }
            state.cancelled = true
            guard state.phase == .pending else { return nil }
            state.phase = .cancelledBeforeStart
            defer { state.onCancelBeforeStart = nil }
            return state.onCancelBeforeStart
        }
        fire?()
    }

    /// Whether `cancel()` has been called (whether or not it still changed the outcome).
    public var isCancelled: Bool {
        state.withLock { $0.cancelled }
    }

    /// Whether the outcome is fixed: the completion was claimed (or the task was cancelled
    /// before it started). Lets tests tell, after `cancel()` returned, that any claim must
    /// still come and so must see the cancel.
    var isSettled: Bool {
        state.withLock { $0.phase == .done || $0.phase == .cancelledBeforeStart }
    }

    /// Called on the work queue before the work. False: cancelled, skip the work (the
    /// completion has been handed off already).
    func begin() -> Bool {
        state.withLock { state in
            switch state.phase {
            case .pending:
                state.phase = .running
                state.onCancelBeforeStart = nil
                return true
            case .cancelledBeforeStart:
                return false
            case .running, .awaitingDelivery, .done:
                preconditionFailure("CacheTask.begin() called twice")
            }
        }
    }

    /// Called after the work, before its completion is handed to the callback queue.
    func workFinished() {
        state.withLock { state in
            precondition(state.phase == .running, "CacheTask.workFinished() outside running")
            state.phase = .awaitingDelivery
        }
    }

    /// Called on the callback queue just before the completion. True: deliver the result;
    /// false: deliver `.cancelled(started: true)` instead.
    func claimDelivery() -> Bool {
        state.withLock { state in
            precondition(state.phase == .awaitingDelivery, "CacheTask delivered twice")
            state.phase = .done
            return !state.cancelled
        }
    }
}

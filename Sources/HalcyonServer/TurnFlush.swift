// The reply flushes of one event loop's connections, done once per turn of the loop.

import NIOCore

/// The connections of one event loop whose gathered replies go out at the end of the
/// loop's turn: one task queued on the loop runs after every channel's reads of the turn
/// (as `DirectWriteGroup`'s commit does) and hands each waiting connection's replies to
/// its channel and flushes it, in the order the connections asked.
///
/// Why at the end of the turn, not at the end of each connection's burst: a flush wakes
/// that connection's client, and with many pipelining connections on few cores the woken
/// client takes the core from the loop while other connections' requests still wait to be
/// read (Redis writes its replies before it sleeps, for the same reason). A burst of one
/// line is not held (`ConnectionHandler.channelReadComplete`). The figures are in
/// Benchmarks/RESULTS.md, "Replies at the end of the loop's turn".
///
/// Threading: confined to its event loop; connections reach it through `LoopShares`.
final class TurnFlush {
    private let eventLoop: any EventLoop
    /// The connections waiting, in order; `running` is the list being flushed, kept so
    /// that neither list is allocated anew each turn.
    private var waiting: [ConnectionHandler] = []
    private var running: [ConnectionHandler] = []
    private var queued = false

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// `handler`'s replies go out at the end of this turn (`ConnectionHandler.flushAtTurnEnd`).
    /// The caller adds a connection at most once a turn (`ConnectionOutbound.flushScheduled`).
    func add(_ handler: ConnectionHandler) {
        waiting.append(handler)
        guard !queued else { return }
        queued = true
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        eventLoop.execute { bound.value.run() }
    }

    private func run() {
        queued = false
        swap(&waiting, &running)
        // A flush may add a connection again (a close's last reply): it waits for the next
        // task, queued by that `add`.
        for handler in running { handler.flushAtTurnEnd() }
        running.removeAll(keepingCapacity: true)
    }
}

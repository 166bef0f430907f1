// What the connections of one event loop share.

import HalcyonRPC
import HalcyonSupport
import NIOCore

/// The parts the connections of one event loop share: the loop's direct-write group and
/// its turn's reply flush. Both are confined to the loop.
struct LoopShare {
    let group: DirectWriteGroup
    let flush: TurnFlush

    /// New parts for `eventLoop`. A handler made without the daemon's `LoopShares` (as in
    /// transport tests) makes its own: its connection's writes are grouped, and its
    /// replies flushed, on their own.
    init(dispatcher: Dispatcher, eventLoop: any EventLoop) {
        group = DirectWriteGroup(dispatcher: dispatcher, eventLoop: eventLoop)
        flush = TurnFlush(eventLoop: eventLoop)
    }
}

/// Each event loop's `LoopShare`, made on first use.
///
/// Threading: any thread; `Locked` guards the table. A share itself is used only on its
/// loop (`NIOLoopBound` checks it).
final class LoopShares: Sendable {
    private let shares = Locked([ObjectIdentifier: NIOLoopBound<LoopShare>]())

    /// The share of `loop` (made with `dispatcher` on first use); call on `loop`.
    func share(for loop: any EventLoop, dispatcher: Dispatcher) -> LoopShare {
        shares.withLock { table in
            let key = ObjectIdentifier(loop)
            if let bound = table[key] { return bound.value }
            let share = LoopShare(dispatcher: dispatcher, eventLoop: loop)
            table[key] = NIOLoopBound(share, eventLoop: loop)
            return share
        }
    }
}

// The direct writes of every connection of one event loop, committed together.

import HalcyonRPC
import HalcyonCache
import NIOCore

/// The direct writes (`cache.set`, `cache.add`, `cache.cas`, `cache.incr`: see
/// `Dispatcher.directWrites`) the connections of one event loop gathered during one turn of the
/// loop, committed as one group when the turn's reads are done (a task queued on the loop
/// runs after every channel's reads of the turn): Redis's rule, the writes of one turn of
/// the event loop share one `write(2)`. A connection gathering its own sets made groups of
/// one read burst, a single set under a 9:1 read/write mix.
///
/// The group is committed earlier when a connection must answer something else after its
/// sets (a read, a cancel: see `ConnectionHandler`), or when it reaches `maxCount` sets or
/// `maxBytes` of values. Each connection then writes its replies, in its own order; then
/// the leases of the keys written end (their parked callers may be answered at once);
/// then each connection hands its replies to the channel.
///
/// Threading: confined to its event loop. Connections reach it through
/// `DirectWriteGroups`, which hands each loop's group out in a `NIOLoopBound`.
final class DirectWriteGroup {
    private struct Entry {
        let handler: ConnectionHandler
        let write: Dispatcher.DirectWrite
        let observed: Observer.Request?
    }

    /// The most sets, and value bytes, gathered before they are committed, even within a
    /// turn. The bytes bound keeps one group far below the journal's bounds, which the
    /// direct path checks (at 90 %) only before a group, not within it.
    static let maxCount = 256
    static let maxBytes = 1 << 20

    private let dispatcher: Dispatcher
    private let eventLoop: any EventLoop
    private var entries: [Entry] = []
    private var bytes = 0
    private var commitQueued = false

    init(dispatcher: Dispatcher, eventLoop: any EventLoop) {
        self.dispatcher = dispatcher
        self.eventLoop = eventLoop
    }

    /// Gathers a write of `handler`'s; committed at the end of this turn at the latest.
    func add(_ write: Dispatcher.DirectWrite, observed: Observer.Request?, from handler: ConnectionHandler) {
        entries.append(Entry(handler: handler, write: write, observed: observed))
        bytes += write.valueSize
        if entries.count >= Self.maxCount || bytes >= Self.maxBytes {
            commit()
        } else if !commitQueued {
            commitQueued = true
            let bound = NIOLoopBound(self, eventLoop: eventLoop)
            eventLoop.execute {
                let group = bound.value
                group.commitQueued = false
                group.commit()
            }
        }
    }

    /// Commits every write gathered so far, of every connection (see the type's comment).
    func commit() {
        guard !entries.isEmpty else { return }
        let taken = entries
        entries.removeAll(keepingCapacity: true)
        bytes = 0
        let outcomes = dispatcher.commitDirectWrites(taken.map(\.write))
        var members: [ConnectionHandler] = []
        for (entry, outcome) in zip(taken, outcomes) {
            entry.handler.directWriteCommitted(outcome, observed: entry.observed)
            if !members.contains(where: { $0 === entry.handler }) { members.append(entry.handler) }
        }
        dispatcher.endLeases(outcomes)
        for member in members { member.directWritesAnswered() }
    }
}

/// Each event loop's `DirectWriteGroup`, made on first use.
///
/// Threading: any thread; `Locked` guards the table. A group itself is used only on its
/// loop (`NIOLoopBound` checks it).
final class DirectWriteGroups: Sendable {
    private let groups = Locked([ObjectIdentifier: NIOLoopBound<DirectWriteGroup>]())

    /// The group of `loop` (made with `dispatcher` on first use); call on `loop`.
    func group(for loop: any EventLoop, dispatcher: Dispatcher) -> DirectWriteGroup {
        groups.withLock { table in
            let key = ObjectIdentifier(loop)
            if let bound = table[key] { return bound.value }
            let group = DirectWriteGroup(dispatcher: dispatcher, eventLoop: loop)
            table[key] = NIOLoopBound(group, eventLoop: loop)
            return group
        }
    }
}

// The direct writes of every connection of one event loop, committed together.

import HalcyonRPC
import HalcyonCache
import HalcyonSupport
import NIOCore

/// The direct writes (`cache.set`, `cache.add`, `cache.cas`, `cache.incr`: the methods
/// whose `MethodSpec` has a `directWrite`) the connections of one event loop gathered
/// during one turn of the loop, committed as one group when the turn's reads are done (a
/// task queued on the loop runs after every channel's reads of the turn): Redis's rule,
/// the writes of one turn of the event loop share one `write(2)`. A connection gathering
/// its own sets made groups of one read burst, a single set under a 9:1 read/write mix.
///
/// The group is committed earlier when a connection must handle something else after its
/// sets (a read of one of their keys, queued work, a cancel: see `ConnectionHandler`), or
/// when it reaches `maxCount` sets or `maxBytes` of values.
///
/// A commit touches no connection's state. Once the storage commit has returned, each
/// member connection is handed its own outcomes, by value and in its own order, as a
/// `Committed` event through its channel's pipeline: the connection applies them there
/// (its replies join its outbound buffer, and go out unless it is inside a read burst).
/// The leases of the keys written ended in the storage commit itself.
///
/// Threading: confined to its event loop. Connections reach it through `LoopShares`,
/// which hands each loop's group out in a `NIOLoopBound`.
final class DirectWriteGroup {
    /// One committed write, as its connection applies it.
    struct Outcome {
        let outcome: Dispatcher.DirectOutcome
        let observed: Observer.Request?
    }

    /// The outcomes of one connection's writes in one commit, in the order it added them:
    /// fired through that connection's pipeline as a user inbound event. The receiver
    /// reads them during the event and keeps no reference to the array.
    struct Committed {
        let outcomes: [Outcome]
    }

    private struct Entry {
        /// Index in `members`.
        let member: Int
        let write: Dispatcher.DirectWrite
        let observed: Observer.Request?
    }

    /// The most sets, and value bytes, gathered before they are committed, even within a
    /// turn. The bytes bound keeps one group far below the journal's bounds, which the
    /// direct path checks (at 90 %) only before a group, not within it. The count bound
    /// is a whole turn of 32 connections sending 16 requests each, so such a turn commits
    /// once, not twice; it also bounds the keys a read after writes in the same burst
    /// looks through (`Member.keys`). The runs behind it: Benchmarks/RESULTS.md, "Direct
    /// write groups".
    static let maxCount = 512
    static let maxBytes = 1 << 20

    private let dispatcher: Dispatcher
    private let eventLoop: any EventLoop
    private var entries: [Entry] = []
    /// The channels with writes in `entries`, in order of their first write.
    private var members: [any Channel] = []
    /// Reused for each member's outcomes during a commit (no allocation once grown).
    private var scratch: [Outcome] = []
    private var bytes = 0
    private var commitQueued = false

    init(dispatcher: Dispatcher, eventLoop: any EventLoop) {
        self.dispatcher = dispatcher
        self.eventLoop = eventLoop
    }

    /// Gathers a write from the connection of `channel`; committed at the end of this turn
    /// at the latest, its outcome delivered through `channel`'s pipeline.
    func add(_ write: Dispatcher.DirectWrite, observed: Observer.Request?, from channel: any Channel) {
        // The last member is most often the adding one (a burst of one connection).
        let member = members.lastIndex { $0 === channel } ?? {
            members.append(channel)
            return members.count - 1
        }()
        entries.append(Entry(member: member, write: write, observed: observed))
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

    /// Commits every write gathered so far, of every connection, and hands each connection
    /// its outcomes (see the type's comment). Each member, the caller's own connection
    /// included, has applied its outcomes when this returns.
    func commit() {
        guard !entries.isEmpty else { return }
        let taken = entries
        let takenMembers = members
        entries.removeAll(keepingCapacity: true)
        members.removeAll(keepingCapacity: true)
        bytes = 0
        let outcomes = dispatcher.commitDirectWrites(taken.map(\.write))
        for (index, channel) in takenMembers.enumerated() {
            scratch.removeAll(keepingCapacity: true)
            // By index: pairing the two arrays would copy (and retain) every other
            // member's entries and outcomes too.
            for i in taken.indices where taken[i].member == index {
                scratch.append(Outcome(outcome: outcomes[i], observed: taken[i].observed))
            }
            // A channel closed meanwhile has no handler left to take them: dropped at the
            // tail of its pipeline (its client is gone; the writes stay done).
            channel.pipeline.syncOperations.fireUserInboundEventTriggered(Committed(outcomes: scratch))
        }
    }
}

extension DirectWriteGroup {
    /// One connection's side of its loop's group: how many of its writes wait there, and
    /// the one check that decides whether a request must wait for them.
    ///
    /// Threading: a value owned by one `ConnectionHandler`, used only on its event loop.
    struct Member {
        let group: DirectWriteGroup
        /// This connection's writes in the group, not yet applied.
        private(set) var pending = 0
        /// Their keys: a memory read of another key need not wait for them. An array: it
        /// is appended to on every write and searched only by a read that follows writes
        /// in the same burst, over at most `maxCount` keys; a set hashed every key.
        private var keys: [CacheKey] = []

        init(group: DirectWriteGroup) {
            self.group = group
        }

        /// Whether `element` must be handled after the waiting writes are committed: all
        /// but a write that may join them (with an id, alone on its line, under `untouch`)
        /// and a read memory may answer of a key none of them writes (the caller commits
        /// before queuing such a read if memory does not answer after all).
        func mustFollow(_ element: RPCElement, inBatch: Bool, session: ConnectionSession, dispatcher: Dispatcher)
            -> Bool
        {
            guard pending > 0 else { return false }
            guard !inBatch, case .untouch = session.callbackQueue, case .request(let request) = element,
                  request.id != nil else { return true }
            if dispatcher.hasDirectWrite(request) { return false }
            guard let key = dispatcher.memoryAnswerKey(request, session: session) else { return true }
            return key.map { mustFollowRead(of: $0) } ?? false
        }

        /// Whether a read of `key` that memory may answer must be handled after the
        /// waiting writes are committed: when one of them writes `key`.
        func mustFollowRead(of key: CacheKey) -> Bool {
            pending > 0 && keys.contains(key)
        }

        /// Counts a write of this connection that is about to be added to `group`. (The
        /// caller adds it, holding no access to this value: the add may commit, and the
        /// commit hands outcomes back to `applied`.)
        mutating func joining(_ write: Dispatcher.DirectWrite) {
            pending += 1
            keys.append(write.key)
        }

        /// The group to commit so that what comes next is handled after this connection's
        /// writes; nil when none wait.
        var groupToCommit: DirectWriteGroup? { pending > 0 ? group : nil }

        /// `count` outcomes of this connection's writes were applied.
        mutating func applied(_ count: Int) {
            pending -= count
            if pending == 0 { keys.removeAll(keepingCapacity: true) }
        }
    }
}

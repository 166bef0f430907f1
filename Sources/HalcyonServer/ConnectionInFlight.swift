// The requests one connection has started and not yet answered.

import HalcyonCache
import HalcyonRPC

/// The requests of one connection that have started and whose reply has not been written:
/// what back-pressure counts (`--max-in-flight`), what a `$/cancelRequest` reaches, and
/// what a `.close` answers `shuttingDown`.
///
/// Each request gets a sequence number when it starts, in arrival order; its reply finds
/// its entry by that number. Cancellation marks the entry and hands back its storage task
/// to cancel: a success reply that reaches a marked entry is answered `-32800` instead
/// (`ConnectionHandler` decides that on its loop, so no success is written after a cancel
/// was read).
///
/// Threading: a value owned by one `ConnectionHandler`, used only on its event loop.
struct ConnectionInFlight {
    /// A request whose reply has not been written yet.
    struct Entry {
        var id: RPCID?
        var task: CacheTask?
        var cancelled = false
        /// Where the reply goes when the request came in a batch.
        var batch: ConnectionOutbound.Batch?
        var batchSlot = 0
    }

    private var table: [UInt64: Entry] = [:]
    /// The number the next request to start gets.
    private(set) var nextSeq: UInt64 = 0

    /// Requests started and not answered.
    var count: Int { table.count }
    var isEmpty: Bool { table.isEmpty }

    /// Enters a request that starts now; returns the number its reply comes back with.
    mutating func begin(id: RPCID?, batch: ConnectionOutbound.Batch?, slot: Int) -> UInt64 {
        let seq = nextSeq
        nextSeq &+= 1
        table[seq] = Entry(id: id, batch: batch, batchSlot: slot)
        return seq
    }

    /// Records the storage task of request `seq`, unless it was already answered (a memory
    /// hit can answer before its dispatch returns).
    mutating func attach(_ task: CacheTask, to seq: UInt64) {
        if table[seq] != nil { table[seq]?.task = task }
    }

    /// Removes and returns the entry of `seq`; nil when it is gone (answered, cancelled by a
    /// close, or the connection ended).
    mutating func finish(_ seq: UInt64) -> Entry? {
        table.removeValue(forKey: seq)
    }

    /// Marks every unmarked request with `id` cancelled; returns their tasks, for the
    /// caller to cancel once this returns (a cancelled task may answer at once, which
    /// reaches `finish`).
    mutating func cancel(id: RPCID) -> [CacheTask] {
        // A scan (at most --max-in-flight entries): cancels are rare, and an index by id
        // would cost an insert and a removal on every request.
        var tasks: [CacheTask] = []
        for (seq, entry) in table where entry.id == id && !entry.cancelled {
            table[seq]?.cancelled = true
            if let task = entry.task { tasks.append(task) }
        }
        return tasks
    }

    /// Empties the table; returns the entries in the order their requests started, so the
    /// slots of a batch fill as they came.
    mutating func removeAll() -> [Entry] {
        let entries = table.sorted { $0.key < $1.key }.map(\.value)
        table.removeAll()
        return entries
    }
}

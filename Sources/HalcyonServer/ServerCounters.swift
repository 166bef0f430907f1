// Live counters the transport keeps for cache.stats and for its own limits.

import HalcyonRPC
import HalcyonSupport
import NIOCore
import Synchronization

/// The counters of one event loop, which only connections on that loop move: the
/// per-request path touches no process-wide lock and no cache line that another loop
/// writes. Readers (`ServerCounters.snapshot`) sum the loops.
///
/// Threading: thread-safe; `Atomic` fields, written with relaxed ordering by the loop's
/// own thread and read (relaxed) by any thread: a read is a recent count, not a barrier.
final class LoopCounters: Sendable {
    /// Requests started and not yet answered on this loop's connections.
    let inFlight = Atomic<Int>(0)
    /// The request latencies of this loop's connections (`Observer` records them,
    /// `Metrics.render` sums the loops).
    let latencies: RequestLatencies.Histograms

    /// Counters no scrape reads (a connection handler's placeholder until it is added to
    /// a channel) share one set of histograms, so a placeholder allocates no series.
    static let unread = RequestLatencies.Histograms()

    /// - Parameter latencies: the loop's own histograms; default: the shared unread ones.
    init(latencies: RequestLatencies.Histograms = LoopCounters.unread) {
        self.latencies = latencies
    }

    func requestStarted() { inFlight.wrappingAdd(1, ordering: .relaxed) }
    func requestsFinished(_ n: Int = 1) { inFlight.wrappingSubtract(n, ordering: .relaxed) }
}

/// Open connections, requests in flight across all connections, and refused peers.
///
/// Threading: thread-safe; every field lives in one `Locked` (`state`), taken
/// for a few instructions per change (once per connection, never per request), never
/// while calling out. Requests in flight are counted per event loop (`LoopCounters`).
final class ServerCounters: Sendable {
    private struct State {
        var connections = 0
        /// One per event loop that has had a connection, by the loop's identity.
        var loops: [ObjectIdentifier: LoopCounters] = [:]
        var refusedPeers = 0
        var storageErrors = 0
        var lastStorageError = ""
        var outputBufferOverflows = 0
        var linesParsedOffLoop = 0
        var lineTooLongRefusals = 0
        var inputBufferFullRefusals = 0
    }

    private let state = Locked(State())

    /// Claims a connection slot; false when `limit` connections are already open.
    func openConnection(limit: Int) -> Bool {
        state.withLock { s in
            guard s.connections < limit else { return false }
            s.connections += 1
            return true
        }
    }

    func closeConnection() { state.withLock { $0.connections -= 1 } }

    /// The counters of `loop`, made on first use; a connection asks once, when added.
    func loopCounters(for loop: any EventLoop) -> LoopCounters {
        state.withLock { s in
            let key = ObjectIdentifier(loop)
            if let counters = s.loops[key] { return counters }
            let counters = LoopCounters(latencies: RequestLatencies.Histograms())
            s.loops[key] = counters
            return counters
        }
    }

    func peerRefused() { state.withLock { $0.refusedPeers += 1 } }
    /// A client was disconnected because its unsent replies passed `--max-output-buffer`.
    func outputBufferOverflowed() { state.withLock { $0.outputBufferOverflows += 1 } }
    /// A request line was handed to the parse queue (once per long line, never per request).
    func lineParsedOffLoop() { state.withLock { $0.linesParsedOffLoop += 1 } }
    /// A request line was refused unread, too long for `--max-line-bytes`.
    func lineTooLongRefused() { state.withLock { $0.lineTooLongRefusals += 1 } }
    /// A request line was refused unread, `--max-input-buffer` being full.
    func inputBufferFullRefused() { state.withLock { $0.inputBufferFullRefusals += 1 } }

    /// A request failed in the storage engine (not ready, cannot write, cannot read).
    func storageErrorReplied(_ description: String) {
        state.withLock {
            $0.storageErrors += 1
            $0.lastStorageError = description
        }
    }

    /// Storage errors so far and the latest one's description.
    var storageErrors: (count: Int, last: String) {
        state.withLock { ($0.storageErrors, $0.lastStorageError) }
    }

    /// Every loop's counters made so far (a connection's loop keeps its counters for the
    /// daemon's life, so sums over them never go back).
    var loops: [LoopCounters] { state.withLock { Array($0.loops.values) } }

    var snapshot: LiveCounters {
        state.withLock { s in
            var live = LiveCounters()
            live.connections = s.connections
            live.inFlight = s.loops.values.reduce(0) { $0 + $1.inFlight.load(ordering: .relaxed) }
            live.refusedPeers = s.refusedPeers
            live.outputBufferOverflows = s.outputBufferOverflows
            live.linesParsedOffLoop = s.linesParsedOffLoop
            live.lineTooLongRefusals = s.lineTooLongRefusals
            live.inputBufferFullRefusals = s.inputBufferFullRefusals
            return live
        }
    }
}

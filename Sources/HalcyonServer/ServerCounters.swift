// Live counters the transport keeps for cache.stats and for its own limits.

import HalcyonCache

/// Open connections, requests in flight across all connections, and refused peers.
///
/// Threading: thread-safe; every field lives in one `Locked` (`state`), taken
/// for a few instructions per change, never while calling out.
final class ServerCounters: Sendable {
    private struct State {
        var connections = 0
        var inFlight = 0
        var refusedPeers = 0
        var storageErrors = 0
        var lastStorageError = ""
        var outputBufferOverflows = 0
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
    func requestStarted(_ n: Int = 1) { state.withLock { $0.inFlight += n } }
    func requestsFinished(_ n: Int = 1) { state.withLock { $0.inFlight -= n } }
    func peerRefused() { state.withLock { $0.refusedPeers += 1 } }
    /// A client was disconnected because its unsent replies passed `--max-output-buffer`.
    func outputBufferOverflowed() { state.withLock { $0.outputBufferOverflows += 1 } }
    /// Clients disconnected so far for not reading their replies.
    var outputBufferOverflows: Int { state.withLock { $0.outputBufferOverflows } }

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

    var snapshot: (connections: Int, inFlight: Int, refusedPeers: Int) {
        state.withLock { ($0.connections, $0.inFlight, $0.refusedPeers) }
    }
}

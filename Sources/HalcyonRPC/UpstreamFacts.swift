// What `server.info` and `cache.stats` show of the upstream (the store shared with other
// hosts), as the transport last sampled it. The protocol layer knows nothing of Redis:
// these are names, counts and durations.

import HalcyonJSON

/// A sample of the upstream's state and counters.
public struct UpstreamFacts: Sendable, Equatable {
    /// `"connected"` (every known node has a connection), `"degraded"` (some do),
    /// `"unavailable"` (none), `"starting"` (the topology is not known yet).
    public var state = "starting"
    /// Whether the deployment is a Redis Cluster.
    public var cluster = false
    /// The primaries known, as `host:port` or a socket path, and those connected now.
    public var nodes: [String] = []
    public var connectedNodes: [String] = []
    /// The shared prefixes; empty = every key.
    public var prefixes: [String] = []
    /// Connections re-made after a loss, and losses.
    public var reconnects = 0
    public var connectionsLost = 0
    /// `MOVED` and `ASK` redirects followed, transient cluster errors retried.
    public var moved = 0
    public var asks = 0
    public var retries = 0
    /// Commands answered and failed.
    public var commands = 0
    public var failedCommands = 0
    /// Writes of commands to connections (round trips, for commands sent together), and
    /// the commands sent in batches (`RedisClient.Stats`).
    public var writes = 0
    public var batchedCommands = 0
    /// Round trip of the answered commands, mean and largest, in microseconds.
    public var roundTripMeanMicros = 0
    public var roundTripMaxMicros = 0

    public init() {}

    /// `server.info`'s `upstream` member.
    func writeInfo(to w: inout JSONWriter) {
        w.beginObject()
        w.field("state", state)
        w.field("cluster", cluster)
        writeNames("nodes", nodes, to: &w)
        writeNames("connectedNodes", connectedNodes, to: &w)
        writeNames("prefixes", prefixes, to: &w)
        w.endObject()
    }

    /// The transport's half of `cache.stats`'s `upstream` member (fields only; the caller
    /// opens and closes the object).
    func writeCounters(to w: inout JSONWriter) {
        w.field("state", state)
        w.field("reconnects", reconnects)
        w.field("connectionsLost", connectionsLost)
        w.field("redirects", moved + asks)
        w.field("moved", moved)
        w.field("asks", asks)
        w.field("retries", retries)
        w.field("commands", commands)
        w.field("failedCommands", failedCommands)
        w.field("writes", writes)
        w.field("batchedCommands", batchedCommands)
        w.field("roundTripMeanMicros", roundTripMeanMicros)
        w.field("roundTripMaxMicros", roundTripMaxMicros)
    }

    private func writeNames(_ name: StaticString, _ names: [String], to w: inout JSONWriter) {
        w.key(name); w.beginArray()
        for item in names { w.string(item) }
        w.endArray()
    }
}

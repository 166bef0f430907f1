// What `server.info` and `cache.stats` show of the upstream (the store shared with other
// hosts), as the transport last sampled it. The protocol layer knows nothing of Redis:
// these are names, counts and durations.

import HalcyonJSON

/// A sample of the upstream's state and counters.
public struct UpstreamFacts: Sendable, Equatable {
    /// `"connected"` (every primary is reachable), `"degraded"` (a cluster with some
    /// primaries down: their slots fail, the others work), `"unavailable"` (none is
    /// reachable), `"starting"` (the topology is not known yet).
    public var state = "starting"
    /// One primary (the one server of a standalone deployment) and whether it can be
    /// reached now.
    public struct Primary: Sendable, Equatable {
        public var node: String
        /// The slot ranges it serves (inclusive); empty for a standalone server.
        public var slots: [ClosedRange<Int>]
        public var reachable: Bool
        /// Why it cannot be reached (`refused`, `timed out`, `heartbeat missed`, `closed`,
        /// `WRONGPASS`, `NOAUTH`, …), and for how long; nil and 0 when reachable.
        public var cause: String?
        public var downForMillis: Int

        public init(node: String, slots: [ClosedRange<Int>], reachable: Bool, cause: String?, downForMillis: Int) {
            self.node = node
            self.slots = slots
            self.reachable = reachable
            self.cause = cause
            self.downForMillis = downForMillis
        }
    }
    public var primaries: [Primary] = []
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
    /// Commands failed at once because their node was down (part of `failedCommands`).
    public var failedFast = 0
    /// `NOSCRIPT` replies after a restart or `SCRIPT FLUSH` (the script is sent again
    /// whole): not failures.
    public var scriptReloads = 0
    /// Connection attempts and those that failed.
    public var connectAttempts = 0
    public var failedConnects = 0
    /// Connections closed because the server went silent (a missed heartbeat).
    public var heartbeatsMissed = 0
    /// Node outages begun and ended (each logged once).
    public var outages = 0
    public var recoveries = 0
    /// Slot-map loads.
    public var topologyRefreshes = 0

    public init() {}

    /// `server.info`'s `upstream` member.
    func writeInfo(to w: inout JSONWriter) {
        w.beginObject()
        w.field("state", state)
        w.field("cluster", cluster)
        writeNames("nodes", nodes, to: &w)
        writeNames("connectedNodes", connectedNodes, to: &w)
        writeNames("prefixes", prefixes, to: &w)
        w.key("primaries"); w.beginArray()
        for primary in primaries {
            w.beginObject()
            w.field("node", primary.node)
            w.key("slots"); w.beginArray()
            for range in primary.slots {
                w.beginArray(); w.int(Int64(range.lowerBound)); w.int(Int64(range.upperBound)); w.endArray()
            }
            w.endArray()
            w.field("reachable", primary.reachable)
            if let cause = primary.cause {
                w.field("cause", cause)
                w.field("downForMillis", primary.downForMillis)
            }
            w.endObject()
        }
        w.endArray()
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
        w.field("failedFast", failedFast)
        w.field("scriptReloads", scriptReloads)
        w.field("connectAttempts", connectAttempts)
        w.field("failedConnects", failedConnects)
        w.field("heartbeatsMissed", heartbeatsMissed)
        w.field("outages", outages)
        w.field("recoveries", recoveries)
        w.field("topologyRefreshes", topologyRefreshes)
    }

    private func writeNames(_ name: StaticString, _ names: [String], to w: inout JSONWriter) {
        w.key(name); w.beginArray()
        for item in names { w.string(item) }
        w.endArray()
    }
}

// One reading of the daemon for `halcyon top`: the counters and levels of `cache.stats`,
// the limits and upstream nodes of `server.info`, and the per-method request histograms
// of `server.metrics`, taken together over one connection.

#if canImport(Glibc)
import Glibc
#endif
import HalcyonJSON

/// What the daemon reported at one moment. Rates come from two of these
/// (`TopView(from:to:)`); a sample alone only holds cumulative counts and levels.
///
/// Threading: a value.
struct TopSample {
    /// The methods `take` calls, once each per sample: `TopView` leaves these calls out
    /// of the request rates, so an idle daemon reads idle.
    static let ownMethods = ["server.metrics", "cache.stats", "server.info"]

    /// One method's latency histogram: cumulative counts per bound, ascending, `+Inf` last.
    struct Histogram: Equatable {
        /// The bucket bounds in seconds, `.infinity` last.
        var bounds: [Double]
        var cumulative: [Double]
        var count: Double { cumulative.last ?? 0 }
    }

    /// One tier's counters and levels.
    struct Tier: Equatable {
        var hits = 0.0, misses = 0.0, evictions = 0.0, expirations = 0.0
        var bytes = 0.0, entries = 0.0
    }

    /// An upstream node and what the daemon says of it.
    struct Node: Equatable {
        var name: String
        var state: String
        /// Further facts the daemon gives per node (`name=value`), in its order.
        var details: [String]
    }

    /// When the sample was complete, in seconds of the monotonic clock.
    var time: Double
    /// The daemon's pid and start time: a change means the counters started again.
    var pid: Int64
    var startedAt: Double
    var cacheName: String
    var version: String
    var socket: String
    var uptime: Double

    var histograms: [String: Histogram] = [:]
    /// Lines of the metrics text that could not be read (shown, so none goes unnoticed).
    var unreadMetricLines = 0
    var memory = Tier()
    var disk = Tier()
    var memoryLimit = 0.0
    var diskLimit = 0.0
    var sets = 0.0
    var connections = 0.0
    var inFlight = 0.0
    var writesQueued = 0.0
    var journalBytes = 0.0
    var unwrittenBytes = 0.0
    var unwrittenEntries = 0.0
    var journalStalls = 0.0
    var backlogRefusals = 0.0
    /// Nil without `--upstream`.
    var upstreamState: String?
    var upstreamCluster = false
    var upstreamRoundTripMicros = 0.0
    var upstreamHits = 0.0
    var upstreamMisses = 0.0
    var nodes: [Node] = []

    /// Reads the daemon over `connection`.
    /// - Throws: whatever `Connection.call` throws; `CLIError.badReply` when a reply
    ///   lacks what the view needs.
    static func take(_ connection: Connection) throws(CLIError) -> TopSample {
        let metrics = try connection.call("server.metrics")
        let stats = try connection.call("cache.stats")
        let info = try connection.call("server.info")
        guard let text = metrics["text"]?.string else {
            throw .badReply("server.metrics has no text: \(metrics.compactText)")
        }
        guard stats["memory"] != nil, stats["disk"] != nil, let pid = info["pid"]?.int64 else {
            throw .badReply("cache.stats or server.info lacks what top shows")
        }
        var sample = TopSample(
            time: monotonicSeconds(), pid: pid, startedAt: info["startedAt"]?.double ?? 0,
            cacheName: info["cacheName"]?.string ?? "", version: info["version"]?.string ?? "",
            socket: info["socket"]?.string ?? connection.path, uptime: stats["uptime"]?.double ?? 0)
        let exposition = PrometheusText(text)
        sample.histograms = histograms(exposition)
        sample.unreadMetricLines = exposition.unreadLines
        sample.memory = tier(stats["memory"])
        sample.disk = tier(stats["disk"])
        sample.memoryLimit = info["limits"]?["memoryLimit"]?.double ?? 0
        sample.diskLimit = info["limits"]?["diskSizeLimit"]?.double ?? 0
        sample.sets = stats["sets"]?.double ?? 0
        sample.connections = stats["connections"]?.double ?? 0
        // The daemon counts the cache.stats call that reads it as in flight: not ours to show.
        sample.inFlight = max(0, (stats["inFlight"]?.double ?? 0) - 1)
        sample.writesQueued = stats["writesQueued"]?.double ?? 0
        let journal = stats["journal"]
        sample.journalBytes = journal?["bytes"]?.double ?? 0
        sample.unwrittenBytes = journal?["unwrittenBytes"]?.double ?? 0
        sample.unwrittenEntries = journal?["unwrittenEntries"]?.double ?? 0
        sample.journalStalls = journal?["stalls"]?.double ?? 0
        sample.backlogRefusals = journal?["backlogRefusals"]?.double ?? 0
        if let upstream = info["upstream"] {
            sample.upstreamState = upstream["state"]?.string ?? "unknown"
            sample.upstreamCluster = upstream["cluster"]?.bool ?? false
            sample.nodes = nodes(upstream)
        }
        if let shared = stats["upstream"] {
            sample.upstreamRoundTripMicros = shared["roundTripMeanMicros"]?.double ?? 0
            sample.upstreamHits = shared["hits"]?.double ?? 0
            sample.upstreamMisses = shared["misses"]?.double ?? 0
        }
        return sample
    }

    /// The `halcyon_request_duration_seconds` histograms by method.
    static func histograms(_ text: PrometheusText) -> [String: Histogram] {
        var buckets: [String: [(Double, Double)]] = [:]
        for sample in text.samples(named: "halcyon_request_duration_seconds_bucket") {
            guard let method = sample.labels["method"], let le = sample.labels["le"] else { continue }
            let bound = le == "+Inf" ? Double.infinity : Double(le)
            guard let bound else { continue }
            buckets[method, default: []].append((bound, sample.value))
        }
        return buckets.mapValues { pairs in
            let sorted = pairs.sorted { $0.0 < $1.0 }
            return Histogram(bounds: sorted.map(\.0), cumulative: sorted.map(\.1))
        }
    }

    private static func tier(_ value: JSONValue?) -> Tier {
        Tier(
            hits: value?["hits"]?.double ?? 0, misses: value?["misses"]?.double ?? 0,
            evictions: value?["evictions"]?.double ?? 0, expirations: value?["expirations"]?.double ?? 0,
            bytes: value?["bytes"]?.double ?? 0, entries: value?["entries"]?.double ?? 0)
    }

    /// The upstream's nodes. `server.info` lists them as names (`nodes`, and the
    /// connected ones in `connectedNodes`); a node given as an object instead is read
    /// for its name (`address`, `node`, `name` or `host`), its `state`, and its other
    /// scalar members as details, so a richer per-node report shows as it comes.
    static func nodes(_ upstream: JSONValue) -> [Node] {
        let connected = Set((upstream["connectedNodes"]?.array ?? []).compactMap(\.string))
        var nodes: [Node] = []
        for element in upstream["nodes"]?.array ?? [] {
            if let name = element.string {
                nodes.append(Node(name: name, state: connected.contains(name) ? "connected" : "unreachable", details: []))
            } else if element.kind == .object {
                let nameKeys = ["address", "node", "name", "host"]
                let name = nameKeys.lazy.compactMap { element[$0]?.string }.first ?? element.compactText
                var details: [String] = []
                for (key, value) in element.members where !nameKeys.contains(key) && key != "state" {
                    guard value.kind != .object, value.kind != .array else { continue }
                    details.append("\(key)=\(value.string ?? value.compactText)")
                }
                let state = element["state"]?.string ?? (connected.contains(name) ? "connected" : "unknown")
                nodes.append(Node(name: name, state: state, details: details))
            }
        }
        return nodes
    }

    /// The monotonic clock in seconds.
    static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

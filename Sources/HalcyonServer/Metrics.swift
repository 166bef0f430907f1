// The daemon's metrics: swift-metrics handles backed by a private swift-prometheus
// registry, and the request latencies the event loops keep (MetricsRequestLatencies.swift),
// rendered as Prometheus text for `server.metrics` and `--metrics-listen`.

import CoreMetrics
import HalcyonCache
import HalcyonRPC
import HalcyonSupport
import HalcyonVersion
import Prometheus

/// Every series `halcyond` exports, in one registry of its own (never swift-metrics'
/// global `MetricsSystem`, which a process may bootstrap once: tests run several daemons
/// in one process, and a library that embeds the daemon keeps its own system free).
///
/// Two kinds of series:
/// - request latencies (`halcyon_request_duration_seconds{method}`), recorded as each
///   reply is written into histograms of the connection's event loop
///   (`RequestLatencies`, through `Observer`), summed over the loops and written as text
///   here: the per-request path takes no lock and shares no counter with other loops;
/// - the cache's and the transport's counters and levels, which their owners already
///   keep (`HybridCache.stats()`, `ServerCounters`): they are copied into swift-metrics
///   counters and gauges when the text is rendered, so the hot path pays nothing extra
///   for them. A counter moves by the difference since the previous render.
///
/// Threading: thread-safe. `render` serialises renders through `lastSeen`'s lock, so two
/// scrapes never add the same difference twice.
public final class Metrics: Sendable {
    /// Latency buckets, in the range a local cache answers in: a memory hit takes tens of
    /// microseconds, a 64 MiB disk write up to about a second.
    static let latencyBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
        .milliseconds(2500), .seconds(10),
    ]

    private let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let cache: HybridCache
    private let counters: ServerCounters
    /// The cumulative values at the previous render, by series; guarded by its own lock,
    /// which `render` holds throughout.
    private let lastSeen = Locked([String: Int64]())
    /// The upstream's last sample (`UpstreamLink`); nil without an upstream.
    private let upstream: @Sendable () -> UpstreamFacts?
    /// The namespaces the rules file in force names (each gets series of its own); empty
    /// without `--access`.
    private let namedNamespaces: @Sendable () -> Set<Namespace>

    /// The tiers' size limits, exported as `halcyon_cache_limit_bytes{tier}` so a
    /// dashboard can draw what a tier holds against what it may hold (0: no limit).
    struct Limits: Sendable {
        var memoryBytes: Int64 = 0
        var diskBytes: Int64 = 0
    }

    init(
        cache: HybridCache, counters: ServerCounters, limits: Limits = Limits(),
        upstream: @escaping @Sendable () -> UpstreamFacts? = { nil },
        namedNamespaces: @escaping @Sendable () -> Set<Namespace> = { [] }
    ) {
        self.upstream = upstream
        self.namedNamespaces = namedNamespaces
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        self.cache = cache
        self.counters = counters
        factory = PrometheusMetricsFactory(registry: registry)
        Gauge(label: "halcyon_build_info", dimensions: [("version", HalcyonVersion.current)], factory: factory)
            .record(1)
        Gauge(label: "halcyon_cache_limit_bytes", dimensions: [("tier", "memory")], factory: factory)
            .record(Double(limits.memoryBytes))
        Gauge(label: "halcyon_cache_limit_bytes", dimensions: [("tier", "disk")], factory: factory)
            .record(Double(limits.diskBytes))
    }

    /// The Prometheus text format (0.0.4) of every series, refreshed from the cache's and
    /// the transport's counters first; the request latencies are every loop's, summed.
    public func render() -> String {
        let registered = lastSeen.withLock { last in
            refresh(&last)
            return registry.emitToString()
        }
        let latencies = RequestLatencies.Totals.sum(counters.loops.map(\.latencies))
        return registered + RequestLatencies.exposition(latencies)
    }

    /// Copies the owners' counters into the registry; `last` holds what was copied before.
    private func refresh(_ last: inout [String: Int64]) {
        let stats = cache.stats()
        let live = counters.snapshot
        let tiers: [(String, hits: Int, misses: Int, evictions: Int, expirations: Int, bytes: Int64, entries: Int)] = [
            ("memory", stats.memoryHits, stats.memoryMisses, stats.memoryEvictions, stats.memoryExpirations,
             Int64(stats.memoryBytes), stats.memoryEntries),
            ("disk", stats.diskHits, stats.diskMisses, stats.diskEvictions, stats.diskExpirations,
             Int64(clamping: stats.diskBytes), stats.diskEntries),
        ]
        for tier in tiers {
            let dimensions = [("tier", tier.0)]
            tierSeries("halcyon_cache", dimensions, hits: tier.hits, misses: tier.misses, evictions: tier.evictions,
                       bytes: Double(tier.bytes), entries: tier.entries, &last)
            count("halcyon_cache_expirations_total", dimensions, tier.expirations, &last)
        }
        count("halcyon_cache_sets_total", [], stats.sets, &last)
        count("halcyon_cache_removals_total", [], stats.removals, &last)
        count("halcyon_cache_maintenance_errors_total", [], stats.maintenanceErrors, &last)
        count("halcyon_journal_dropped_entries_total", [], stats.journal?.droppedEntries ?? 0, &last)
        count("halcyon_refused_peers_total", [], live.refusedPeers, &last)
        count("halcyon_output_buffer_overflows_total", [], live.outputBufferOverflows, &last)
        count("halcyon_lines_parsed_off_loop_total", [], live.linesParsedOffLoop, &last)
        count("halcyon_refused_lines_total", [("reason", "lineTooLong")], live.lineTooLongRefusals, &last)
        count("halcyon_refused_lines_total", [("reason", "inputBufferFull")], live.inputBufferFullRefusals, &last)
        // Every read asks memory first; a memory miss that disk answers is still a hit.
        let lookups = stats.memoryHits + stats.memoryMisses
        let ratio = lookups == 0 ? 0 : Double(stats.memoryHits + stats.diskHits) / Double(lookups)
        level("halcyon_cache_hit_ratio", [], ratio)
        level("halcyon_write_backlog", [], Double(stats.writesQueued))
        level("halcyon_connections", [], Double(live.connections))
        level("halcyon_requests_in_flight", [], Double(live.inFlight))
        level("halcyon_journal_unwritten_bytes", [], Double(stats.journal?.unwrittenBytes ?? 0))
        level("halcyon_journal_unwritten_entries", [], Double(stats.journal?.unwrittenEntries ?? 0))
        if let shared = stats.upstream, let facts = upstream() { refreshUpstream(shared, facts, &last) }
        refreshNamespaces(&last)
    }

    /// The label of the namespaces the rules file does not name (those of `$user` lines,
    /// and any a reload dropped): their series are summed under it, so the number of
    /// series stays bounded by the file, however many users connect.
    static let unnamedNamespaceLabel = "$user"

    /// The accounted namespaces' memory tier counters, labelled `namespace`: one set of
    /// series per namespace the rules file names, and one for all others together.
    private func refreshNamespaces(_ last: inout [String: Int64]) {
        let accounts = cache.namespaceStats()
        guard !accounts.isEmpty else { return }
        let named = namedNamespaces()
        var series: [(label: String, stats: MemoryStorage.NamespaceStats)] = []
        var others: MemoryStorage.NamespaceStats?
        for account in accounts {
            if named.contains(account.namespace) {
                series.append((account.namespace.name, account))
            } else if var sum = others {
                sum.hits += account.hits; sum.misses += account.misses; sum.sets += account.sets
                sum.evictions += account.evictions; sum.totalCost += account.totalCost; sum.count += account.count
                sum.quota += account.quota
                sum.diskBytes += account.diskBytes; sum.diskEntries += account.diskEntries
                sum.diskEvictions += account.diskEvictions; sum.diskQuota += account.diskQuota
                others = sum
            } else {
                others = account
            }
        }
        if let others { series.append((Self.unnamedNamespaceLabel, others)) }
        for (label, stats) in series {
            let dimensions = [("namespace", label)]
            let memory = dimensions + [("tier", "memory")]
            tierSeries("halcyon_namespace", memory, hits: stats.hits, misses: stats.misses, evictions: stats.evictions,
                       bytes: Double(stats.totalCost), entries: stats.count, &last)
            count("halcyon_namespace_sets_total", dimensions, stats.sets, &last)
            level("halcyon_namespace_quota_bytes", memory, Double(stats.quota))
            let disk = dimensions + [("tier", "disk")]
            count("halcyon_namespace_evictions_total", disk, stats.diskEvictions, &last)
            level("halcyon_namespace_bytes", disk, Double(stats.diskBytes))
            level("halcyon_namespace_entries", disk, Double(stats.diskEntries))
            level("halcyon_namespace_quota_bytes", disk, Double(stats.diskQuota))
        }
    }

    /// The shared keys' counters and the upstream connection's.
    private func refreshUpstream(_ shared: UpstreamStats, _ facts: UpstreamFacts, _ last: inout [String: Int64]) {
        count("halcyon_upstream_hits_total", [], shared.hits, &last)
        count("halcyon_upstream_misses_total", [], shared.misses, &last)
        count("halcyon_upstream_invalidations_total", [], shared.invalidations, &last)
        count("halcyon_upstream_flushes_total", [], shared.flushes, &last)
        count("halcyon_upstream_slides_total", [], shared.slides, &last)
        count("halcyon_upstream_failures_total", [("reason", "unavailable")], shared.unavailable, &last)
        count("halcyon_upstream_failures_total", [("reason", "refused")], shared.refused, &last)
        count("halcyon_upstream_reconnects_total", [], facts.reconnects, &last)
        count("halcyon_upstream_redirects_total", [("kind", "moved")], facts.moved, &last)
        count("halcyon_upstream_redirects_total", [("kind", "ask")], facts.asks, &last)
        count("halcyon_upstream_commands_total", [], facts.commands, &last)
        level("halcyon_upstream_round_trip_mean_seconds", [], Double(facts.roundTripMeanMicros) / 1e6)
        level("halcyon_upstream_round_trip_max_seconds", [], Double(facts.roundTripMaxMicros) / 1e6)
        level("halcyon_upstream_up", [], facts.state == "connected" ? 1 : 0)
        for state in ["connected", "degraded", "unavailable", "starting"] {
            level("halcyon_upstream_state", [("state", state)], facts.state == state ? 1 : 0)
        }
        level("halcyon_upstream_primaries_unreachable", [], Double(facts.primaries.filter { !$0.reachable }.count))
        level("halcyon_upstream_authentication_failing", [],
              facts.primaries.contains { $0.cause == "WRONGPASS" || $0.cause == "NOAUTH" } ? 1 : 0)
        count("halcyon_upstream_outages_total", [], facts.outages, &last)
        count("halcyon_upstream_recoveries_total", [], facts.recoveries, &last)
        count("halcyon_upstream_heartbeats_missed_total", [], facts.heartbeatsMissed, &last)
        count("halcyon_upstream_connect_attempts_total", [("outcome", "failed")], facts.failedConnects, &last)
        count("halcyon_upstream_connect_attempts_total", [("outcome", "made")], facts.connectAttempts - facts.failedConnects, &last)
        count("halcyon_upstream_failed_commands_total", [], facts.failedCommands, &last)
        count("halcyon_upstream_failed_fast_total", [], facts.failedFast, &last)
        count("halcyon_upstream_script_reloads_total", [], facts.scriptReloads, &last)
        count("halcyon_upstream_topology_refreshes_total", [], facts.topologyRefreshes, &last)
    }

    /// The series every tier has, named `prefix` + `_hits_total` and so on: reads,
    /// evictions, and what it holds now.
    private func tierSeries(
        _ prefix: String, _ dimensions: [(String, String)], hits: Int, misses: Int, evictions: Int, bytes: Double,
        entries: Int, _ last: inout [String: Int64]
    ) {
        count(prefix + "_hits_total", dimensions, hits, &last)
        count(prefix + "_misses_total", dimensions, misses, &last)
        count(prefix + "_evictions_total", dimensions, evictions, &last)
        level(prefix + "_bytes", dimensions, bytes)
        level(prefix + "_entries", dimensions, Double(entries))
    }

    /// Moves a counter up to `value` (a cumulative count its owner keeps).
    private func count(_ label: String, _ dimensions: [(String, String)], _ value: Int, _ last: inout [String: Int64]) {
        let key = label + dimensions.map { "|\($0.1)" }.joined()
        let previous = last[key] ?? 0
        let now = Int64(value)
        // The handle is looked up in the registry each time: swift-prometheus returns the
        // same series for the same name and labels.
        let counter = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
        if now > previous { counter.increment(by: now - previous) }
        last[key] = max(previous, now)
    }

    /// Sets a gauge.
    private func level(_ label: String, _ dimensions: [(String, String)], _ value: Double) {
        Gauge(label: label, dimensions: dimensions, factory: factory).record(value)
    }
}

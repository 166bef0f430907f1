// The daemon's upstream: the Redis or Valkey tier built from `--upstream`,
// `--upstream-password-file` and `--upstream-prefix`, started in the background, and
// sampled for `server.info`, `cache.stats` and the metrics. The storage engine sees only
// the `Upstream.Tier` it is handed.

import Foundation
import HalcyonCache
import HalcyonRPC
import HalcyonSupport
import HalcyonUpstream
import HalcyonUpstreamTier
import Logging
import NIOCore

/// The upstream tier of one daemon and its last sample.
///
/// Threading: thread-safe. The tier is; `sample` and `sampler` are `Locked`; the sampling
/// and the start retries run on the tier's event loop.
final class UpstreamLink: Sendable {
    let tier: RedisTier
    let prefixes: [String]
    private let outageLog: OutageLog
    private let sample = Locked(UpstreamFacts())
    private let sampler = Locked<RepeatedTask?>(nil)
    /// How often the sample is refreshed.
    static let sampleInterval = TimeAmount.milliseconds(250)

    /// The link `configuration` asks for, or nil without `--upstream`.
    /// - Throws: `ConfigurationError` when the password file cannot be read.
    static func make(_ configuration: ServerConfiguration, eventLoop: EventLoop) throws(ConfigurationError) -> UpstreamLink? {
        guard let first = configuration.upstreamURLs.first else { return nil }
        var redis = RedisClient.Configuration(seeds: configuration.upstreamURLs.map(\.address))
        redis.connection.username = first.username
        redis.connection.database = first.database
        // Per process, so an operator (or a test) can tell hosts apart in CLIENT LIST.
        redis.connection.clientName = "halcyond-\(getpid())"
        if let path = configuration.upstreamPasswordFile {
            redis.connection.password = try readPassword(path)
        }
        let outageLog = OutageLog()
        let tier = RedisTier(configuration: redis, eventLoop: eventLoop) { outageLog.record($0) }
        return UpstreamLink(tier: tier, prefixes: configuration.upstreamPrefixes, outageLog: outageLog)
    }

    /// Reads the password file once before anything else starts, so a file that is
    /// refused stops the daemon before it creates or locks its cache folder.
    /// - Throws: `ConfigurationError` as `readPassword` does.
    static func checkPasswordFile(_ configuration: ServerConfiguration) throws(ConfigurationError) {
        guard !configuration.upstreamURLs.isEmpty, let path = configuration.upstreamPasswordFile else { return }
        _ = try readPassword(path)
    }

    /// The first line of `path`, without its line end. The text never reaches a log.
    /// A file group or others may read (or write) is refused, as ssh refuses such a
    /// private key: the password would already be out of the operator's hands.
    static func readPassword(_ path: String) throws(ConfigurationError) -> String {
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & 0o077 != 0 {
            throw .invalid(
                flag: "--upstream-password-file",
                reason: "'\(path)' may be read by group or others (mode 0\(String(info.st_mode & 0o7777, radix: 8))); "
                    + "run chmod 600 on it")
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw .invalid(flag: "--upstream-password-file", reason: "cannot read '\(path)'")
        }
        let line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        let password = line.hasSuffix("\r") ? String(line.dropLast()) : line
        guard !password.isEmpty else { throw .invalid(flag: "--upstream-password-file", reason: "'\(path)' holds no password") }
        return password
    }

    init(tier: RedisTier, prefixes: [String], outageLog: OutageLog = OutageLog()) {
        self.tier = tier
        self.prefixes = prefixes
        self.outageLog = outageLog
        sample.withLock { $0.prefixes = prefixes }
    }

    /// What the hybrid cache is given; `namespaced` under `--access` (`UpstreamConfig.namespaced`).
    func cacheConfig(namespaced: Bool) -> UpstreamConfig {
        var config = UpstreamConfig(tier: tier, prefixes: prefixes.map { CacheKey($0) })
        config.namespaced = namespaced
        return config
    }

    /// The last sample.
    var facts: UpstreamFacts { sample.withLock { $0 } }

    /// Connects in the background (retrying every second until the deployment answers:
    /// meanwhile shared writes fail with `upstreamUnavailable`) and starts sampling.
    func start(logger: Logger) {
        let loop = tier.client.eventLoop
        outageLog.logger.withLock { $0 = logger }
        connect(logger: logger, attempt: 0)
        let task = loop.scheduleRepeatedAsyncTask(initialDelay: .zero, delay: Self.sampleInterval) { [self] _ in
            refreshSample()
        }
        sampler.withLock { $0 = task }
    }

    private func connect(logger: Logger, attempt: Int) {
        tier.start().whenComplete { [self] result in
            switch result {
            case .success:
                logger.info("upstream connected", metadata: ["upstream": "\(tier.client.configuration.seeds)"])
            case .failure:
                // Each node's loss is logged once, with its cause, by `OutageLog`.
                tier.client.eventLoop.scheduleTask(in: .seconds(1)) { self.connect(logger: logger, attempt: attempt + 1) }
            }
        }
    }

    /// Stops sampling and closes the connections.
    func shutdown() {
        sampler.withLock { $0 }?.cancel()
        _ = try? tier.shutdown().wait()
    }

    private func refreshSample() -> EventLoopFuture<Void> {
        let client = tier.client
        return client.topology().and(client.stats()).and(client.connectedNodes()).and(client.health()).map { [self] triple, health in
            let ((topology, stats), connected) = triple
            let byNode = Dictionary(health.map { ($0.node, $0) }, uniquingKeysWith: { first, _ in first })
            func primary(_ node: NodeAddress, _ slots: [ClosedRange<Int>]) -> UpstreamFacts.Primary {
                let known = byNode[node]
                return UpstreamFacts.Primary(
                    node: node.description, slots: slots, reachable: known?.reachable ?? true, cause: known?.cause?.rawValue,
                    downForMillis: Int((known?.downFor.nanoseconds ?? 0) / 1_000_000))
            }
            sample.withLock { s in
                switch topology {
                case .unknown:
                    s.cluster = false
                    s.primaries = client.configuration.seeds.map { primary($0, []) }
                case .standalone(let node):
                    s.cluster = false
                    s.primaries = [primary(node, [])]
                case .cluster(let map):
                    s.cluster = true
                    s.primaries = map.shards.map { primary($0.primary, $0.slots) }
                }
                s.nodes = s.primaries.map(\.node)
                s.connectedNodes = connected.map(\.description).sorted()
                // The state is the primaries' (a replica, or a demoted primary, that is up
                // serves no slot): every one reachable, some, or none.
                let reachable = s.primaries.filter(\.reachable).count
                if case .unknown = topology {
                    s.state = reachable == 0 ? "unavailable" : "starting"
                } else {
                    s.state = reachable == s.primaries.count ? "connected" : reachable == 0 ? "unavailable" : "degraded"
                }
                s.reconnects = stats.reconnects
                s.connectionsLost = stats.connectionsLost
                s.moved = stats.moved
                s.asks = stats.asks
                s.retries = stats.retries
                s.commands = stats.commands
                s.failedCommands = stats.failedCommands
                s.writes = stats.writes
                s.batchedCommands = stats.batchedCommands
                s.roundTripMeanMicros = stats.commands == 0 ? 0 : Int(stats.roundTripNanoseconds / UInt64(stats.commands) / 1000)
                s.roundTripMaxMicros = Int(stats.maxRoundTripNanoseconds / 1000)
                s.failedFast = stats.failedFast
                s.scriptReloads = stats.scriptReloads
                s.connectAttempts = stats.connectAttempts
                s.failedConnects = stats.failedConnects
                s.heartbeatsMissed = stats.heartbeatsMissed
                s.outages = stats.outages
                s.recoveries = stats.recoveries
                s.topologyRefreshes = stats.topologyRefreshes
            }
        }
    }
}

/// Logs the upstream client's node outages: one `warning` when a node is lost (with its
/// cause), one `notice` when it is back (with the outage's length), and a `warning` in
/// between only when the cause changes or a minute passes (the client's own rate limit,
/// `RedisClient.NodeChange`).
///
/// Threading: thread-safe; `logger` is a `Locked`, set once the daemon starts.
final class OutageLog: Sendable {
    let logger = Locked<Logger?>(nil)

    func record(_ change: RedisClient.NodeChange) {
        guard let logger = logger.withLock({ $0 }) else { return }
        switch change {
        case .lost(let node, let cause, let detail):
            logger.warning("upstream node lost", metadata: ["node": "\(node)", "cause": "\(cause.rawValue)", "detail": "\(detail)"])
        case .stillDown(let node, let cause, let attempts, let downFor):
            logger.warning("upstream node still unreachable", metadata: [
                "node": "\(node)", "cause": "\(cause.rawValue)", "attempts": "\(attempts)", "downFor": "\(UpstreamLink.seconds(downFor))",
            ])
        case .back(let node, let outage, let attempts):
            logger.notice("upstream node back", metadata: [
                "node": "\(node)", "outage": "\(UpstreamLink.seconds(outage))", "attempts": "\(attempts)",
            ])
        }
    }
}

extension UpstreamLink {
    /// A duration as seconds with milliseconds, for a log line: `1.234s`.
    static func seconds(_ amount: TimeAmount) -> String {
        let millis = amount.nanoseconds / 1_000_000
        return "\(millis / 1000).\(String(format: "%03d", Int(millis % 1000)))s"
    }
}

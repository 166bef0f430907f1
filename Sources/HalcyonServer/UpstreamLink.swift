// The daemon's upstream: the Redis or Valkey tier built from `--upstream`,
// `--upstream-password-file` and `--upstream-prefix`, started in the background, and
// sampled for `server.info`, `cache.stats` and the metrics. The storage engine sees only
// the `Upstream.Tier` it is handed.

import Foundation
import HalcyonCache
import HalcyonRPC
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
        return UpstreamLink(tier: RedisTier(configuration: redis, eventLoop: eventLoop), prefixes: configuration.upstreamPrefixes)
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

    init(tier: RedisTier, prefixes: [String]) {
        self.tier = tier
        self.prefixes = prefixes
        sample.withLock { $0.prefixes = prefixes }
    }

    /// What the hybrid cache is given.
    var cacheConfig: UpstreamConfig { UpstreamConfig(tier: tier, prefixes: prefixes.map { CacheKey($0) }) }

    /// The last sample.
    var facts: UpstreamFacts { sample.withLock { $0 } }

    /// Connects in the background (retrying every second until the deployment answers:
    /// meanwhile shared writes fail with `upstreamUnavailable`) and starts sampling.
    func start(logger: Logger) {
        let loop = tier.client.eventLoop
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
            case .failure(let error):
                if attempt == 0 {
                    logger.warning("upstream unreachable; retrying every second", metadata: ["error": "\(error)"])
                }
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
        return client.topology().and(client.stats()).and(client.connectedNodes()).map { [self] pair, connected in
            let (topology, stats) = pair
            sample.withLock { s in
                switch topology {
                case .unknown: s.cluster = false; s.nodes = client.configuration.seeds.map(\.description)
                case .standalone(let node): s.cluster = false; s.nodes = [node.description]
                case .cluster(let map): s.cluster = true; s.nodes = map.primaries.map(\.description)
                }
                s.connectedNodes = connected.map(\.description).sorted()
                if case .unknown = topology {
                    s.state = connected.isEmpty ? "unavailable" : "starting"
                } else {
                    s.state = connected.count >= s.nodes.count ? "connected" : connected.isEmpty ? "unavailable" : "degraded"
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
            }
        }
    }
}

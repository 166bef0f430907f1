// The client a cache talks to: one pipelined connection per node, standalone or Cluster
// (recognised by asking the server), commands routed by key slot, redirects followed,
// lost connections re-made with backoff, and client tracking turned into one ordered
// stream of invalidation events.

import NIOCore
import NIOPosix

/// A Redis or Valkey client for one deployment: a standalone server or a cluster.
///
/// ```swift
/// let client = RedisClient(configuration: .init(seeds: [.tcp(host: "127.0.0.1", port: 7000)]),
///                          eventLoop: group.next()) { event in … }
/// try await client.start().get()
/// let value = try await client.send(["GET", "user:1"], key: "user:1").get()
/// ```
///
/// **Routing.** A command names the key it is routed by; in a cluster that key's slot
/// picks the primary (`SlotMap`). `MOVED` updates the slot's owner at once, refreshes the
/// whole map in the background and sends the command again; `ASK` sends `ASKING` and the
/// command to the named node without touching the map; `TRYAGAIN`, `CLUSTERDOWN` and
/// `LOADING` are retried after a short pause. All of these count against
/// `maxRedirects`. Error replies that remain are thrown as `RedisError.server`.
///
/// **Connections.** One per node, made on first use and kept; every command to a node
/// is pipelined on it. A connection that closes fails its waiting commands, emits
/// `.flushed(.connectionLost)` (tracking state on that server is gone with it) and is
/// re-made in the background with exponential backoff (`reconnectBackoff` doubling up to
/// `maxReconnectBackoff`); meanwhile commands to that node fail fast with `.down`, which
/// names the cause. A connection whose server goes silent is closed by its heartbeat
/// (`RedisConnection.Options.deadAfter`) and handled the same way.
///
/// **Outages.** A node is *down* from its first failure (a lost connection, a refused
/// connect) until a connection to it is made again. `onNodeChange` hears `.lost` once
/// per outage with its cause (for a connection the server closed, the cause of the first
/// reconnect failure that names one: refused, `WRONGPASS`, …; for at most `causeWait`,
/// then `closed`), `.back` once with the outage's length,
/// and in between `.stillDown` only when the cause changes or a minute has passed: a
/// reconnect loop never floods a log.
///
/// **Topology.** In a cluster the slot map is loaded again, from any node that answers
/// (connected nodes first, then the seeds and every node ever known, replicas
/// included), on `MOVED`, `CLUSTERDOWN` and `TRYAGAIN`, when a node is lost, when a
/// command finds its node down, and every `topologyRefreshInterval` while any slot's
/// primary is down, so the promotion of a replica is followed within one interval of
/// the cluster announcing it. Loads are never closer together than that interval (and
/// one runs at a time): a dead node costs a bounded number of commands.
///
/// **Tracking** (`tracking`, on by default). Every connection runs `CLIENT TRACKING ON
/// NOLOOP` in the default mode: the server remembers the keys this connection read and
/// sends one invalidation when another client changes one of them, or when the key
/// expires, is evicted, or leaves the node in a slot migration. NOLOOP leaves out the
/// changes made through this connection: their replies already tell the consumer, and
/// without it Redis (7.0 at least) sends a write's own invalidation after the write's
/// reply, which would make the consumer drop every value it has just written. Chosen over BCAST because
/// a host only ever hears about keys it holds: BCAST sends every write under the tracked
/// prefixes to every host, so with the default of sharing every key each host would
/// receive the whole cluster's write traffic as pushes. The price is that only a read
/// tracks a key: a consumer must hold a local copy only of a value it got from a read
/// made on the tracking connection (a script's reads count; see `HalcyonUpstreamTier`).
/// Redis's tracking table may forget keys under memory pressure, and it then sends their
/// invalidation first, so forgetting never leaves a copy unwatched.
///
/// **Event order.** Events and replies are numbered from one counter on the event loop:
/// `sendSequenced` returns the number current when its reply was read, and each event
/// carries a larger one. An invalidation with a number greater than a reply's is about a
/// change that happened after that reply was produced, so a consumer that stores a read
/// value only when no invalidation (or flush) numbered after it has been seen for that
/// key can never keep a stale copy.
///
/// Threading: thread-safe. All mutable state lives in one `NIOLoopBoundBox` on
/// `eventLoop`; public methods hop onto that loop, and every connection is made on it, so
/// replies, pushes and state changes are serialised there. `onEvent` is called on
/// `eventLoop`: it must not block.
public final class RedisClient: Sendable {
    /// What the client connects to and how.
    public struct Configuration: Sendable, CustomStringConvertible {
        /// Where to start: one address for a standalone server, one or more nodes of a cluster.
        public var seeds: [NodeAddress]
        /// AUTH, client name, database, timeouts and limits for every connection.
        public var connection = RedisConnection.Options()
        /// Whether connections turn on client tracking (default mode, NOLOOP). Default true.
        public var tracking = true
        /// How many times one command may be redirected or retried. Default 5.
        public var maxRedirects = 5
        /// The first pause before re-making a lost connection; doubled per failure. Default 25 ms.
        public var reconnectBackoff = TimeAmount.milliseconds(25)
        /// The longest pause between reconnect attempts. Default 500 ms.
        public var maxReconnectBackoff = TimeAmount.milliseconds(500)
        /// The shortest time between two slot-map loads, and how often the map is loaded
        /// while a slot's primary is down. Default 150 ms.
        public var topologyRefreshInterval = TimeAmount.milliseconds(150)
        /// During an outage, how often `.stillDown` repeats when nothing changed. Default 60 s.
        public var outageReminder = TimeAmount.seconds(60)

        public init(seeds: [NodeAddress]) {
            self.seeds = seeds
        }

        public var description: String {
            "seeds=\(seeds.map(\.description).joined(separator: ",")) \(connection) maxRedirects=\(maxRedirects)"
        }
    }

    /// What the consumer of tracking hears.
    public enum Event: Sendable, Equatable {
        /// These keys changed through another client (or expired, or were evicted, or
        /// left the node) on the server.
        case invalidated(keys: [ByteBuffer], sequence: UInt64)
        /// Every key this client read may have changed: drop every copy.
        case flushed(FlushReason, sequence: UInt64)

        public var sequence: UInt64 {
            switch self {
            case .invalidated(_, let sequence), .flushed(_, let sequence): return sequence
            }
        }
    }

    /// Why every copy must go.
    public enum FlushReason: Sendable, Equatable {
        /// The connection to this node closed: its tracking state is gone.
        case connectionLost(NodeAddress)
        /// The node sent an invalidation of everything (`FLUSHALL`, `FLUSHDB`).
        case serverFlushed(NodeAddress)
    }

    /// A node's reachability changed (see "Outages").
    public enum NodeChange: Sendable, Equatable {
        /// The node became unreachable, for `cause` (`detail`: the error in words).
        case lost(NodeAddress, cause: FailureCause, detail: String)
        /// The node is still unreachable: its cause changed, or a reminder.
        case stillDown(NodeAddress, cause: FailureCause, attempts: Int, downFor: TimeAmount)
        /// A connection to the node was made again after `outage`.
        case back(NodeAddress, outage: TimeAmount, attempts: Int)
    }

    /// What the client knows of one node now.
    public struct NodeHealth: Sendable, Equatable {
        public var node: NodeAddress
        /// A connection is open, or being made with no failure since the last one was.
        public var reachable: Bool
        /// Why it is down (nil when reachable).
        public var cause: FailureCause?
        /// How long it has been down (zero when reachable).
        public var downFor: TimeAmount
    }

    /// What the client knows of the deployment.
    public enum Topology: Sendable, Equatable {
        case unknown
        case standalone(NodeAddress)
        case cluster(SlotMap)
    }

    /// Counters since start.
    public struct Stats: Sendable, Equatable {
        /// Connections made (first ones and re-made ones).
        public var connects = 0
        /// Connections made again after a loss.
        public var reconnects = 0
        /// Connections that closed while in use.
        public var connectionsLost = 0
        /// `MOVED` replies followed.
        public var moved = 0
        /// `ASK` replies followed.
        public var asks = 0
        /// `TRYAGAIN` / `CLUSTERDOWN` / `LOADING` retries.
        public var retries = 0
        /// Keys named by invalidation pushes.
        public var invalidatedKeys = 0
        /// Flush events (lost connections and server flushes).
        public var flushes = 0
        /// Slot-map loads.
        public var topologyRefreshes = 0
        /// Commands answered (redirects included in their command's time).
        public var commands = 0
        /// Writes of commands to connections: one per command sent alone (a redirect is
        /// another), one per node for a `sendBatch` (however many commands it carries).
        public var writes = 0
        /// Commands sent in batches.
        public var batchedCommands = 0
        /// Commands that failed (transport, redirect bounds, error replies), `NOSCRIPT`
        /// replies left out (`scriptReloads`).
        public var failedCommands = 0
        /// Commands that failed at once, without reaching the network, because their node
        /// was down (part of `failedCommands`).
        public var failedFast = 0
        /// `NOSCRIPT` replies: a script the server no longer had (a restart, `SCRIPT
        /// FLUSH`), which the caller sends again whole. Not failures.
        public var scriptReloads = 0
        /// Connection attempts (first, re-made and failed ones) and those that failed.
        public var connectAttempts = 0
        public var failedConnects = 0
        /// Connections closed for a missed heartbeat (a silent path or server).
        public var heartbeatsMissed = 0
        /// Outages (see "Outages") begun and ended.
        public var outages = 0
        public var recoveries = 0
        /// The sum and the largest of the answered commands' round trips, in nanoseconds,
        /// from the call to the reply (the mean is `roundTripNanoseconds / commands`).
        public var roundTripNanoseconds: UInt64 = 0
        public var maxRoundTripNanoseconds: UInt64 = 0
        public init() {}
    }

    /// Where a command goes.
    public enum Route: Sendable, Equatable {
        /// The node that serves this key's slot.
        case key(ByteBuffer)
        /// This node.
        case node(NodeAddress)
        /// Any node (a standalone server, or the first primary).
        case any
    }

    public let eventLoop: EventLoop
    public let configuration: Configuration
    private let state: NIOLoopBoundBox<State>
    private let onEvent: @Sendable (Event) -> Void
    private let onNodeChange: @Sendable (NodeChange) -> Void

    /// - Parameter onEvent: called on `eventLoop` with every tracking event, in order.
    /// - Parameter onNodeChange: called on `eventLoop` when a node is lost, stays down or
    ///   comes back (see "Outages"); it must not block.
    public init(
        configuration: Configuration, eventLoop: EventLoop, onEvent: @escaping @Sendable (Event) -> Void = { _ in },
        onNodeChange: @escaping @Sendable (NodeChange) -> Void = { _ in }
    ) {
        var configuration = configuration
        configuration.connection.tracking = configuration.tracking ? ["NOLOOP"] : nil
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.onEvent = onEvent
        self.onNodeChange = onNodeChange
        state = NIOLoopBoundBox.makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// Connects to the first seed that answers and learns the topology.
    public func start() -> EventLoopFuture<Void> {
        onLoop { self.refreshTopology() }
    }

    /// Sends a command to where `route` says and returns its reply.
    /// - Throws (in the future): `RedisError.server` for an error reply, `.unavailable`,
    ///   `.connectionClosed`, `.timedOut`, `.tooManyRedirects`, `.slotUncovered`, `.shutDown`.
    public func send(_ arguments: [ByteBuffer], route: Route) -> EventLoopFuture<RESP3Value> {
        onLoop { self.timed(self.execute(arguments, route: route, attempt: 0, asking: nil)) }
    }

    /// `send` routed by `key`, with text arguments.
    public func send(_ arguments: [String], key: String) -> EventLoopFuture<RESP3Value> {
        send(arguments.map { ByteBuffer(string: $0) }, route: .key(ByteBuffer(string: key)))
    }

    /// `send`, also returning the event sequence number current when the reply was read
    /// (see "Event order" above).
    public func sendSequenced(_ arguments: [ByteBuffer], route: Route) -> EventLoopFuture<(RESP3Value, UInt64)> {
        onLoop {
            self.timed(self.execute(arguments, route: route, attempt: 0, asking: nil)).map { ($0, self.state.value.sequence) }
        }
    }

    /// One command of a batch: its arguments and where it goes.
    public struct Command: Sendable {
        public var arguments: [ByteBuffer]
        public var route: Route

        public init(_ arguments: [ByteBuffer], route: Route) {
            self.arguments = arguments
            self.route = route
        }
    }

    /// Sends `commands` together: grouped by the node each is routed to, each node's share
    /// written back to back in one write (one flush), its replies matched in order. So
    /// commands to one node keep their order, and a batch costs one round trip per node,
    /// not one per command. A reply that redirects (`MOVED`, `ASK`, `TRYAGAIN`, …) is
    /// followed for that command alone, as `send` does. Never fails: the future holds
    /// one outcome per command, in order, each with the event sequence number current
    /// when its reply was read (see "Event order"); error replies are `RedisError.server`.
    public func sendBatch(_ commands: [Command]) -> EventLoopFuture<[Result<(RESP3Value, UInt64), Error>]> {
        onLoop {
            var outcomes: [EventLoopFuture<(RESP3Value, UInt64)>?] = Array(repeating: nil, count: commands.count)
            var groups: [(node: NodeAddress, indexes: [Int])] = []
            for (index, command) in commands.enumerated() {
                if self.state.value.isShutDown {
                    outcomes[index] = self.eventLoop.makeFailedFuture(RedisError.shutDown)
                    continue
                }
                do {
                    let node = try self.target(of: command.route)
                    if let group = groups.firstIndex(where: { $0.node == node }) {
                        groups[group].indexes.append(index)
                    } else {
                        groups.append((node, [index]))
                    }
                } catch {
                    outcomes[index] = self.eventLoop.makeFailedFuture(error)
                }
            }
            for (node, indexes) in groups {
                let connected = self.connection(to: node)
                // One promise per command, completed from the node's pipelined write.
                let promises = indexes.map { _ in self.eventLoop.makePromise(of: RESP3Value.self) }
                connected.whenComplete { result in
                    switch result {
                    case .failure(let error):
                        promises.forEach { $0.fail(error) }
                    case .success(let connection):
                        let state = self.state.value
                        state.stats.writes += 1
                        state.stats.batchedCommands += indexes.count
                        let replies = connection.pipeline(indexes.map { commands[$0].arguments })
                        for (position, reply) in replies.enumerated() {
                            let command = commands[indexes[position]]
                            reply.flatMap { value -> EventLoopFuture<RESP3Value> in
                                guard let text = value.errorText else { return self.eventLoop.makeSucceededFuture(value) }
                                return self.redirect(text, arguments: command.arguments, route: command.route, attempt: 0)
                            }.cascade(to: promises[position])
                        }
                    }
                }
                for (position, index) in indexes.enumerated() {
                    outcomes[index] = self.timed(promises[position].futureResult).map { ($0, self.state.value.sequence) }
                }
            }
            let futures = outcomes.map { $0! }
            return EventLoopFuture.whenAllComplete(futures, on: self.eventLoop)
        }
    }

    /// Sends the same command to every primary (every node of the deployment's data);
    /// the replies in the order of `SlotMap.primaries`.
    public func sendToEveryPrimary(_ arguments: [ByteBuffer]) -> EventLoopFuture<[(NodeAddress, RESP3Value)]> {
        onLoop {
            let nodes = self.knownPrimaries
            let replies = nodes.map { node in
                self.execute(arguments, route: .node(node), attempt: 0, asking: nil).map { (node, $0) }
            }
            return EventLoopFuture.whenAllSucceed(replies, on: self.eventLoop)
        }
    }

    /// Every primary known now (the one server of a standalone deployment).
    public func primaries() -> EventLoopFuture<[NodeAddress]> { onLoop { self.eventLoop.makeSucceededFuture(self.knownPrimaries) } }

    /// The current topology.
    public func topology() -> EventLoopFuture<Topology> { onLoop { self.eventLoop.makeSucceededFuture(self.state.value.topology) } }

    /// The counters.
    public func stats() -> EventLoopFuture<Stats> { onLoop { self.eventLoop.makeSucceededFuture(self.state.value.stats) } }

    /// The nodes with an open connection now.
    public func connectedNodes() -> EventLoopFuture<[NodeAddress]> {
        onLoop {
            self.eventLoop.makeSucceededFuture(self.state.value.nodes.filter { $0.value.connection != nil }.map(\.key))
        }
    }

    /// Every node known (seeds, the map's primaries and replicas, nodes ever connected),
    /// the primaries first, with what is known of its reachability.
    public func health() -> EventLoopFuture<[NodeHealth]> {
        onLoop {
            var order = self.knownPrimaries
            for node in self.configuration.seeds + self.knownReplicas + self.state.value.nodes.keys.sorted(by: { $0.description < $1.description })
            where !order.contains(node) { order.append(node) }
            let now = NIODeadline.now()
            return self.eventLoop.makeSucceededFuture(order.map { address in
                let outage = self.state.value.nodes[address]?.outage
                return NodeHealth(node: address, reachable: outage == nil, cause: outage?.cause,
                                  downFor: outage.map { now - $0.since } ?? .zero)
            })
        }
    }

    /// Loads the slot map again (at most one load runs at a time; callers share it).
    public func refresh() -> EventLoopFuture<Void> { onLoop { self.refreshTopology() } }

    /// Closes every connection; later commands fail with `.shutDown`.
    public func shutdown() -> EventLoopFuture<Void> {
        onLoop {
            let state = self.state.value
            state.isShutDown = true
            var closing: [EventLoopFuture<Void>] = []
            state.refreshTask?.cancel()
            for node in state.nodes.values {
                node.reconnectTask?.cancel()
                if let connection = node.connection { closing.append(connection.close()) }
            }
            return EventLoopFuture.andAllComplete(closing, on: self.eventLoop)
        }
    }

    // MARK: - On the loop

    /// Mutable state, only on `eventLoop`.
    final class State {
        var topology = Topology.unknown
        var nodes: [NodeAddress: Node] = [:]
        var sequence: UInt64 = 0
        var stats = Stats()
        var refreshing: EventLoopFuture<Void>?
        /// A load asked for while one ran, or too soon after the last: it runs next.
        var refreshAgain = false
        var refreshTask: Scheduled<Void>?
        var lastRefresh = NIODeadline.uptimeNanoseconds(0)
        var isShutDown = false
    }

    /// A node's outage, from its first failure until a connection is made again.
    struct Outage {
        var since: NIODeadline
        /// The latest failure's cause.
        var cause: FailureCause
        /// Failed attempts to connect since it began.
        var attempts = 0
        /// The cause last reported, and when; nil while `.lost` waits for a reconnect
        /// that names a cause (a connection the server closed says nothing of why).
        var reported: FailureCause?
        var reportedAt: NIODeadline
    }

    /// One node's connection and its reconnect schedule, only on `eventLoop`.
    final class Node {
        var connection: RedisConnection?
        var connecting: EventLoopFuture<RedisConnection>?
        /// Consecutive failed attempts.
        var failures = 0
        /// Commands fail fast before this instant after a failure.
        var retryAt = NIODeadline.uptimeNanoseconds(0)
        var reconnectTask: Scheduled<Void>?
        var everConnected = false
        var outage: Outage?
    }

    private func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> EventLoopFuture<T>) -> EventLoopFuture<T> {
        eventLoop.inEventLoop ? body() : eventLoop.flatSubmit(body)
    }

    /// Counts `reply` into the round-trip statistics when it completes.
    private func timed(_ reply: EventLoopFuture<RESP3Value>) -> EventLoopFuture<RESP3Value> {
        let start = NIODeadline.now()
        reply.whenComplete { result in
            let stats = self.state.value
            switch result {
            case .success:
                let elapsed = UInt64(max(0, (NIODeadline.now() - start).nanoseconds))
                stats.stats.commands += 1
                stats.stats.roundTripNanoseconds &+= elapsed
                stats.stats.maxRoundTripNanoseconds = max(stats.stats.maxRoundTripNanoseconds, elapsed)
            case .failure(let error):
                if (error as? RedisError)?.serverCode == "NOSCRIPT" {
                    stats.stats.scriptReloads += 1
                } else {
                    stats.stats.failedCommands += 1
                    if case .down? = error as? RedisError { stats.stats.failedFast += 1 }
                }
            }
        }
        return reply
    }

    private var knownReplicas: [NodeAddress] {
        guard case .cluster(let map) = state.value.topology else { return [] }
        return map.shards.flatMap(\.replicas)
    }

    private var knownPrimaries: [NodeAddress] {
        switch state.value.topology {
        case .unknown: return configuration.seeds.prefix(1).map { $0 }
        case .standalone(let node): return [node]
        case .cluster(let map): return map.primaries
        }
    }

    private func target(of route: Route) throws(RedisError) -> NodeAddress {
        switch route {
        case .node(let node): return node
        case .any:
            guard let node = knownPrimaries.first else { throw .unavailable(node: "any", detail: "no node known") }
            return node
        case .key(let key):
            switch state.value.topology {
            case .unknown:
                guard let seed = configuration.seeds.first else { throw .unavailable(node: "any", detail: "no seed") }
                return seed
            case .standalone(let node): return node
            case .cluster(let map):
                let slot = key.withUnsafeReadableBytes { ClusterSlot(key: $0) }
                guard let node = map.primary(for: slot) else { throw .slotUncovered(slot.value) }
                return node
            }
        }
    }

    private func execute(
        _ arguments: [ByteBuffer], route: Route, attempt: Int, asking: NodeAddress?
    ) -> EventLoopFuture<RESP3Value> {
        if state.value.isShutDown { return eventLoop.makeFailedFuture(RedisError.shutDown) }
        let node: NodeAddress
        do { node = try asking ?? target(of: route) } catch { return eventLoop.makeFailedFuture(error) }
        return connection(to: node).flatMap { connection in
            self.state.value.stats.writes += 1
            let reply = asking == nil ? connection.send(arguments) : connection.pipeline([[ByteBuffer(string: "ASKING")], arguments])[1]
            return reply.flatMap { value in
                guard let text = value.errorText else { return self.eventLoop.makeSucceededFuture(value) }
                return self.redirect(text, arguments: arguments, route: route, attempt: attempt)
            }
        }
    }

    /// Follows `MOVED`/`ASK`, retries the transient cluster errors, throws the others.
    private func redirect(_ text: String, arguments: [ByteBuffer], route: Route, attempt: Int) -> EventLoopFuture<RESP3Value> {
        let words = text.split(separator: " ")
        let code = words.first.map(String.init) ?? ""
        let redirectable = ["MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "LOADING"].contains(code)
        guard redirectable else { return eventLoop.makeFailedFuture(RedisError.server(text)) }
        guard attempt < configuration.maxRedirects else {
            return eventLoop.makeFailedFuture(RedisError.tooManyRedirects(text))
        }
        let state = self.state.value
        if code == "MOVED" || code == "ASK" {
            guard words.count >= 3, let slot = Int(words[1]), slot >= 0, slot < ClusterSlot.count,
                  let node = NodeAddress(hostPort: String(words[2]))
            else { return eventLoop.makeFailedFuture(RedisError.unexpectedReply(text)) }
            if code == "ASK" {
                state.stats.asks += 1
                return execute(arguments, route: route, attempt: attempt + 1, asking: node)
            }
            state.stats.moved += 1
            if case .cluster(var map) = state.topology {
                map.assign(ClusterSlot(slot), to: node)
                state.topology = .cluster(map)
            }
            // The one slot is fixed now; the rest of a resharding arrives with the new map.
            requestRefresh()
            return execute(arguments, route: route, attempt: attempt + 1, asking: nil)
        }
        state.stats.retries += 1
        // A cluster that answers CLUSTERDOWN or TRYAGAIN may be failing over: its new map
        // is what ends the wait.
        if code == "CLUSTERDOWN" || code == "TRYAGAIN" { requestRefresh() }
        let pause = configuration.reconnectBackoff * Int64(1 << min(attempt, 6))
        return eventLoop.flatScheduleTask(in: pause) {
            self.execute(arguments, route: route, attempt: attempt + 1, asking: nil)
        }.futureResult
    }

    private func node(_ address: NodeAddress) -> Node {
        if let node = state.value.nodes[address] { return node }
        let node = Node()
        state.value.nodes[address] = node
        return node
    }

    /// The open connection to `address`, or one being made; fails fast while backing off.
    private func connection(to address: NodeAddress) -> EventLoopFuture<RedisConnection> {
        let node = node(address)
        if let connection = node.connection { return eventLoop.makeSucceededFuture(connection) }
        if let connecting = node.connecting { return connecting }
        if NIODeadline.now() < node.retryAt {
            if knownPrimaries.contains(address) { requestRefresh() }
            return eventLoop.makeFailedFuture(
                RedisError.down(node: address.description, cause: node.outage?.cause ?? .closed))
        }
        return connect(address)
    }

    private func connect(_ address: NodeAddress) -> EventLoopFuture<RedisConnection> {
        let node = node(address)
        let connecting = RedisConnection.connect(
            to: address, on: eventLoop, options: configuration.connection,
            onPush: { [weak self] push in self?.received(push, from: address) })
        node.connecting = connecting
        state.value.stats.connectAttempts += 1
        connecting.whenComplete { result in
            let state = self.state.value
            let node = self.node(address)
            node.connecting = nil
            switch result {
            case .success(let connection):
                if state.isShutDown {
                    connection.close()
                    return
                }
                node.connection = connection
                node.failures = 0
                node.retryAt = .uptimeNanoseconds(0)
                state.stats.connects += 1
                if node.everConnected { state.stats.reconnects += 1 }
                node.everConnected = true
                self.recovered(node, address)
                connection.closeFuture.whenComplete { _ in self.closed(connection, address: address) }
            case .failure(let error):
                state.stats.failedConnects += 1
                node.failures += 1
                node.retryAt = .now() + self.backoff(failures: node.failures)
                if !state.isShutDown {
                    let cause = (error as? RedisError)?.failureCause ?? .closed
                    self.failed(node, address, cause: cause, detail: "\(error)",
                                waitForReconnect: cause == .closed && self.isWanted(address))
                }
                self.scheduleReconnect(address)
                if self.knownPrimaries.contains(address) { self.requestRefresh() }
            }
        }
        return connecting
    }

    /// How long an outage whose attempts so far were all closed by the server waits for
    /// one that names a cause before it is announced as `closed` (see `failed`).
    static let causeWait = TimeAmount.seconds(1)

    private func backoff(failures: Int) -> TimeAmount {
        let pause = configuration.reconnectBackoff * Int64(1 << min(max(failures - 1, 0), 16))
        return min(pause, configuration.maxReconnectBackoff)
    }

    /// A connection closed: drop it, tell the consumer, re-make it in the background.
    private func closed(_ connection: RedisConnection, address: NodeAddress) {
        let state = self.state.value
        guard let node = state.nodes[address], node.connection === connection else { return }
        node.connection = nil
        state.stats.connectionsLost += 1
        let reason = connection.closeReason
        if case .heartbeatMissed? = reason { state.stats.heartbeatsMissed += 1 }
        if !state.isShutDown {
            // A connection the server closed says nothing of why: a reconnect's outcome
            // names the cause (see `failed`), unless no reconnect will be tried.
            let cause = reason?.failureCause ?? .closed
            failed(node, address, cause: cause, detail: reason.map { "\($0)" } ?? "connection closed",
                   waitForReconnect: cause == .closed && isWanted(address))
        }
        if configuration.tracking {
            state.sequence += 1
            state.stats.flushes += 1
            onEvent(.flushed(.connectionLost(address), sequence: state.sequence))
        }
        guard !state.isShutDown else { return }
        scheduleReconnect(address)
        requestRefresh()
    }

    /// A connection to `address` closed or could not be made: its outage begins, or goes
    /// on (see "Outages").
    private func failed(_ node: Node, _ address: NodeAddress, cause: FailureCause, detail: String, waitForReconnect: Bool = false) {
        let now = NIODeadline.now()
        guard var outage = node.outage else {
            state.value.stats.outages += 1
            node.outage = Outage(since: now, cause: cause, reported: waitForReconnect ? nil : cause, reportedAt: now)
            if !waitForReconnect { onNodeChange(.lost(address, cause: cause, detail: detail)) }
            return
        }
        outage.attempts += 1
        outage.cause = cause
        if outage.reported == nil {
            // A reconnect closed as well names no cause either: a killed server's listener
            // can complete a connect while its process goes, then the connection closes.
            // The next attempt names it (refused, most often), within `causeWait`.
            if waitForReconnect && now - outage.since < Self.causeWait {
                node.outage = outage
                return
            }
            outage.reported = cause
            outage.reportedAt = now
            onNodeChange(.lost(address, cause: cause, detail: detail))
        } else if (cause != outage.reported && now - outage.reportedAt >= .seconds(1)) || now - outage.reportedAt >= configuration.outageReminder {
            outage.reported = cause
            outage.reportedAt = now
            onNodeChange(.stillDown(address, cause: cause, attempts: outage.attempts, downFor: now - outage.since))
        }
        node.outage = outage
    }

    /// A connection to `address` was made: an outage ends.
    private func recovered(_ node: Node, _ address: NodeAddress) {
        guard let outage = node.outage else { return }
        node.outage = nil
        state.value.stats.recoveries += 1
        if outage.reported == nil { onNodeChange(.lost(address, cause: .closed, detail: "connection closed")) }
        onNodeChange(.back(address, outage: NIODeadline.now() - outage.since, attempts: outage.attempts))
    }

    private func scheduleReconnect(_ address: NodeAddress) {
        let node = node(address)
        guard node.reconnectTask == nil, !state.value.isShutDown else { return }
        node.reconnectTask = eventLoop.scheduleTask(in: backoff(failures: node.failures)) {
            let node = self.node(address)
            node.reconnectTask = nil
            guard !self.state.value.isShutDown, self.isWanted(address),
                  node.connection == nil, node.connecting == nil else { return }
            _ = self.connect(address)
        }
    }

    /// Asks for a slot-map load: at once when none ran within `topologyRefreshInterval`,
    /// otherwise when that interval has passed; never two at a time. Only in a cluster.
    private func requestRefresh() {
        let state = self.state.value
        guard case .cluster = state.topology, !state.isShutDown else { return }
        if state.refreshing != nil {
            state.refreshAgain = true
            return
        }
        guard state.refreshTask == nil else { return }
        let due = state.lastRefresh + configuration.topologyRefreshInterval
        if NIODeadline.now() >= due {
            _ = refreshTopology()
        } else {
            state.refreshTask = eventLoop.scheduleTask(deadline: due) {
                self.state.value.refreshTask = nil
                _ = self.refreshTopology()
            }
        }
    }

    /// Whether some slot's primary is down now.
    private var primaryDown: Bool {
        knownPrimaries.contains { state.value.nodes[$0]?.outage != nil }
    }

    /// Whether a node still matters: a seed, or a primary of the current map.
    private func isWanted(_ address: NodeAddress) -> Bool {
        configuration.seeds.contains(address) || knownPrimaries.contains(address)
    }

    /// A push message from `address`: tracking invalidations become events.
    private func received(_ push: RESP3Value, from address: NodeAddress) {
        guard let items = push.array, items.first?.string == "invalidate" else { return }
        let state = self.state.value
        state.sequence += 1
        if items.count > 1, let keys = items[1].array {
            state.stats.invalidatedKeys += keys.count
            onEvent(.invalidated(keys: keys.compactMap(\.bytes), sequence: state.sequence))
        } else {
            state.stats.flushes += 1
            onEvent(.flushed(.serverFlushed(address), sequence: state.sequence))
        }
    }

    /// Loads the topology from the first node that answers: a cluster's slot map, or
    /// "standalone" when the server has cluster support disabled.
    private func refreshTopology() -> EventLoopFuture<Void> {
        let state = self.state.value
        if let refreshing = state.refreshing { return refreshing }
        state.lastRefresh = .now()
        state.refreshAgain = false
        // Any node may answer: those with a connection first (no connect needed), then the
        // seeds and every node known, replicas too, so that the map can be learnt while
        // the primaries named by the old one are down. A node that is down fails at once.
        let known = knownPrimaries + configuration.seeds + knownReplicas + state.nodes.keys.sorted { $0.description < $1.description }
        var candidates: [NodeAddress] = []
        for node in known where !candidates.contains(node) && state.nodes[node]?.connection != nil { candidates.append(node) }
        for node in known where !candidates.contains(node) && state.nodes[node]?.outage == nil { candidates.append(node) }
        for node in known where !candidates.contains(node) { candidates.append(node) }
        let refreshing = ask(candidates[...], lastError: nil).map { topology in
            self.state.value.topology = topology
            self.state.value.stats.topologyRefreshes += 1
            // Connect to every primary now, so a dead one is noticed (and tracking starts)
            // before the first command needs it.
            if case .cluster(let map) = topology {
                for node in map.primaries where self.node(node).connection == nil { _ = self.connection(to: node) }
            }
        }
        state.refreshing = refreshing
        refreshing.whenComplete { _ in
            let state = self.state.value
            state.refreshing = nil
            // While a slot has no reachable primary, look again after the interval: the
            // cluster may promote a replica at any moment.
            if state.refreshAgain || self.primaryDown { self.requestRefresh() }
        }
        return refreshing
    }

    private func ask(_ candidates: ArraySlice<NodeAddress>, lastError: Error?) -> EventLoopFuture<Topology> {
        guard let node = candidates.first else {
            return eventLoop.makeFailedFuture(lastError ?? RedisError.unavailable(node: "any", detail: "no seed"))
        }
        let host: String
        switch node {
        case .tcp(let name, _): host = name
        case .unix: host = "127.0.0.1"
        }
        return connection(to: node).flatMap { connection in
            connection.send(["CLUSTER", "SHARDS"]).flatMap { reply -> EventLoopFuture<Topology> in
                guard let text = reply.errorText else {
                    do { return self.eventLoop.makeSucceededFuture(.cluster(try SlotMap(shards: reply, fallbackHost: host))) } catch {
                        return self.eventLoop.makeFailedFuture(RedisError.unexpectedReply("\(error)"))
                    }
                }
                if text.contains("cluster support disabled") { return self.eventLoop.makeSucceededFuture(.standalone(node)) }
                // Before Redis 7: CLUSTER SLOTS.
                return connection.send(["CLUSTER", "SLOTS"]).flatMapThrowing { reply in
                    if let text = reply.errorText { throw RedisError.server(text) }
                    return .cluster(try SlotMap(slots: reply, fallbackHost: host))
                }
            }
        }.flatMapError { error in
            self.ask(candidates.dropFirst(), lastError: error)
        }
    }
}

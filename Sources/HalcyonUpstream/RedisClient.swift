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
/// `maxReconnectBackoff`); meanwhile commands to that node fail fast with `.unavailable`.
/// In a cluster a lost node also triggers a slot-map refresh, so a failover is followed.
///
/// **Tracking** (`tracking`, on by default). Every connection runs `CLIENT TRACKING ON
/// NOLOOP` in the default mode: the server remembers the keys this connection read and
/// sends one invalidation when another client changes one of them, or when the key
/// expires, is evicted, or leaves the node in a slot migration. NOLOOP leaves out the
/// changes made through this connection: their replies already tell the consumer, and
/// without it Redis sends a write's own invalidation after the write's reply (measured on
/// 7.0), which would make the consumer drop every value it has just written. Chosen over BCAST because
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
        /// The longest pause between reconnect attempts. Default 1 s.
        public var maxReconnectBackoff = TimeAmount.seconds(1)

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
        /// Commands that failed (transport, redirect bounds, error replies).
        public var failedCommands = 0
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

    /// - Parameter onEvent: called on `eventLoop` with every tracking event, in order.
    public init(configuration: Configuration, eventLoop: EventLoop, onEvent: @escaping @Sendable (Event) -> Void = { _ in }) {
        var configuration = configuration
        configuration.connection.tracking = configuration.tracking ? ["NOLOOP"] : nil
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.onEvent = onEvent
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

    /// Loads the slot map again (at most one load runs at a time; callers share it).
    public func refresh() -> EventLoopFuture<Void> { onLoop { self.refreshTopology() } }

    /// Closes every connection; later commands fail with `.shutDown`.
    public func shutdown() -> EventLoopFuture<Void> {
        onLoop {
            let state = self.state.value
            state.isShutDown = true
            var closing: [EventLoopFuture<Void>] = []
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
        var isShutDown = false
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
            case .failure:
                stats.stats.failedCommands += 1
            }
        }
        return reply
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
            _ = refreshTopology()
            return execute(arguments, route: route, attempt: attempt + 1, asking: nil)
        }
        state.stats.retries += 1
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
            return eventLoop.makeFailedFuture(
                RedisError.unavailable(node: address.description, detail: "reconnecting after a failure"))
        }
        return connect(address)
    }

    private func connect(_ address: NodeAddress) -> EventLoopFuture<RedisConnection> {
        let node = node(address)
        let connecting = RedisConnection.connect(
            to: address, on: eventLoop, options: configuration.connection,
            onPush: { [weak self] push in self?.received(push, from: address) })
        node.connecting = connecting
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
                connection.closeFuture.whenComplete { _ in self.closed(connection, address: address) }
            case .failure:
                node.failures += 1
                node.retryAt = .now() + self.backoff(failures: node.failures)
                self.scheduleReconnect(address)
            }
        }
        return connecting
    }

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
        if configuration.tracking {
            state.sequence += 1
            state.stats.flushes += 1
            onEvent(.flushed(.connectionLost(address), sequence: state.sequence))
        }
        guard !state.isShutDown else { return }
        scheduleReconnect(address)
        if case .cluster = state.topology { _ = refreshTopology() }
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
        var candidates: [NodeAddress] = []
        for node in knownPrimaries + configuration.seeds where !candidates.contains(node) { candidates.append(node) }
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
        refreshing.whenComplete { _ in self.state.value.refreshing = nil }
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

// Which node serves which slot of a Redis Cluster: read from `CLUSTER SHARDS` (Redis 7),
// or from `CLUSTER SLOTS` where the server predates it; looked up once per command.

/// A server's address: a TCP host and port, or a Unix socket path.
///
/// Threading: a value type; `Sendable`.
public enum NodeAddress: Sendable, Hashable, CustomStringConvertible {
    case tcp(host: String, port: Int)
    case unix(path: String)

    /// Parses `host:port` as a server writes it in `MOVED`/`ASK` (the host may be an IPv6
    /// literal, so the port is after the last colon).
    public init?(hostPort: String) {
        guard let colon = hostPort.lastIndex(of: ":"), let port = Int(hostPort[hostPort.index(after: colon)...]),
              port > 0, port < 65536 else { return nil }
        var host = String(hostPort[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self = .tcp(host: host, port: port)
    }

    public var description: String {
        switch self {
        case .tcp(let host, let port): return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unix(let path): return "unix://\(path)"
        }
    }
}

/// The owner (primary) of every slot of a cluster, and its replicas.
///
/// ```swift
/// let map = try SlotMap(shards: reply)       // the reply to CLUSTER SHARDS
/// map.primary(for: ClusterSlot(key: "foo"))  // .tcp(host: "127.0.0.1", port: 7001)
/// ```
///
/// Threading: a value type; `Sendable`.
public struct SlotMap: Sendable, Equatable {
    /// One primary with the slots it serves.
    public struct Shard: Sendable, Equatable {
        public var primary: NodeAddress
        public var replicas: [NodeAddress]
        /// Inclusive ranges.
        public var slots: [ClosedRange<Int>]
    }

    /// Why a reply could not be read as a slot map.
    public struct Malformed: Error, Sendable, Equatable {
        public var detail: String
    }

    public private(set) var shards: [Shard]
    /// For each slot, an index into `shards`, or -1 when no node serves it.
    private var owners: [Int16]

    public init(shards: [Shard]) {
        self.shards = shards
        owners = Array(repeating: -1, count: ClusterSlot.count)
        for (index, shard) in shards.enumerated() {
            for range in shard.slots where range.lowerBound >= 0 && range.upperBound < ClusterSlot.count {
                for slot in range { owners[slot] = Int16(index) }
            }
        }
    }

    /// The node that serves `slot`; nil when none does (a cluster with uncovered slots).
    public func primary(for slot: ClusterSlot) -> NodeAddress? {
        let index = Int(owners[slot.value])
        return index < 0 ? nil : shards[index].primary
    }

    /// Every primary, in shard order.
    public var primaries: [NodeAddress] { shards.map(\.primary) }

    /// Every slot that `address` serves becomes served by it alone (`MOVED` said so).
    public mutating func assign(_ slot: ClusterSlot, to address: NodeAddress) {
        if let index = shards.firstIndex(where: { $0.primary == address }) {
            owners[slot.value] = Int16(index)
            shards[index].slots.append(slot.value...slot.value)
        } else {
            shards.append(Shard(primary: address, replicas: [], slots: [slot.value...slot.value]))
            owners[slot.value] = Int16(shards.count - 1)
        }
    }

    /// The map from a `CLUSTER SHARDS` reply. Nodes whose health is not `online` are
    /// skipped as replicas; a shard whose primary is not online still owns its slots (the
    /// cluster will answer for them, with an error until a failover).
    /// - Parameter fallbackHost: the host to use when a node announces no usable
    ///   endpoint (`?` or empty): the one the reply came from.
    public init(shards reply: RESP3Value, fallbackHost: String) throws(Malformed) {
        guard let entries = reply.array else { throw Malformed(detail: "CLUSTER SHARDS: not an array") }
        var shards: [Shard] = []
        for entry in entries {
            guard let slotBounds = entry[field: "slots"]?.array, let nodes = entry[field: "nodes"]?.array else {
                throw Malformed(detail: "CLUSTER SHARDS: a shard without slots or nodes")
            }
            var ranges: [ClosedRange<Int>] = []
            var index = 0
            while index + 1 < slotBounds.count {
                guard let low = slotBounds[index].int64, let high = slotBounds[index + 1].int64, low <= high else {
                    throw Malformed(detail: "CLUSTER SHARDS: bad slot range")
                }
                ranges.append(Int(low)...Int(high))
                index += 2
            }
            var primary: NodeAddress?
            var replicas: [NodeAddress] = []
            for node in nodes {
                guard let port = node[field: "port"]?.int64 ?? node[field: "tls-port"]?.int64 else { continue }
                var host = node[field: "endpoint"]?.string ?? ""
                if host.isEmpty || host == "?" { host = node[field: "ip"]?.string ?? "" }
                if host.isEmpty || host == "?" { host = fallbackHost }
                let address = NodeAddress.tcp(host: host, port: Int(port))
                if node[field: "role"]?.string == "master" {
                    primary = address
                } else if node[field: "health"]?.string == "online" {
                    replicas.append(address)
                }
            }
            // A shard with no slots (a new, empty primary, or replicas of a failed one) serves nothing.
            guard let primary, !ranges.isEmpty else { continue }
            shards.append(Shard(primary: primary, replicas: replicas, slots: ranges))
        }
        self.init(shards: shards)
    }

    /// The map from a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, …], replicas…], …]`.
    public init(slots reply: RESP3Value, fallbackHost: String) throws(Malformed) {
        guard let entries = reply.array else { throw Malformed(detail: "CLUSTER SLOTS: not an array") }
        var byPrimary: [NodeAddress: Shard] = [:]
        var order: [NodeAddress] = []
        for entry in entries {
            guard let parts = entry.array, parts.count >= 3, let low = parts[0].int64, let high = parts[1].int64,
                  low <= high
            else { throw Malformed(detail: "CLUSTER SLOTS: bad entry") }
            func address(_ node: RESP3Value) -> NodeAddress? {
                guard let fields = node.array, fields.count >= 2, let port = fields[1].int64 else { return nil }
                var host = fields[0].string ?? ""
                if host.isEmpty || host == "?" { host = fallbackHost }
                return .tcp(host: host, port: Int(port))
            }
            guard let primary = address(parts[2]) else { throw Malformed(detail: "CLUSTER SLOTS: bad node") }
            if byPrimary[primary] == nil {
                byPrimary[primary] = Shard(primary: primary, replicas: parts.dropFirst(3).compactMap(address), slots: [])
                order.append(primary)
            }
            byPrimary[primary]!.slots.append(Int(low)...Int(high))
        }
        self.init(shards: order.map { byPrimary[$0]! })
    }
}

// The upstream tier over Redis or Valkey: each `Upstream.Tier` call as one script (or one
// command) through the RESP3 client, replies read back into entries and versions, and the
// client's tracking events passed on as the tier's invalidations.

import HalcyonCache
import HalcyonSupport
import HalcyonUpstream
import NIOCore

/// `Upstream.Tier` on a `RedisClient`, with the layout of `KeyLayout`.
///
/// ```swift
/// let tier = RedisTier(configuration: .init(seeds: [.tcp(host: "127.0.0.1", port: 6379)]), eventLoop: group.next())
/// try await tier.start().get()
/// tier.observe(observer)   // the shared store, which keeps copies coherent
/// tier.get("user:1") { result in … }
/// ```
///
/// Scripts are sent by SHA (`EVALSHA`); a server that does not know one (new, restarted,
/// `SCRIPT FLUSH`ed) answers `NOSCRIPT`, and the script is sent whole once (`EVAL`, which
/// also caches it). An `.unavailable` failure is any transport failure or cluster outage
/// (`RedisError.isUnavailable`), `.unauthorized` when the cause is the server refusing
/// the credentials (`WRONGPASS`, `NOAUTH`); other error replies are `.refused`.
///
/// Threading: thread-safe. Completions run on the client's event loop; observers are
/// called there too, in sequence order (`observers` is a `Locked` list, read per event).
public final class RedisTier: Upstream.Tier {
    public let client: RedisClient
    private let relay: Relay

    /// Hands the client's events to the observers.
    ///
    /// Threading: thread-safe; `observers` is a `Locked`.
    final class Relay: Sendable {
        let observers = Locked<[any Upstream.Observer]>([])

        func deliver(_ event: RedisClient.Event) {
            let translated: Upstream.Event
            switch event {
            case .invalidated(let keys, let sequence):
                translated = .invalidated(keys: keys.map { CacheKey(utf8: $0.readableBytesView) }, sequence: sequence)
            case .flushed(_, let sequence):
                translated = .flushed(sequence: sequence)
            }
            for observer in observers.withLock({ $0 }) { observer.upstream(translated) }
        }
    }

    /// - Parameter onNodeChange: hears the client's node outages (`RedisClient.NodeChange`).
    public init(
        configuration: RedisClient.Configuration, eventLoop: EventLoop,
        onNodeChange: @escaping @Sendable (RedisClient.NodeChange) -> Void = { _ in }
    ) {
        let relay = Relay()
        self.relay = relay
        client = RedisClient(configuration: configuration, eventLoop: eventLoop, onEvent: { relay.deliver($0) }, onNodeChange: onNodeChange)
    }

    /// Connects and learns the topology.
    public func start() -> EventLoopFuture<Void> { client.start() }

    /// Closes every connection.
    public func shutdown() -> EventLoopFuture<Void> { client.shutdown() }

    public func observe(_ observer: any Upstream.Observer) {
        relay.observers.withLock { $0.append(observer) }
    }

    // MARK: Tier

    public func get(_ key: CacheKey, completion: @escaping @Sendable (Result<Upstream.Entry?, Upstream.Failure>) -> Void) {
        run(Script.read, valueKey: key, []) { (reply: RESP3Value, sequence: UInt64) throws -> Upstream.Entry? in
            guard let parts = reply.array, parts.count >= 4, let bytes = parts[0].bytes,
                  let version = parts[2].string.flatMap(UInt64.init), let flags = parts[3].string.flatMap(UInt32.init)
            else {
                if reply.isNull || reply == .boolean(false) { return nil }
                throw RedisError.unexpectedReply("read: \(reply)")
            }
            return Upstream.Entry(
                entry: CacheEntry(bytes: Array(buffer: bytes), flags: flags, version: version),
                timeToLive: RedisTier.timeToLive(parts[1]), sequence: sequence,
                slidingTimeToLive: parts.count > 4 ? parts[4].string.flatMap(Int64.init) : nil)
        }.whenSuccess(completion)
    }

    public func set(
        _ key: CacheKey, _ entry: CacheEntry, lifetime: Upstream.Lifetime,
        completion: @escaping @Sendable (Result<Upstream.Written, Upstream.Failure>) -> Void
    ) {
        run(Script.set, valueKey: key, RedisTier.storeArguments(entry, lifetime), read: RedisTier.written).whenSuccess(completion)
    }

    public func add(
        _ key: CacheKey, _ entry: CacheEntry, lifetime: Upstream.Lifetime,
        completion: @escaping @Sendable (Result<Upstream.Written, Upstream.Failure>) -> Void
    ) {
        run(Script.add, valueKey: key, RedisTier.storeArguments(entry, lifetime), read: RedisTier.written).whenSuccess(completion)
    }

    public func compareAndSet(
        _ key: CacheKey, _ entry: CacheEntry, version: UInt64, lifetime: Upstream.Lifetime,
        completion: @escaping @Sendable (Result<Upstream.Written, Upstream.Failure>) -> Void
    ) {
        run(Script.compareAndSet, valueKey: key,
            [ByteBuffer(bytes: entry.bytes), .init(string: String(entry.flags)), RedisTier.argument(lifetime), .init(string: String(version)),
             RedisTier.slideArgument(lifetime)],
            read: RedisTier.written).whenSuccess(completion)
    }

    public func increment(
        _ key: CacheKey, by delta: Int64, initial: Int64?, flags: UInt32, lifetime: Upstream.Lifetime,
        completion: @escaping @Sendable (Result<Upstream.Incremented, Upstream.Failure>) -> Void
    ) {
        // An empty initial tells the script to refuse a missing key instead of creating it.
        let arguments: [ByteBuffer] = [.init(string: String(delta)), .init(string: initial.map { String($0) } ?? ""), .init(string: String(flags)),
                                       RedisTier.argument(lifetime)]
        execute(Script.increment, keys: [key.string, KeyLayout.meta(key.string)], arguments).map { result -> Result<Upstream.Incremented, Upstream.Failure> in
            switch result {
            case .success(let pair):
                let (reply, sequence) = pair
                guard let parts = reply.array, parts.count == 3, let sum = parts[0].int64,
                      let version = parts[1].string.flatMap(UInt64.init) else {
                    return .failure(.refused("unexpected reply to incr: \(reply)"))
                }
                return .success(.value(sum, Upstream.Written(stored: true, version: version,
                                                             timeToLive: RedisTier.timeToLive(parts[2]), sequence: sequence)))
            case .failure(let error):
                if case .server(let text)? = error as? RedisError {
                    if text.contains("NOTINT") { return .success(.notAnInteger) }
                    if text.contains("OVERFLOW") { return .success(.overflow) }
                    if text.contains("MISSING") { return .success(.missing) }
                }
                return .failure(RedisTier.failure(error))
            }
        }.whenSuccess(completion)
    }

    public func touch(_ key: CacheKey, lifetime: Upstream.Lifetime, completion: @escaping @Sendable (Result<Bool, Upstream.Failure>) -> Void) {
        run(Script.touch, valueKey: key, [RedisTier.argument(lifetime == .keep ? .never : lifetime), RedisTier.slideArgument(lifetime)]) { (reply: RESP3Value, _: UInt64) -> Bool in
            reply.array?.first?.int64 == 1
        }.whenSuccess(completion)
    }

    public func slide(_ key: CacheKey, version: UInt64, lifetime: Int64, completion: @escaping @Sendable (Result<Upstream.Renewal, Upstream.Failure>) -> Void) {
        run(Script.slide, valueKey: key, [.init(string: String(version)), .init(string: String(lifetime))], read: RedisTier.renewal)
            .whenSuccess(completion)
    }

    public func renew(_ key: CacheKey, version: UInt64, lifetime: Upstream.Lifetime, completion: @escaping @Sendable (Result<Upstream.Renewal, Upstream.Failure>) -> Void) {
        let arguments = [ByteBuffer(string: String(version)), RedisTier.argument(lifetime == .keep ? .never : lifetime), RedisTier.slideArgument(lifetime)]
        run(Script.renew, valueKey: key, arguments, read: RedisTier.renewal).whenSuccess(completion)
    }

    /// The reply of `Script.slide` and `Script.renew`: {1, pttl} or {0}.
    static func renewal(_ reply: RESP3Value, _: UInt64) -> Upstream.Renewal {
        guard let parts = reply.array, parts.first?.int64 == 1, parts.count > 1 else { return .changed }
        return .renewed(timeToLive: RedisTier.timeToLive(parts[1]))
    }

    public func remove(_ key: CacheKey, completion: @escaping @Sendable (Result<Bool, Upstream.Failure>) -> Void) {
        run(Script.remove, valueKey: key, []) { (reply: RESP3Value, _: UInt64) -> Bool in (reply.int64 ?? 0) > 0 }.whenSuccess(completion)
    }

    /// The writes go out as one `RedisClient.sendBatch`: one pipelined write per node, the
    /// reply when every one has answered. A key named twice goes in a second round, after
    /// the first has answered, so that a `NOSCRIPT` retry (below) never reorders a key's
    /// writes; within a round every key is distinct.
    public func writeMany(_ writes: [Upstream.Write], completion: @escaping @Sendable ([Result<Upstream.Written, Upstream.Failure>]) -> Void) {
        var rounds: [[Int]] = []
        var seen: [CacheKey: Int] = [:]
        for (index, write) in writes.enumerated() {
            let round = seen[write.key, default: 0]
            seen[write.key] = round + 1
            if round == rounds.count { rounds.append([]) }
            rounds[round].append(index)
        }
        writeRounds(writes, rounds[...], results: Array(repeating: nil, count: writes.count), completion)
    }

    private func writeRounds(
        _ writes: [Upstream.Write], _ rounds: ArraySlice<[Int]>, results: [Result<Upstream.Written, Upstream.Failure>?],
        _ completion: @escaping @Sendable ([Result<Upstream.Written, Upstream.Failure>]) -> Void
    ) {
        guard let round = rounds.first else { return completion(results.map { $0! }) }
        let calls = round.map { index -> (Script, [String], [ByteBuffer]) in
            switch writes[index] {
            case .set(let key, let entry, let lifetime):
                return (Script.set, [key.string, KeyLayout.meta(key.string)], RedisTier.storeArguments(entry, lifetime))
            case .remove(let key):
                return (Script.remove, [key.string, KeyLayout.meta(key.string)], [])
            }
        }
        executeMany(calls).whenSuccess { outcomes in
            var results = results
            for (position, index) in round.enumerated() {
                results[index] = outcomes[position].mapError(RedisTier.failure).flatMap { pair in
                    Result {
                        if case .remove = writes[index] {
                            return Upstream.Written(stored: (pair.0.int64 ?? 0) > 0, version: nil, timeToLive: nil, sequence: pair.1)
                        }
                        return try RedisTier.written(pair.0, pair.1)
                    }.mapError(RedisTier.failure)
                }
            }
            self.writeRounds(writes, rounds.dropFirst(), results: results, completion)
        }
    }

    public func removePrefix(
        _ prefix: CacheKey, where include: @escaping @Sendable (CacheKey) -> Bool,
        completion: @escaping @Sendable (Result<Int, Upstream.Failure>) -> Void
    ) {
        let pattern = ByteBuffer(bytes: RedisTier.globEscaped(prefix) + [UInt8(ascii: "*")])
        client.primaries().flatMap { nodes in
            EventLoopFuture.whenAllSucceed(nodes.map { self.removeMatching(pattern, include, on: $0, cursor: "0", removed: 0) },
                                           on: self.client.eventLoop)
        }
        .map { Result<Int, Upstream.Failure>.success($0.reduce(0, +)) }
        .recover { Result<Int, Upstream.Failure>.failure(RedisTier.failure($0)) }
        .whenSuccess(completion)
    }

    /// `SCAN MATCH prefix* COUNT limit` on one primary per page, the primaries in
    /// address order. The cursor is `node index:SCAN cursor:last key listed`: a SCAN
    /// reply may hold more than `limit` keys, so a page lists them in byte order up to
    /// the limit and the next page repeats the same SCAN step and goes on after the last
    /// key listed. A resharding or failover during the listing may repeat or miss keys.
    public func listKeys(prefix: CacheKey, cursor: String?, limit: Int, completion: @escaping @Sendable (Result<Upstream.KeyPage, Upstream.Failure>) -> Void) {
        let position = cursor.flatMap(RedisTier.ScanPosition.init) ?? RedisTier.ScanPosition(node: 0, scan: "0", after: nil)
        let limit = max(1, limit)
        client.primaries().flatMap { nodes -> EventLoopFuture<Upstream.KeyPage> in
            let nodes = nodes.sorted { $0.description < $1.description }
            guard position.node < nodes.count else { return self.client.eventLoop.makeSucceededFuture(.init(keys: [], cursor: nil)) }
            let pattern = ByteBuffer(bytes: RedisTier.globEscaped(prefix) + [UInt8(ascii: "*")])
            return self.client.send([.init(string: "SCAN"), .init(string: position.scan), .init(string: "MATCH"), pattern,
                                     .init(string: "COUNT"), .init(string: String(limit))], route: .node(nodes[position.node]))
                .flatMapThrowing { reply -> Upstream.KeyPage in
                    guard let parts = reply.array, parts.count == 2, let next = parts[0].string, let found = parts[1].array else {
                        throw RedisError.unexpectedReply("SCAN: \(reply)")
                    }
                    let keys = found.compactMap(\.bytes).map { CacheKey(utf8: $0.readableBytesView) }.filter(RedisTier.isValueKey)
                        .filter { key in position.after.map { $0.utf8.lexicographicallyPrecedes(key.utf8) } ?? true }
                        .sorted()
                    let page = Array(keys.prefix(limit))
                    let following: RedisTier.ScanPosition?
                    if keys.count > page.count {
                        following = .init(node: position.node, scan: position.scan, after: page.last?.string)
                    } else if next != "0" {
                        following = .init(node: position.node, scan: next, after: nil)
                    } else if position.node + 1 < nodes.count {
                        following = .init(node: position.node + 1, scan: "0", after: nil)
                    } else {
                        following = nil
                    }
                    return Upstream.KeyPage(keys: page, cursor: following?.text)
                }
        }
        .map { Result<Upstream.KeyPage, Upstream.Failure>.success($0) }
        .recover { Result<Upstream.KeyPage, Upstream.Failure>.failure(RedisTier.failure($0)) }
        .whenSuccess(completion)
    }

    /// Where a key listing stands: which primary, its SCAN cursor, the last key listed
    /// from the current SCAN step.
    struct ScanPosition {
        var node: Int
        var scan: String
        var after: String?

        init(node: Int, scan: String, after: String?) {
            self.node = node
            self.scan = scan
            self.after = after
        }

        init?(_ text: String) {
            let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, let node = Int(parts[0]), node >= 0, UInt64(parts[1]) != nil else { return nil }
            self.init(node: node, scan: String(parts[1]), after: parts[2].isEmpty ? nil : String(parts[2]))
        }

        var text: String { "\(node):\(scan):\(after ?? "")" }
    }

    /// Whether a key Redis holds is a value, not Halcyon's metadata or lease key beside one.
    static func isValueKey(_ key: CacheKey) -> Bool {
        key.utf8.firstRange(of: ("}" + KeyLayout.metaInfix).utf8) == nil
            && key.utf8.firstRange(of: ("}" + KeyLayout.leaseInfix).utf8) == nil
    }

    public func leaseStatus(_ key: CacheKey, completion: @escaping @Sendable (Result<Int64??, Upstream.Failure>) -> Void) {
        let leaseKey = ByteBuffer(string: KeyLayout.lease(key.string))
        client.send([.init(string: "PTTL"), leaseKey], route: .key(leaseKey))
            .map { reply -> Result<Int64??, Upstream.Failure> in
                guard let ms = reply.int64 else { return .failure(.refused("unexpected reply to PTTL: \(reply)")) }
                switch ms {
                case -2: return .success(nil)
                case -1: return .success(.some(nil))
                default: return .success(.some(ms))
                }
            }
            .recover { Result<Int64??, Upstream.Failure>.failure(RedisTier.failure($0)) }
            .whenSuccess(completion)
    }

    public func acquireLease(
        _ key: CacheKey, token: String, lifetime: Int64,
        completion: @escaping @Sendable (Result<Upstream.LeaseAttempt, Upstream.Failure>) -> Void
    ) {
        let leaseKey = KeyLayout.lease(key.string)
        execute(Script.acquireLease, keys: [leaseKey], [.init(string: token), .init(string: String(max(lifetime, 1)))])
            .map { result -> Result<Upstream.LeaseAttempt, Upstream.Failure> in
                result.mapError(RedisTier.failure).map { pair -> Upstream.LeaseAttempt in
                    let (reply, sequence) = pair
                    guard let parts = reply.array, parts.first?.int64 == 0 else { return .acquired }
                    return .held(timeToLive: parts.count > 1 ? RedisTier.timeToLive(parts[1]) : nil, leaseKey: CacheKey(leaseKey),
                                 sequence: sequence)
                }
            }.whenSuccess(completion)
    }

    public func releaseLease(_ key: CacheKey, token: String, completion: @escaping @Sendable (Result<Bool, Upstream.Failure>) -> Void) {
        execute(Script.releaseLease, keys: [KeyLayout.lease(key.string)], [.init(string: token)])
            .map { result -> Result<Bool, Upstream.Failure> in
                result.mapError(RedisTier.failure).map { pair in (pair.0.int64 ?? 0) > 0 }
            }
            .whenSuccess(completion)
    }

    // MARK: Running scripts

    /// Runs `script` on `valueKey` and its metadata key and reads the reply with `read`.
    private func run<T: Sendable>(
        _ script: Script, valueKey: CacheKey, _ arguments: [ByteBuffer],
        read: @escaping @Sendable (RESP3Value, UInt64) throws -> T
    ) -> EventLoopFuture<Result<T, Upstream.Failure>> {
        execute(script, keys: [valueKey.string, KeyLayout.meta(valueKey.string)], arguments).map { result -> Result<T, Upstream.Failure> in
            result.mapError(RedisTier.failure).flatMap { pair in
                Result { try read(pair.0, pair.1) }.mapError(RedisTier.failure)
            }
        }
    }

    /// `EVALSHA`, then `EVAL` when the server does not have the script; never fails (the
    /// outcome is the future's value), routed by the first key.
    func execute(_ script: Script, keys: [String], _ arguments: [ByteBuffer]) -> EventLoopFuture<Result<(RESP3Value, UInt64), Error>> {
        let keyBuffers = keys.map { ByteBuffer(string: $0) }
        let tail = [ByteBuffer(string: String(keys.count))] + keyBuffers + arguments
        let route = RedisClient.Route.key(keyBuffers[0])
        return client.sendSequenced([.init(string: "EVALSHA"), .init(string: script.sha)] + tail, route: route)
            .flatMapError { error in
                guard let redis = error as? RedisError, redis.serverCode == "NOSCRIPT" else {
                    return self.client.eventLoop.makeFailedFuture(error)
                }
                return self.client.sendSequenced([.init(string: "EVAL"), .init(string: script.source)] + tail, route: route)
            }
            .map { Result<(RESP3Value, UInt64), Error>.success($0) }
            .recover { Result<(RESP3Value, UInt64), Error>.failure($0) }
    }

    /// `execute` for several scripts at once, as one `sendBatch`; those the server did not
    /// have (`NOSCRIPT`) go again whole (`EVAL`) in a second batch. Never fails.
    func executeMany(_ calls: [(Script, [String], [ByteBuffer])]) -> EventLoopFuture<[Result<(RESP3Value, UInt64), Error>]> {
        let tails = calls.map { call in [ByteBuffer(string: String(call.1.count))] + call.1.map { ByteBuffer(string: $0) } + call.2 }
        let routes = calls.map { RedisClient.Route.key(ByteBuffer(string: $0.1[0])) }
        let first = calls.indices.map { RedisClient.Command([.init(string: "EVALSHA"), .init(string: calls[$0].0.sha)] + tails[$0], route: routes[$0]) }
        return client.sendBatch(first).flatMap { outcomes in
            let missing = outcomes.indices.filter { index in
                guard case .failure(let error) = outcomes[index], let redis = error as? RedisError else { return false }
                return redis.serverCode == "NOSCRIPT"
            }
            guard !missing.isEmpty else { return self.client.eventLoop.makeSucceededFuture(outcomes) }
            let again = missing.map { RedisClient.Command([.init(string: "EVAL"), .init(string: calls[$0].0.source)] + tails[$0], route: routes[$0]) }
            return self.client.sendBatch(again).map { retried in
                var outcomes = outcomes
                for (position, index) in missing.enumerated() { outcomes[index] = retried[position] }
                return outcomes
            }
        }
    }

    private func removeMatching(
        _ pattern: ByteBuffer, _ include: @escaping @Sendable (CacheKey) -> Bool, on node: NodeAddress, cursor: String, removed: Int
    ) -> EventLoopFuture<Int> {
        client.send([.init(string: "SCAN"), .init(string: cursor), .init(string: "MATCH"), pattern, .init(string: "COUNT"), .init(string: "1000")],
                    route: .node(node))
            .flatMap { reply in
                guard let parts = reply.array, parts.count == 2, let next = parts[0].string, let keys = parts[1].array else {
                    return self.client.eventLoop.makeFailedFuture(RedisError.unexpectedReply("SCAN: \(reply)"))
                }
                // Halcyon's own metadata and lease keys match only a prefix that starts with "{";
                // they go with their value key.
                let values = keys.compactMap(\.string).filter { RedisTier.isValueKey(CacheKey($0)) && include(CacheKey($0)) }
                // One page's removals go out together (one write to the node).
                return self.executeMany(values.map { (Script.remove, [$0, KeyLayout.meta($0)], []) }).flatMapThrowing { outcomes in
                    try outcomes.reduce(0) { $0 + Int(try $1.get().0.int64 ?? 0) }
                }.flatMap { count in
                    let total = removed + count
                    if next == "0" { return self.client.eventLoop.makeSucceededFuture(total) }
                    return self.removeMatching(pattern, include, on: node, cursor: next, removed: total)
                }
            }
    }

    // MARK: Reading replies

    static func written(_ reply: RESP3Value, _ sequence: UInt64) throws -> Upstream.Written {
        guard let parts = reply.array, let stored = parts.first?.int64 else {
            throw RedisError.unexpectedReply("\(reply)")
        }
        let version = parts.count > 1 ? parts[1].string.flatMap(UInt64.init) : nil
        let ttl = parts.count > 2 ? timeToLive(parts[2]) : nil
        return Upstream.Written(stored: stored == 1, version: version, timeToLive: ttl, sequence: sequence)
    }

    /// A PTTL reply: milliseconds, or nil for "no expiry" (-1) and "no key" (-2).
    static func timeToLive(_ reply: RESP3Value) -> Int64? {
        guard let ms = reply.int64, ms >= 0 else { return nil }
        return ms
    }

    static func argument(_ lifetime: Upstream.Lifetime) -> ByteBuffer {
        switch lifetime {
        case .never: return ByteBuffer(string: "never")
        case .keep: return ByteBuffer(string: "keep")
        case .milliseconds(let ms), .sliding(let ms): return ByteBuffer(string: String(max(ms, 1)))
        }
    }

    /// The sliding lifetime a store records beside the value (metadata `s`); empty for none.
    static func slideArgument(_ lifetime: Upstream.Lifetime) -> ByteBuffer {
        ByteBuffer(string: lifetime.slidingMilliseconds.map { String(max($0, 1)) } ?? "")
    }

    /// The arguments of `Script.set` and `Script.add`.
    static func storeArguments(_ entry: CacheEntry, _ lifetime: Upstream.Lifetime) -> [ByteBuffer] {
        [ByteBuffer(bytes: entry.bytes), .init(string: String(entry.flags)), argument(lifetime), slideArgument(lifetime)]
    }

    static func failure(_ error: Error) -> Upstream.Failure {
        guard let redis = error as? RedisError else { return .refused("\(error)") }
        if redis.failureCause?.isAuthentication == true { return .unauthorized(redis.description) }
        return redis.isUnavailable ? .unavailable(redis.description) : .refused(redis.description)
    }

    /// `prefix`'s bytes with the glob characters of `SCAN MATCH` escaped, byte by byte (a
    /// `[` followed by a combining mark is one `Character`, and still a glob byte).
    static func globEscaped(_ prefix: CacheKey) -> [UInt8] {
        var escaped: [UInt8] = []
        escaped.reserveCapacity(prefix.count + 1)
        for byte in prefix.utf8 {
            if "*?[]\\".utf8.contains(byte) { escaped.append(UInt8(ascii: "\\")) }
            escaped.append(byte)
        }
        return escaped
    }
}

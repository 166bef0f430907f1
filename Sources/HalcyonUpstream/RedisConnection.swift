// One connection to one Redis or Valkey server: connect (TCP or Unix socket), speak
// RESP3 after `HELLO 3` (with AUTH), optionally turn on client tracking, then carry
// pipelined commands and hand push messages to the owner.

#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import NIOPosix

/// A connected, greeted RESP3 connection.
///
/// ```swift
/// let connection = try await RedisConnection.connect(to: .tcp(host: "127.0.0.1", port: 6379),
///                                                  on: loop, options: .init()).get()
/// let reply = try await connection.send(["SET", "k", "v"]).get()   // .simpleString("OK")
/// ```
///
/// Commands sent from any thread keep the order of their calls from that thread: each
/// is written on the channel's event loop in the order it arrives there, and replies
/// complete their futures in that order. Error replies complete futures normally (as
/// `.simpleError`/`.blobError`); only transport failures fail them.
///
/// Threading: thread-safe. Its only mutable state is the handler, reached on `eventLoop`
/// through a `NIOLoopBound`.
public final class RedisConnection: Sendable {
    /// What is said right after connecting.
    public struct Options: Sendable, CustomStringConvertible {
        /// The ACL user for AUTH (nil = "default" when a password is given).
        public var username: String?
        /// The password for AUTH; read from a file by the caller, never logged
        /// (`description` hides it).
        public var password: String?
        /// `CLIENT SETNAME` (via HELLO). Default "halcyon".
        public var clientName = "halcyon"
        /// The `CLIENT TRACKING ON` arguments to send after HELLO, or nil for none.
        public var tracking: [String]?
        /// `SELECT` this database when not 0 (standalone servers only). Default 0.
        public var database = 0
        /// How long a TCP connect may take. Default 2 s.
        public var connectTimeout = TimeAmount.seconds(2)
        /// How long a command may wait for its reply before the connection is closed.
        /// Default 5 s.
        public var commandTimeout = TimeAmount.seconds(5)
        /// Liveness: after this long without reading anything from the server, a `PING` is
        /// sent. Default 200 ms.
        public var heartbeatInterval = TimeAmount.milliseconds(200)
        /// Liveness: when a reply (a command's or a heartbeat's) has been owed this long
        /// with nothing read from the server, the connection counts as dead and is closed
        /// (`RedisError.heartbeatMissed`). Default 500 ms. Checked every half
        /// `heartbeatInterval`, so a path that goes silent is noticed at the latest
        /// `livenessBound` after its last byte.
        public var deadAfter = TimeAmount.milliseconds(500)
        /// The decoder's bounds.
        public var limits = RESP3Parser.Limits()

        /// The longest a dead path can go unnoticed: a heartbeat is sent at the latest a
        /// tick after `heartbeatInterval` of silence, found overdue at the latest a tick
        /// after `deadAfter`, and judged dead at the next tick (a tick is half the
        /// interval): 1 s with the defaults.
        public var livenessBound: TimeAmount {
            heartbeatInterval + deadAfter + .nanoseconds(heartbeatInterval.nanoseconds * 3 / 2)
        }

        public init() {}

        public var description: String {
            "user=\(username ?? "default") password=\(password == nil ? "none" : "(hidden)") name=\(clientName) "
                + "tracking=\(tracking?.joined(separator: " ") ?? "off") db=\(database)"
        }
    }

    public let address: NodeAddress
    public let channel: Channel
    public var eventLoop: EventLoop { channel.eventLoop }
    /// The server's HELLO reply (`server`, `version`, `proto`, `id`, `mode`, `role`, …).
    public let hello: RESP3Value
    private let handler: NIOLoopBound<RedisCommandHandler>

    private init(address: NodeAddress, channel: Channel, hello: RESP3Value, handler: NIOLoopBound<RedisCommandHandler>) {
        self.address = address
        self.channel = channel
        self.hello = hello
        self.handler = handler
    }

    /// Connects to `address` on `eventLoop` and greets the server.
    /// - Parameter onPush: called on `eventLoop` with every push message (invalidations).
    /// - Returns: a future that fails with `.unavailable` when no connection could be made
    ///   and `.handshake` when the server refused the greeting (the channel is closed then).
    public static func connect(
        to address: NodeAddress, on eventLoop: EventLoop, options: Options,
        onPush: @escaping @Sendable (RESP3Value) -> Void = { _ in }
    ) -> EventLoopFuture<RedisConnection> {
        let node = address.description
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(options.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let commands = RedisCommandHandler(
                        node: node, eventLoop: channel.eventLoop, commandTimeout: options.commandTimeout,
                        heartbeatInterval: options.heartbeatInterval, deadAfter: options.deadAfter, onPush: onPush)
                    // Bytes count as signs of life as they arrive, before a long reply is whole.
                    try channel.pipeline.syncOperations.addHandler(BytesHeard(commands))
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(RESP3Decoder(limits: options.limits)))
                    try channel.pipeline.syncOperations.addHandler(commands)
                }
            }
        let connected: EventLoopFuture<Channel>
        switch address {
        case .tcp(let host, let port): connected = bootstrap.connect(host: host, port: port)
        case .unix(let path): connected = bootstrap.connect(unixDomainSocketPath: path)
        }
        return connected
            .flatMapErrorThrowing { error in throw RedisError.unavailable(node: node, detail: connectFailure(error)) }
            .flatMap { channel in
                let bound: NIOLoopBound<RedisCommandHandler>
                do {
                    bound = NIOLoopBound(try channel.pipeline.syncOperations.handler(type: RedisCommandHandler.self), eventLoop: channel.eventLoop)
                } catch {
                    channel.close(promise: nil)
                    return channel.eventLoop.makeFailedFuture(RedisError.unavailable(node: node, detail: "\(error)"))
                }
                return greet(channel: channel, handler: bound, options: options).map { hello in
                    RedisConnection(address: address, channel: channel, hello: hello, handler: bound)
                }.flatMapError { error in
                    channel.close(promise: nil)
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
    }

    /// A connect failure in words that start with its `FailureCause` where one is known.
    private static func connectFailure(_ error: Error) -> String {
        func cause(_ error: Error) -> FailureCause? {
            if let error = error as? IOError, error.errnoCode == ECONNREFUSED { return .refused }
            if case ChannelError.connectTimeout = error { return .timedOut }
            return nil
        }
        let causes = (error as? NIOConnectionError)?.connectionErrors.compactMap { cause($0.error) } ?? [cause(error)].compactMap { $0 }
        guard let first = causes.first else { return "\(error)" }
        return "\(first.rawValue): \(error)"
    }

    /// HELLO 3 (with AUTH and SETNAME), then CLIENT TRACKING and SELECT, pipelined.
    private static func greet(
        channel: Channel, handler: NIOLoopBound<RedisCommandHandler>, options: Options
    ) -> EventLoopFuture<RESP3Value> {
        var hello = ["HELLO", "3"]
        if let password = options.password {
            hello += ["AUTH", options.username ?? "default", password]
        }
        hello += ["SETNAME", options.clientName]
        var commands = [hello]
        if let tracking = options.tracking { commands.append(["CLIENT", "TRACKING", "ON"] + tracking) }
        if options.database != 0 { commands.append(["SELECT", String(options.database)]) }
        var encoded = channel.allocator.buffer(capacity: 256)
        for command in commands { encoded.writeRESP3Command(command.map { ByteBuffer(string: $0) }) }
        let names = commands.map { "\($0[0]) \($0[1])" }
        let replies = handler.value.send(encoded, count: commands.count)
        return EventLoopFuture.whenAllSucceed(replies, on: channel.eventLoop).flatMapThrowing { replies in
            for (name, reply) in zip(names, replies) {
                if let text = reply.errorText {
                    // The command's name only: HELLO's arguments hold the password.
                    throw RedisError.handshake("\(name): \(text)")
                }
            }
            guard replies[0][field: "proto"]?.int64 == 3 else {
                throw RedisError.handshake("the server did not switch to RESP3")
            }
            return replies[0]
        }
    }

    /// Sends one command; the future holds its reply (an error reply is a value).
    public func send(_ arguments: [ByteBuffer]) -> EventLoopFuture<RESP3Value> {
        var encoded = channel.allocator.buffer(capacity: 64)
        encoded.writeRESP3Command(arguments)
        return submit(encoded, count: 1)[0]
    }

    /// Sends one command given as text arguments.
    public func send(_ arguments: [String]) -> EventLoopFuture<RESP3Value> {
        send(arguments.map { ByteBuffer(string: $0) })
    }

    /// Sends `commands` back to back in one write; one future per command, in order.
    public func pipeline(_ commands: [[ByteBuffer]]) -> [EventLoopFuture<RESP3Value>] {
        var encoded = channel.allocator.buffer(capacity: 64 * commands.count)
        for command in commands { encoded.writeRESP3Command(command) }
        return submit(encoded, count: commands.count)
    }

    private func submit(_ encoded: ByteBuffer, count: Int) -> [EventLoopFuture<RESP3Value>] {
        if eventLoop.inEventLoop { return handler.value.send(encoded, count: count) }
        let promises = (0..<count).map { _ in eventLoop.makePromise(of: RESP3Value.self) }
        eventLoop.execute { [handler] in
            for (future, promise) in zip(handler.value.send(encoded, count: count), promises) {
                future.cascade(to: promise)
            }
        }
        return promises.map(\.futureResult)
    }

    /// Completes when the connection has closed, for any reason.
    public var closeFuture: EventLoopFuture<Void> { channel.closeFuture }

    /// Why the connection closed when this side closed it (`.timedOut`,
    /// `.heartbeatMissed`, a protocol error); nil while open or when the server or the
    /// network closed it. Only on `eventLoop`.
    public var closeReason: RedisError? { handler.value.closeReason }

    /// Closes the connection; waiting commands fail with `.connectionClosed`.
    @discardableResult
    public func close() -> EventLoopFuture<Void> {
        channel.close().flatMapError { _ in self.eventLoop.makeSucceededVoidFuture() }
    }
}

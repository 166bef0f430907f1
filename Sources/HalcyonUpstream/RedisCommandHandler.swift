// The pipeline of one connection: commands go out in order, replies come back in the same
// order and complete the oldest waiting command, push messages go to their own sink, and
// a connection that closes or stalls fails every command still waiting.

import NIOCore

/// Matches replies to commands on one connection (RESP3 answers in order) and routes push
/// messages (`>`) around the queue.
///
/// Commands written in one event-loop turn share one flush. A command left unanswered for
/// `commandTimeout` closes the connection: its place in the pipeline cannot be skipped, so
/// every later reply would be matched to the wrong command.
///
/// **Liveness.** A TCP path that stops forwarding without a FIN or RST (a partition, a
/// stopped server) looks like an idle connection for ever, while the server may have
/// dropped its tracking state and writes elsewhere go unannounced. So every
/// `heartbeatInterval / 2` a tick checks the connection: when a reply has been owed for
/// `deadAfter` (counted from the write of its command or the last bytes read, whichever
/// is later) with nothing read meanwhile, at two ticks in a row, the connection is closed with
/// `.heartbeatMissed`, exactly as if the server had closed it; when nothing is owed and
/// nothing has been read for `heartbeatInterval`, a `PING` is sent (its reply only
/// proves the path). So a silent path is noticed at the latest `heartbeatInterval +
/// deadAfter + heartbeatInterval` after its last byte, on an idle connection as on a busy
/// one; a connection that reads steadily sends no heartbeat at all.
///
/// Threading: loop-bound (`Sendable` unavailable); `RedisConnection` reaches it only on
/// its channel's event loop.
final class RedisCommandHandler: ChannelDuplexHandler {
    typealias InboundIn = RESP3Value
    typealias OutboundIn = Never
    typealias OutboundOut = ByteBuffer

    /// A command waiting for its reply.
    private struct Waiting {
        var promise: EventLoopPromise<RESP3Value>
        var deadline: NIODeadline
    }

    private var waiting = CircularBuffer<Waiting>()
    private var context: ChannelHandlerContext?
    private var flushScheduled = false
    private var timer: Scheduled<Void>?
    private var closedError: RedisError?
    private let commandTimeout: TimeAmount
    private let heartbeatInterval: TimeAmount
    private let deadAfter: TimeAmount
    /// The last time something was read: a `PING` goes after `heartbeatInterval` of this.
    private var lastRead = NIODeadline.now()
    /// While a reply is owed: since when, counted from the later of the last read and the
    /// moment the oldest unanswered command was written to the socket.
    private var owedSince: NIODeadline?
    /// The `owedSince` a tick found overdue: still the same at the next tick, and the
    /// connection is dead.
    private var overdue: NIODeadline?
    private var heartbeat: Scheduled<Void>?
    /// Heartbeat `PING`s sent on this connection.
    private(set) var heartbeatsSent = 0
    private let node: String
    private let eventLoop: EventLoop
    /// Called with every push message, on the loop; a `let`, set once and never re-stored
    /// (Docs/STYLE.md, "No closure as the value of a generic container accessed `inout`").
    private let onPush: (RESP3Value) -> Void

    init(
        node: String, eventLoop: EventLoop, commandTimeout: TimeAmount, heartbeatInterval: TimeAmount, deadAfter: TimeAmount,
        onPush: @escaping (RESP3Value) -> Void
    ) {
        self.node = node
        self.eventLoop = eventLoop
        self.commandTimeout = commandTimeout
        self.heartbeatInterval = heartbeatInterval
        self.deadAfter = deadAfter
        self.onPush = onPush
    }

    /// Why the connection closed, when the client closed it (a timeout, a missed
    /// heartbeat, a protocol error); nil when the server or the network did.
    var closeReason: RedisError? { closedError }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { startHeartbeat(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        failAll(closedError ?? .connectionClosed(node: node))
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        startHeartbeat(context)
        context.fireChannelActive()
    }

    private func startHeartbeat(_ context: ChannelHandlerContext) {
        guard heartbeat == nil, heartbeatInterval > .zero else { return }
        lastRead = .now()
        scheduleTick(context)
    }

    private func scheduleTick(_ context: ChannelHandlerContext) {
        let tick = TimeAmount.nanoseconds(max(heartbeatInterval.nanoseconds / 2, 1_000_000))
        heartbeat = context.eventLoop.assumeIsolated().scheduleTask(in: tick) { [self] in
            heartbeat = nil
            checkLiveness()
        }
    }

    /// One heartbeat tick (see "Liveness"); schedules the next while the channel is open.
    private func checkLiveness() {
        guard let context, context.channel.isActive else { return }
        defer { if closedError == nil { scheduleTick(context) } }
        let now = NIODeadline.now()
        if let owed = owedSince {
            guard now - owed > deadAfter else { return }
            // Overdue. The loop may have been busy (or the machine starved) for that long
            // with bytes waiting unread, so the verdict is the next tick's: a loop turn,
            // whose reads come before its timers, runs in between.
            if overdue == owed {
                closedError = .heartbeatMissed(node: node)
                context.close(promise: nil)
            } else {
                overdue = owed
            }
        } else if waiting.isEmpty, now - lastRead >= heartbeatInterval {
            var ping = context.channel.allocator.buffer(capacity: 14)
            ping.writeRESP3Command([ByteBuffer(string: "PING")])
            heartbeatsSent += 1
            _ = send(ping, count: 1)
        }
    }

    /// Writes `commands` (already RESP3-encoded, `count` of them) and returns one future
    /// per command, in order. The flush happens once at the end of this loop turn.
    func send(_ commands: ByteBuffer, count: Int) -> [EventLoopFuture<RESP3Value>] {
        guard let context else {
            return (0..<count).map { _ in eventLoop.makeFailedFuture(closedError ?? RedisError.connectionClosed(node: node)) }
        }
        let deadline = NIODeadline.now() + commandTimeout
        var futures: [EventLoopFuture<RESP3Value>] = []
        futures.reserveCapacity(count)
        for _ in 0..<count {
            let promise = context.eventLoop.makePromise(of: RESP3Value.self)
            waiting.append(Waiting(promise: promise, deadline: deadline))
            futures.append(promise.futureResult)
        }
        // A reply is owed once the command is in the kernel's hands: a command waiting for
        // its flush behind a long loop turn, or a large one still being written, is not
        // yet the server's to answer. (One larger than the socket's buffer on a path that
        // is already silent never completes: the command timeout ends that.)
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.assumeIsolated().whenSuccess { [self] in
            if owedSince == nil, !waiting.isEmpty { owedSince = .now() }
        }
        context.write(wrapOutboundOut(commands), promise: written)
        if !flushScheduled {
            flushScheduled = true
            context.eventLoop.assumeIsolated().execute { [self] in
                flushScheduled = false
                self.context?.flush()
            }
        }
        armTimer()
        return futures
    }

    /// Bytes arrived (`BytesHeard`): the server is alive, whether or not they complete a reply.
    func heard() {
        lastRead = .now()
        if owedSince != nil { owedSince = lastRead }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let value = unwrapInboundIn(data)
        heard()
        if case .push = value.unattributed {
            onPush(value.unattributed)
            return
        }
        guard let head = waiting.popFirst() else {
            // A reply nobody asked for: the pipeline is out of step; close rather than
            // hand later replies to the wrong commands.
            closedError = .unexpectedReply("a reply with no command waiting")
            context.close(promise: nil)
            return
        }
        if waiting.isEmpty { owedSince = nil }
        head.promise.succeed(value)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        closedError = (error as? RedisError) ?? .connectionClosed(node: node)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(closedError ?? .connectionClosed(node: node))
        context.fireChannelInactive()
    }

    private func failAll(_ error: RedisError) {
        timer?.cancel()
        timer = nil
        heartbeat?.cancel()
        heartbeat = nil
        while let head = waiting.popFirst() { head.promise.fail(error) }
    }

    /// Keeps one timer, at the oldest waiting command's deadline.
    private func armTimer() {
        guard timer == nil, let head = waiting.first, let context else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: head.deadline) { [self] in
            timer = nil
            guard let head = waiting.first else { return }
            if head.deadline <= .now() {
                closedError = .timedOut(node: node)
                self.context?.close(promise: nil)
            } else {
                armTimer()
            }
        }
    }
}

@available(*, unavailable)
extension RedisCommandHandler: Sendable {}

/// Tells the connection's `RedisCommandHandler` of every read as it arrives, ahead of the
/// decoder: a reply of many megabytes on a slow link is progress long before it is whole.
///
/// Threading: loop-bound, like the handler it tells.
final class BytesHeard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let commands: RedisCommandHandler

    init(_ commands: RedisCommandHandler) { self.commands = commands }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        commands.heard()
        context.fireChannelRead(data)
    }
}

@available(*, unavailable)
extension BytesHeard: Sendable {}

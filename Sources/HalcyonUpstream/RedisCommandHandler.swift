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
    private let node: String
    private let eventLoop: EventLoop
    /// Called with every push message, on the loop; a `let`, set once (see the closure note
    /// in swift-on-linux-facts: never re-stored).
    private let onPush: (RESP3Value) -> Void

    init(node: String, eventLoop: EventLoop, commandTimeout: TimeAmount, onPush: @escaping (RESP3Value) -> Void) {
        self.node = node
        self.eventLoop = eventLoop
        self.commandTimeout = commandTimeout
        self.onPush = onPush
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        failAll(closedError ?? .connectionClosed(node: node))
        self.context = nil
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
        context.write(wrapOutboundOut(commands), promise: nil)
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

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let value = unwrapInboundIn(data)
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

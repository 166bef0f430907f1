// One client connection: the event plumbing between its channel, its parts (inbound
// queue, in-flight table, outbound buffer, lifecycle) and the dispatcher.

import Dispatch
import Foundation
import HalcyonCache
import HalcyonJSON
import HalcyonRPC
import Logging
import NIOCore

/// The protocol engine of one connection.
///
/// Request lines come from its `LineFrameDecoder`; each is parsed (jansson) and its
/// elements go through one start path (`start`) to the `Dispatcher`. The state lives in
/// parts this handler owns, each with its rules in its doc comment: `ConnectionInbound`
/// (read, not started), `ConnectionInFlight` (started, not answered), `ConnectionOutbound`
/// (answered, not handed to the channel) and `ConnectionLifecycle`. Replies come back on
/// whatever thread the connection's `CallbackQueue` picks and hop to the event loop
/// (`ReplyMailbox`), where this handler alone writes them.
///
/// Hot lines: a line of the hottest shapes (`HotLine`: a `cache.get` of one key, a
/// `cache.set` of one key to a plain value, with a number id) is read off its bytes and
/// answered or joined to the direct-write group without a document, a request or params
/// (`startHotLine`), under the conditions in which the paths below would take the request
/// it parses to, with the same checks, the same memory answer and the same direct write;
/// any other line, or one these paths decline, takes the ordinary path.
///
/// The synchronous path: a request with an id to a method with a memory answer (a `fast`
/// read memory holds, no queued write on its key; `server.ping`) is answered before its
/// line's processing returns. Under `untouch` its reply is encoded straight into the
/// outbound buffer and never enters the in-flight table: no later line (a cancel
/// included) can be read before it is written. Under the other policies the encoded reply
/// takes the delivery hop of the policy, with an in-flight entry, but no storage task;
/// except an `operationQueue`, whose deliveries are ordered by each request's priority,
/// which only the ordinary path carries.
///
/// The direct write path: a `cache.set` (or `cache.add`, `cache.cas`, `cache.incr`) with
/// an id, alone on its line, under `untouch`, that the journal can take at once
/// (`Dispatcher.directWrite`) joins its loop's `DirectWriteGroup`. One check on the start
/// path keeps order: anything but another direct write, or a memory read of a key none of
/// the waiting writes touches, commits the group first (and a memory read that misses
/// does before it is queued). The group hands this connection its outcomes by value, as a
/// `DirectWriteGroup.Committed` event through its own pipeline, where their replies join
/// the outbound buffer. So a read sees the writes before it, replies to queued work keep
/// their order after them, and no cancel can concern them. (A memory read of another key
/// may be answered before the writes that came before it: memory answers are not ordered
/// with queued work anyway.)
///
/// Cancellation is decided on the event loop (`cancel`, in `ConnectionHandler+Requests.swift`).
///
/// Back-pressure: while `maxInFlight` requests are unanswered, or replies wait above the
/// channel's high water mark (`isWritable == false`), the handler neither starts the
/// elements it has read (they wait in the inbound queue) nor asks for more bytes, so the
/// kernel buffer fills and the client blocks instead of the daemon buffering without bound.
///
/// Long lines: jansson's parse time grows with the line, so a line of `offLoopParseBytes` (64 KiB)
/// or more is parsed on `parseQueue`, never on the loop; so is a line of a quarter of that
/// once the read burst has parsed 64 KiB on the loop or while a line waits for its parse.
/// The line keeps its place in the inbound queue, and the connection reads no more until
/// the queue is empty. The bytes parsing off the loop are bounded across connections
/// (`parseBudget`); past the bound a long line is parsed on its loop.
///
/// This file holds the channel events, back-pressure, shutdown (`ShutdownEvent` moves the
/// `ConnectionLifecycle`) and the inbound queue's
/// intake; `+Requests` the start path, `+Replies` the reply path. Members those files share
/// are internal for that reason alone: nothing else in the module touches them.
///
/// Threading: lives in one channel's pipeline; every method runs on that channel's event
/// loop. Not `Sendable`; closures that leave the loop carry it in a `NIOLoopBound`.
///
/// Its stored state is `@exclusivity(unchecked)`: the runtime's dynamic access checks
/// would run several times per request on the event loop, and they can only catch an
/// access that overlaps an `inout` access to the same property; the handler's methods
/// change each part through its own mutating methods (`inbound`, `inFlight`,
/// `outbound`, `framer`) and never pass one of them `inout` to code that reaches back
/// into the handler.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    typealias Batch = ConnectionOutbound.Batch

    /// The shortest line parsed off the event loop (Benchmarks/RESULTS.md, "Parsing long
    /// lines off the event loop").
    static let defaultOffLoopParseBytes = 64 << 10

    /// Where long lines are parsed: concurrent, so connections do not wait for each
    /// other's, and as wide as the machine (a default-priority global target).
    static let parseQueue = DispatchQueue(label: "halcyon.parse", attributes: .concurrent)

    /// How long a draining connection waits for more bytes from the client, once nothing is
    /// in flight, before it closes: enough for what the kernel already holds to be read.
    static let drainQuietPeriod = TimeAmount.milliseconds(100)

    let dispatcher: Dispatcher
    let counters: ServerCounters
    private let maxInFlight: Int
    private let maxBatch: Int
    /// Only to name the limits in `lineTooLong` and `inputBufferFull` errors; the framing
    /// layer enforces them.
    private let maxLineBytes: Int
    private let maxInputBuffer: Int
    /// Lines of at least this many bytes are parsed on `parseQueue`; with no queue, in a
    /// later task of the loop (transport tests: an `EmbeddedEventLoop` may not be
    /// touched from another thread).
    private let offLoopParseBytes: Int
    private let parseQueue: DispatchQueue?
    /// Bytes of long lines parsing off the loop, all connections; nil: unbounded.
    private let parseBudget: InputBudget?
    let logger: Logger
    let session: ConnectionSession
    let observer: Observer?
    private let loopShares: LoopShares?
    /// Replies produced off the event loop, waiting for it.
    let mailbox = ReplyMailbox()

    @exclusivity(unchecked) var inbound = ConnectionInbound()
    @exclusivity(unchecked) var inFlight = ConnectionInFlight()
    @exclusivity(unchecked) var outbound: ConnectionOutbound
    @exclusivity(unchecked) var lifecycle = ConnectionLifecycle.open
    /// This connection's side of its loop's direct-write group; set in `handlerAdded`.
    @exclusivity(unchecked) var direct: DirectWriteGroup.Member?
    /// Its loop's end-of-turn flush; set in `handlerAdded`.
    @exclusivity(unchecked) var turnFlush: TurnFlush?
    /// Splits the bytes read into lines (and enforces the line and input bounds).
    @exclusivity(unchecked) private var framer: LineFrameDecoder
    /// This connection's loop's counters; set in `handlerAdded`.
    @exclusivity(unchecked) var loopCounters = LoopCounters()
    @exclusivity(unchecked) var context: ChannelHandlerContext?
    @exclusivity(unchecked) private var readPending = false
    /// The channel's `isWritable` as its last change left it (set in `handlerAdded` and
    /// `channelWritabilityChanged`, both on the loop): read for every element, where the
    /// channel's own getter would count a reference on the channel each time.
    @exclusivity(unchecked) private var channelWritable = true
    @exclusivity(unchecked) var insideRead = false
    /// The clock of the current read burst and the memory answers it gave.
    @exclusivity(unchecked) var burst = Observer.Burst()
    /// A reading of the memory tier's clock taken after the current socket read, at its
    /// first hot get; every line of that read arrived before it (see `arrivalInstant`).
    @exclusivity(unchecked) private var arrival: Date?
    /// Lines read in the current read burst.
    @exclusivity(unchecked) private var burstLines = 0
    /// Bytes of lines parsed on the loop in the current read burst.
    @exclusivity(unchecked) private var burstParsedBytes = 0
    /// Whether `release` is running, and where the elements of the line it opens are held.
    @exclusivity(unchecked) private var releasing = false
    @exclusivity(unchecked) var openingAt: Int?

    init(
        dispatcher: Dispatcher, counters: ServerCounters, maxInFlight: Int, maxBatch: Int,
        maxLineBytes: Int, maxOutputBuffer: Int = 64 << 20, writeBufferHighWater: Int? = nil,
        maxInputBuffer: Int = 512 << 20, session: ConnectionSession, logger: Logger, observer: Observer? = nil,
        loopShares: LoopShares? = nil, inputBudget: InputBudget? = nil,
        parseBudget: InputBudget? = nil, offLoopParseBytes: Int = ConnectionHandler.defaultOffLoopParseBytes,
        parseQueue: DispatchQueue? = ConnectionHandler.parseQueue
    ) {
        self.dispatcher = dispatcher
        self.counters = counters
        self.maxInFlight = maxInFlight
        self.maxBatch = maxBatch
        self.maxLineBytes = maxLineBytes
        self.maxInputBuffer = maxInputBuffer
        self.offLoopParseBytes = offLoopParseBytes
        self.parseQueue = parseQueue
        self.parseBudget = parseBudget
        self.session = session
        self.logger = logger
        self.observer = observer
        self.loopShares = loopShares
        self.outbound = ConnectionOutbound(maxBuffered: maxOutputBuffer, unsentBoundWhileWritable: writeBufferHighWater)
        self.framer = LineFrameDecoder(maxLineBytes: maxLineBytes, budget: inputBudget)
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        channelWritable = context.channel.isWritable
        loopCounters = counters.loopCounters(for: context.eventLoop)
        let share = loopShares?.share(for: context.eventLoop, dispatcher: dispatcher)
            ?? LoopShare(dispatcher: dispatcher, eventLoop: context.eventLoop)
        direct = .init(group: share.group)
        turnFlush = share.flush
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        burst.end()
        // A fragment without its `\n` is not a message (framing is by newline): dropped
        // when the connection ends, and its share of the input budget given back.
        framer.release()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The client went away: nothing more will be written for its requests, and those
        // that have not started never will (a completed write stays done).
        burst.end()
        commitDirectWrites()
        lifecycle.closed()
        framer.release()
        let entries = inFlight.removeAll()
        inbound.removeAll()
        loopCounters.requestsFinished(entries.count)
        for entry in entries { entry.task?.cancel() }
        dispatcher.connectionClosed(session)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        insideRead = true
        arrival = nil
        lifecycle.noteRead()
        var buffer = framer.resume(unwrapInboundIn(data))
        while true {
            switch framer.step(&buffer) {
            case .frame(.line(let line)):
                burstLines += 1
                handleLine(line, context: context)
            case .frame(.tooLong):
                counters.lineTooLongRefused()
                write(RPCReply.error(id: nil, .lineTooLong(limit: maxLineBytes)).bytes, context: context)
            case .frame(.overBudget):
                counters.inputBufferFullRefused()
                write(RPCReply.error(id: nil, .overloaded(reason: .inputBufferFull, limit: maxInputBuffer)).bytes,
                      context: context)
            case .skipped:
                continue
            case .needMoreData:
                framer.keep(&buffer, allocator: context.channel.allocator)
                return
            }
        }
    }

    /// The instant the memory hits of the current socket read are judged at
    /// (`HybridCache.Options.arrivedBy`): one reading of the memory tier's clock per read,
    /// taken at its first hot get. Outside a read (lines resumed later), nil: each hit reads
    /// the clock.
    func arrivalInstant() -> Date? {
        guard insideRead else { return nil }
        if let arrival { return arrival }
        let now = dispatcher.memoryClock.now()
        arrival = now
        return now
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        insideRead = false
        burstParsedBytes = 0
        // With writes waiting in the loop's group, the burst's replies go out once it is
        // committed (`applyDirectOutcomes`), later in this turn of the loop: one write, not
        // two. Otherwise the replies of a burst of several lines go with the turn's flush
        // (`TurnFlush`), and the reply of a lone line at once: its client waits for that
        // one reply, and holding it to the turn's end costs more than it saves.
        if direct?.pending ?? 0 == 0 {
            if burstLines > 1 {
                scheduleFlush()
            } else {
                emitOutbound(context: context)
                context.flush()
            }
        }
        burstLines = 0
        burst.end()
        context.fireChannelReadComplete()
        closeIfDrained(context: context)
    }

    func read(context: ChannelHandlerContext) {
        if mayRead(context: context) {
            context.read()
        } else {
            readPending = true
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        channelWritable = context.channel.isWritable
        release(context: context)
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let committed = event as? DirectWriteGroup.Committed {
            applyDirectOutcomes(committed.outcomes, context: context)
            return
        }
        guard let shutdown = event as? ShutdownEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        commitDirectWrites()
        switch shutdown {
        case .drain:
            // What was read but not started is answered now; what is still in the socket
            // is read (pressure no longer holds reads) and answered as it arrives.
            guard lifecycle.drain() else { return }
            release(context: context)
            scheduleFlush()
            closeIfDrained(context: context)
        case .close:
            lifecycle.drain()
            // Long lines still being parsed are parsed here: every line read is answered.
            let maxBatch = self.maxBatch
            inbound.parseAll { Self.parse($0, maxBatch: maxBatch) }
            release(context: context)
            let entries = inFlight.removeAll()
            loopCounters.requestsFinished(entries.count)
            for entry in entries {
                entry.task?.cancel()
                if entry.id != nil || entry.batch != nil {
                    deliver(RPCReply.error(id: entry.id, .shuttingDown), batch: entry.batch, slot: entry.batchSlot,
                            context: context)
                }
            }
            closeAfterFlush(context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.debug("connection error", metadata: ["peer": "\(session.peerDescription)", "error": "\(error)"])
        context.close(promise: nil)
    }

    // MARK: Back-pressure and shutdown

    /// Whether back-pressure applies: too much in flight, or replies above the water mark.
    func mustHold(context: ChannelHandlerContext) -> Bool {
        inFlight.count >= maxInFlight || !channelWritable
    }

    /// An open connection reads while nothing waits to start and no pressure applies; a
    /// draining one always (every line is answered); a closing one no more.
    private func mayRead(context: ChannelHandlerContext) -> Bool {
        switch lifecycle {
        case .open: return inbound.isEmpty && !mustHold(context: context)
        case .draining: return true
        case .closing, .closed: return false
        }
    }

    private func resumeReadingIfPossible(context: ChannelHandlerContext) {
        guard readPending, mayRead(context: context) else { return }
        readPending = false
        context.read()
    }

    /// Closes a draining connection once nothing is held or in flight and the client has
    /// sent nothing for `drainQuietPeriod`.
    private func closeIfDrained(context: ChannelHandlerContext) {
        guard let reads = lifecycle.drainReads, inFlight.isEmpty, inbound.isEmpty else { return }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: Self.drainQuietPeriod) {
            let handler = bound.value
            guard let context = handler.context, handler.lifecycle.drainReads == reads,
                  handler.inFlight.isEmpty, handler.inbound.isEmpty else { return }
            handler.closeAfterFlush(context: context)
        }
    }

    private func closeAfterFlush(context: ChannelHandlerContext) {
        emitOutbound(context: context)
        guard lifecycle.close() else { return }
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(channel.allocator.buffer(capacity: 0)))
            .whenComplete { _ in channel.close(promise: nil) }
    }
}

extension ConnectionHandler {
    // MARK: Lines

    private func handleLine(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        let size = buffer.readableBytes
        // Once a read burst has parsed `offLoopParseBytes` on the loop, or while a line
        // waits for its parse, a quarter of that is enough: a pipelined run of such lines
        // holds the loop as long as one long line would. Shorter lines stay, since for them
        // the hop to the parse queue costs more than the parse.
        let long = size >= offLoopParseBytes
            || (size >= offLoopParseBytes / 4 && (burstParsedBytes >= offLoopParseBytes || inbound.linesWaiting > 0))
        if long, parseBudget?.charge(size) ?? true {
            parseOffLoop(buffer, context: context)
            return
        }
        burstParsedBytes += size
        if inbound.isEmpty, startHotLine(buffer, context: context) { return }
        let incoming = Self.parse(buffer, maxBatch: maxBatch)
        guard inbound.linesWaiting > 0 else {
            take(incoming, withdrawn: [], context: context)
            return
        }
        // Behind a line being parsed: a cancel alone on its line is carried out now, and
        // reaches the requests of the lines waiting, all read before it.
        if case .single(.request(let request)) = incoming, request.flags.contains(.transport) {
            start(.request(request), batch: nil, slot: 0, context: context)
        } else {
            inbound.appendLine(incoming)
        }
    }

    private static func parse(_ line: ByteBuffer, maxBatch: Int) -> RPCIncoming {
        line.withUnsafeReadableBytes { RPCMessageParser.parse(line: $0, maxBatch: maxBatch) }
    }

    /// Queues a long line and parses it on `parseQueue`; it is handled back on the loop.
    private func parseOffLoop(_ line: ByteBuffer, context: ChannelHandlerContext) {
        let token = inbound.appendParsing(line)
        counters.lineParsedOffLoop()
        let maxBatch = self.maxBatch
        let eventLoop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let budget = parseBudget
        let parse: @Sendable () -> Void = {
            let incoming = Self.parse(line, maxBatch: maxBatch)
            eventLoop.execute {
                budget?.release(line.readableBytes)
                let handler = bound.value
                guard let context = handler.context, handler.inbound.parsed(token, incoming) else { return }
                handler.release(context: context)
            }
        }
        if let parseQueue { parseQueue.async(execute: parse) } else { parse() }
    }

    /// Opens a line: each element starts, or is held (at the tail, or at `openingAt`
    /// while the head line is opened in its place). A request whose id is in `withdrawn`
    /// was cancelled before it could start and is answered so instead.
    ///
    /// The line and its elements are moved along, never copied: a copy of a request
    /// counts a reference for each object it holds.
    func take(_ incoming: consuming RPCIncoming, withdrawn: Set<RPCID>, context: ChannelHandlerContext) {
        switch consume incoming {
        case .failure(let error):
            write(RPCReply.error(id: nil, error).bytes, context: context)
        case .single(let element):
            admit(element, batch: nil, slot: 0, withdrawn: withdrawn, context: context)
        case .batch(let elements):
            let expecting = elements.filter(expectsReply).count
            let batch = expecting > 0 ? Batch(count: expecting) : nil
            var slot = 0
            for element in elements {
                let expects = expectsReply(element)
                admit(element, batch: expects ? batch : nil, slot: slot, withdrawn: withdrawn, context: context)
                if expects { slot += 1 }
            }
        }
    }

    private func admit(
        _ element: consuming RPCElement, batch: Batch?, slot: Int, withdrawn: Set<RPCID>, context: ChannelHandlerContext
    ) {
        if let flags = element.requestFlags {
            if !withdrawn.isEmpty, expectsReply(element), let id = element.requestID, withdrawn.contains(id) {
                deliver(RPCReply.error(id: id, .cancelled(started: false)), batch: batch, slot: slot, context: context)
                return
            }
            // A cancel is never held: it must reach work in flight, and withdraws a held
            // request before it starts.
            if flags.contains(.transport) {
                start(element, batch: batch, slot: slot, context: context)
                return
            }
        }
        if lifecycle.isOpen, openingAt != nil || !inbound.isEmpty || mustHold(context: context) {
            inbound.hold(.init(element: element, batch: batch, slot: slot), at: openingAt)
            openingAt = openingAt.map { $0 + 1 }
        } else {
            start(element, batch: batch, slot: slot, context: context)
        }
    }

    /// Lets the inbound queue's head go for as long as its release rule allows: parsed lines
    /// are opened in place, held elements start (all of them unless the connection is open:
    /// they are answered `shuttingDown` without work).
    func release(context: ChannelHandlerContext) {
        // Not re-entered (a reply completed while an element starts): the loop below looks
        // at the head again after each element anyway.
        guard !releasing else { return }
        releasing = true
        while !inbound.isEmpty,
              let ready = inbound.next(mayStart: !lifecycle.isOpen || !mustHold(context: context)) {
            switch ready {
            case .line(let incoming, let withdrawn):
                openingAt = 0
                take(incoming, withdrawn: withdrawn, context: context)
                openingAt = nil
            case .element(let held):
                start(held.element, batch: held.batch, slot: held.slot, context: context)
            }
        }
        releasing = false
        if !insideRead {
            commitDirectWrites()
            scheduleFlush()
        }
        resumeReadingIfPossible(context: context)
        closeIfDrained(context: context)
    }

    private func expectsReply(_ element: RPCElement) -> Bool {
        // An invalid element without an id is a notification (say, with positional
        // params): notifications never get a reply, not even an error.
        if let flags = element.requestFlags { return element.requestID != nil && !flags.contains(.transport) }
        return element.invalidID != nil
    }
}

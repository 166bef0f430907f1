// One client connection: turns request lines into dispatcher calls, keeps the table of
// requests in flight (for cancellation and back-pressure), and writes every reply.

import Dispatch
import HalcyonCache
import HalcyonJSON
import HalcyonRPC
import Logging
import NIOCore

/// Sent down a connection's pipeline when the daemon begins to shut down.
enum ShutdownEvent: Sendable {
    /// Stop taking new requests; answer them `shuttingDown`. In-flight ones may finish.
    case drain
    /// The drain time is up: answer whatever is left `shuttingDown` and close.
    case close
}

/// The protocol engine of one connection.
///
/// Request lines come from its `LineFrameDecoder`; each is parsed (jansson), then handed to the
/// `Dispatcher`. Replies come back on whatever thread the connection's `CallbackQueue`
/// picks and hop to the event loop, where this handler alone writes them, so the
/// in-flight table needs no lock.
///
/// The synchronous path: a request with an id to a method with a memory answer (a `fast`
/// read memory holds, no queued write on its key; `server.ping`) is answered before its
/// line's processing returns. Under `untouch` its reply is encoded straight into
/// `outbound`, the connection's reply buffer, and never enters the in-flight table: no
/// later line (a cancel included) can be read before it is written. Under the other
/// policies the encoded reply takes the delivery hop of the policy like any other, with an
/// in-flight entry (a cancel may be read before it lands), but no storage task; except an
/// `operationQueue`, whose deliveries are ordered by each request's priority, which only
/// the ordinary path carries.
///
/// The direct write path: a `cache.set` (or `cache.add`, `cache.cas`, `cache.incr`) with
/// an id under `untouch` that the journal can take at once (`Dispatcher.directWrite`) is
/// not dispatched on its own. It joins its loop's `DirectWriteGroup`, committed as one
/// group on this loop (waiting for the ioQueue only when nothing else is queued there)
/// once the turn's reads are done, or before this connection handles anything but
/// another direct write or a memory read of a key none of its waiting writes touches;
/// the replies go into `outbound` at once. So a read sees the writes before it, replies
/// to queued work keep their order after them, and no cancel can concern them. (A memory
/// read of another key may be answered before the writes that came before it: memory
/// answers are not ordered with queued work anyway.)
///
/// Every reply line is appended to `outbound`, which is handed to the channel as one
/// buffer at the end of each read burst (`channelReadComplete`), with the flush of the
/// tick in which a reply lands between reads, or when it passes `outboundChunk` bytes (so writability, and with it
/// back-pressure, follows the replies of a long burst). One order for all replies: the
/// order they were appended in.
///
/// Cancellation is decided here, on the event loop: a `$/cancelRequest` marks the entry
/// and cancels its `CacheTask` synchronously; any success reply that reaches the loop for
/// a marked entry afterwards is replaced by `-32800` (`started: true`). Since both the
/// mark and the write happen on this one thread, no success reply can be written after the
/// cancel was read, whatever the storage task was doing at that instant.
///
/// Back-pressure: while `maxInFlight` requests are unanswered, or replies wait above the
/// channel's high water mark (`isWritable == false`), the handler neither starts the
/// requests it has already read (they wait, parsed, in `held`) nor asks for more bytes,
/// so the kernel buffer fills and the client blocks instead of the daemon buffering
/// without bound. Only the lines of one read burst can wait in `held`. Replies of work
/// already started may still land; if the unsent bytes then pass `maxOutputBuffer` while
/// an earlier reply is still unsent, the client is not draining: it is disconnected and
/// counted (`outputBufferOverflows`), as Redis does at its client-output-buffer hard limit.
/// A single reply larger than the bound still goes out when nothing else waits.
///
/// Long lines: jansson takes about 15 ns a byte, so a line of `offLoopParseBytes` (64 KiB)
/// or more is parsed on `parseQueue`, never on the loop, where a 1 MiB value held every
/// other connection of the loop for about 15 ms (a 64 MiB line, a second); so is a line of
/// a quarter of that once the read burst has parsed 64 KiB on the loop. The line keeps
/// its place: until it comes back parsed, this connection reads no more, and the lines
/// already read after it are parsed at once but wait in `queuedLines`, in order. A
/// cancel alone on a line does not wait: it is carried out at once, and also reaches the
/// requests of the lines waiting (they are read before it, and have not started, so they
/// are answered `-32800` with `started: false` when their turn comes). The lines waiting
/// for or in a parse off the loop are bounded across connections (`parseBudget`, as much
/// again as `--max-input-buffer`): a loop no longer busy parsing reads on, and a complete
/// line has left the input budget. Past the bound, a long line is parsed on its loop as
/// before, which holds that loop's reads meanwhile.
///
/// Drain: on `ShutdownEvent.drain` reads resume whatever the pressure, every line already
/// read or still in the socket is answered (`-32005 shuttingDown` for what has not
/// started), and the connection closes once nothing is in flight and the socket has been
/// quiet for `drainQuietPeriod`. On `.close`, whatever is left, batches included, is
/// answered `shuttingDown` before closing.
///
/// Threading: lives in one channel's pipeline; every method runs on that channel's event
/// loop. Not `Sendable`; closures that leave the loop carry it in a `NIOLoopBound`.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A request whose reply has not been written yet.
    private struct InFlight {
        var id: RPCID?
        var task: CacheTask?
        var cancelled = false
        /// Where the reply goes when the request came in a batch.
        var batch: BatchReply?
        var batchSlot = 0
    }

    /// Collects the replies of one batch; written as one line when the last arrives.
    private final class BatchReply {
        var slots: [[UInt8]?]
        var remaining: Int

        init(count: Int) {
            slots = Array(repeating: nil, count: count)
            remaining = count
        }
    }

    /// A parsed request element that has been read but not started, because the connection
    /// is under back-pressure.
    private struct Held {
        var element: RPCElement
        var batch: BatchReply?
        var slot: Int

        /// The id of the request this element carries, if it is a request with one.
        var requestID: RPCID? {
            if case .request(let request) = element { return request.id }
            return nil
        }
    }

    /// A line read while a long line of this connection is parsed off the loop, or that
    /// long line itself: handled once every line before it has been (see the type's
    /// comment).
    private final class QueuedLine {
        let token: UInt64
        /// A long line's bytes until its parse comes back (`.close` parses them here).
        var bytes: ByteBuffer?
        var incoming: RPCIncoming?
        /// Requests cancelled by lines read after this one: withdrawn, not run.
        var cancelled: Set<RPCID> = []

        init(token: UInt64, bytes: ByteBuffer? = nil, incoming: RPCIncoming? = nil) {
            self.token = token
            self.bytes = bytes
            self.incoming = incoming
        }
    }

    /// The shortest line parsed off the event loop: about 1 ms of jansson.
    static let defaultOffLoopParseBytes = 64 << 10

    /// Where long lines are parsed: concurrent, so connections do not wait for each
    /// other's, and as wide as the machine (a default-priority global target).
    static let parseQueue = DispatchQueue(label: "halcyon.parse", attributes: .concurrent)

    /// How long a draining connection waits for more bytes from the client, once nothing is
    /// in flight, before it closes: enough for what the kernel already holds to be read.
    static let drainQuietPeriod = TimeAmount.milliseconds(100)

    /// Reply bytes gathered in `outbound` above which they go to the channel at once,
    /// even inside a read burst.
    static let outboundChunk = 64 << 10

    private let dispatcher: Dispatcher
    private let counters: ServerCounters
    private let maxInFlight: Int
    private let maxBatch: Int
    /// Only to name the limit in `lineTooLong` errors; the framing layer enforces it.
    private let maxLineBytes: Int
    /// Lines of at least this many bytes are parsed on `parseQueue`; with no queue, in a
    /// later task of the loop (transport tests: an `EmbeddedEventLoop` may not be
    /// touched from another thread).
    private let offLoopParseBytes: Int
    private let parseQueue: DispatchQueue?
    /// Bytes of long lines parsing off the loop, all connections; nil: unbounded.
    private let parseBudget: InputBudget?
    /// Unsent reply bytes above which a client that is not reading is disconnected.
    private let maxOutputBuffer: Int
    /// Only to name the limit in `inputBufferFull` errors; the framing layer enforces it.
    private let maxInputBuffer: Int
    private let logger: Logger
    private let session: ConnectionSession
    private let observer: Observer?

    /// Reply lines not yet handed to the channel, in order (see the type's doc comment).
    private var outbound = JSONWriter(capacity: 4096)
    /// This connection's loop's counters; set in `handlerAdded`.
    private var loopCounters = LoopCounters()
    private var inFlight: [UInt64: InFlight] = [:]
    private var nextSeq: UInt64 = 0
    private var readPending = false
    private var insideRead = false
    private var flushScheduled = false
    private var draining = false
    /// Elements read but not started while back-pressure holds, in arrival order.
    private var held = CircularBuffer<Held>()
    /// From a long line being parsed off the loop on: the lines read, in arrival order.
    private var queuedLines = CircularBuffer<QueuedLine>()
    private var nextLineToken: UInt64 = 0
    /// Bytes of lines parsed on the loop in the current read burst.
    private var burstParsedBytes = 0
    /// Bumped on every read while draining, so a quiet-period timer knows it is stale.
    private var drainReads = 0
    private var closing = false
    private var context: ChannelHandlerContext?
    /// Replies produced off the event loop, waiting for it (see `ReplyMailbox`).
    private let mailbox = ReplyMailbox()
    /// Where this connection's direct sets wait to be committed: its loop's group
    /// (set in `handlerAdded`), and how many of them are there now.
    private let directGroups: DirectWriteGroups?
    private var directGroup: DirectWriteGroup?
    private var directPending = 0
    /// The keys of those sets: a read of another key is answered without waiting for them.
    private var directKeys = Set<String>()
    /// Splits the bytes read into lines (and enforces the line and input bounds).
    private var framer: LineFrameDecoder
    /// The bytes of an unfinished line, kept until a later read completes it.
    private var unfinished: ByteBuffer?

    init(
        dispatcher: Dispatcher, counters: ServerCounters, maxInFlight: Int, maxBatch: Int,
        maxLineBytes: Int, maxOutputBuffer: Int = 64 << 20,
        maxInputBuffer: Int = 512 << 20, session: ConnectionSession, logger: Logger, observer: Observer? = nil,
        directGroups: DirectWriteGroups? = nil, inputBudget: InputBudget? = nil,
        parseBudget: InputBudget? = nil, offLoopParseBytes: Int = ConnectionHandler.defaultOffLoopParseBytes,
        parseQueue: DispatchQueue? = ConnectionHandler.parseQueue
    ) {
        self.parseBudget = parseBudget
        self.offLoopParseBytes = offLoopParseBytes
        self.parseQueue = parseQueue
        self.framer = LineFrameDecoder(maxLineBytes: maxLineBytes, budget: inputBudget)
        self.observer = observer
        self.directGroups = directGroups
        self.dispatcher = dispatcher
        self.counters = counters
        self.maxInFlight = maxInFlight
        self.maxBatch = maxBatch
        self.maxLineBytes = maxLineBytes
        self.maxOutputBuffer = maxOutputBuffer
        self.maxInputBuffer = maxInputBuffer
        self.session = session
        self.logger = logger
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        loopCounters = counters.loopCounters(for: context.eventLoop)
        // Without the daemon's groups (a handler made alone, as in transport tests), the
        // connection's sets are grouped on their own.
        directGroup = directGroups?.group(for: context.eventLoop, dispatcher: dispatcher)
            ?? DirectWriteGroup(dispatcher: dispatcher, eventLoop: context.eventLoop)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        dropUnfinishedLine()
    }

    /// A fragment without its `\n` is not a message (framing is by newline): dropped
    /// when the connection ends, and its share of the input budget given back.
    private func dropUnfinishedLine() {
        unfinished = nil
        framer.release()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The client went away: nothing more will be written for its requests, and those
        // that have not started never will (a completed write stays done).
        commitDirectWrites()
        dropUnfinishedLine()
        let entries = inFlight
        inFlight.removeAll()
        held.removeAll()
        queuedLines.removeAll()
        loopCounters.requestsFinished(entries.count)
        for entry in entries.values { entry.task?.cancel() }
        dispatcher.connectionClosed(session)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        insideRead = true
        if draining { drainReads &+= 1 }
        var buffer = unwrapInboundIn(data)
        // Whether `buffer` is this connection's own copy rather than the read buffer.
        var owned = false
        if var earlier = unfinished {
            // The new bytes continue the unfinished line: the framer has already scanned
            // the earlier ones and resumes where it stopped. Appended in place (the copy
            // is unique), so a line read in many pieces is copied once, not once a read.
            unfinished = nil
            earlier.writeBuffer(&buffer)
            buffer = earlier
            owned = true
        }
        while true {
            switch framer.step(&buffer) {
            case .frame(.line(let line)):
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
                if buffer.readableBytes > 0 {
                    if owned, buffer.readableBytes * 2 >= buffer.capacity {
                        // Most of our own copy is a line still arriving: kept in place
                        // (lines framed from its front dropped), not copied again.
                        buffer.discardReadBytes()
                        unfinished = buffer
                    } else {
                        // Copied out, compact: the read buffer it came in can be reused by
                        // the next read, and an idle connection holds only its fragment.
                        var kept = context.channel.allocator.buffer(capacity: buffer.readableBytes)
                        kept.writeBuffer(&buffer)
                        unfinished = kept
                    }
                }
                return
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        insideRead = false
        burstParsedBytes = 0
        // With sets waiting in the loop's group, the replies go out once it is committed
        // (`directWritesAnswered`), later in this turn of the loop: one write, not two.
        if directPending == 0 {
            emitOutbound(context: context)
            context.flush()
        }
        context.fireChannelReadComplete()
        if draining { closeIfDrained(context: context) }
    }

    func read(context: ChannelHandlerContext) {
        if !draining, mustHold(context: context) || !queuedLines.isEmpty {
            readPending = true
        } else {
            context.read()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        startHeldIfPossible(context: context)
        resumeReadingIfPossible(context: context)
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let shutdown = event as? ShutdownEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        commitDirectWrites()
        switch shutdown {
        case .drain:
            guard !draining else { return }
            draining = true
            // What was read but not started is answered now; what is still in the socket
            // is read (pressure no longer holds reads) and answered as it arrives.
            startHeldIfPossible(context: context)
            if readPending {
                readPending = false
                context.read()
            }
            scheduleFlush(context: context)
            closeIfDrained(context: context)
        case .close:
            draining = true
            // Long lines still being parsed are parsed here: every line read is answered.
            for line in queuedLines where line.incoming == nil {
                if let bytes = line.bytes { line.incoming = Self.parse(bytes, maxBatch: maxBatch) }
                line.bytes = nil
            }
            takeQueuedLines(context: context)
            startHeldIfPossible(context: context)
            // Sequence order is arrival order, so the slots of a batch fill as they came.
            let entries = inFlight.sorted { $0.key < $1.key }.map(\.value)
            inFlight.removeAll()
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

    // MARK: Requests

    private func handleLine(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        let size = buffer.readableBytes
        // Once a read burst has parsed `offLoopParseBytes` on the loop, or while a line
        // waits for its parse, a quarter of that is enough (16 KiB, about 250 µs of
        // jansson against a hop of tens): sixteen pipelined 32 KiB lines held the loop for
        // 9 ms. Shorter lines stay: at 4 KiB the hops cost 10 % of the throughput.
        let long = size >= offLoopParseBytes
            || (size >= offLoopParseBytes / 4 && (burstParsedBytes >= offLoopParseBytes || !queuedLines.isEmpty))
        if long, parseBudget?.charge(size) ?? true {
            parseOffLoop(buffer, context: context)
            return
        }
        burstParsedBytes += size
        let incoming = Self.parse(buffer, maxBatch: maxBatch)
        guard !queuedLines.isEmpty else {
            take(incoming, context: context)
            return
        }
        // Behind a long line: a cancel alone on its line is carried out now, and reaches
        // the requests of the lines waiting, all read before it. Anything else waits.
        if case .single(.request(let request)) = incoming, request.flags.contains(.transport) {
            if let target = cancel(request, context: context) {
                for line in queuedLines { line.cancelled.insert(target) }
            }
            return
        }
        queuedLines.append(QueuedLine(token: nextLineToken, incoming: incoming))
        nextLineToken &+= 1
    }

    private static func parse(_ line: ByteBuffer, maxBatch: Int) -> RPCIncoming {
        line.withUnsafeReadableBytes { RPCMessageParser.parse(line: $0, maxBatch: maxBatch) }
    }

    /// Queues a long line and parses it on `parseQueue`; it is handled back on the loop.
    private func parseOffLoop(_ line: ByteBuffer, context: ChannelHandlerContext) {
        let token = nextLineToken
        nextLineToken &+= 1
        queuedLines.append(QueuedLine(token: token, bytes: line))
        counters.lineParsedOffLoop()
        let maxBatch = self.maxBatch
        let eventLoop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let budget = parseBudget
        let parse: @Sendable () -> Void = {
            let incoming = Self.parse(line, maxBatch: maxBatch)
            eventLoop.execute {
                budget?.release(line.readableBytes)
                bound.value.parsedOffLoop(token, incoming)
            }
        }
        if let parseQueue { parseQueue.async(execute: parse) } else { parse() }
    }

    /// A long line came back parsed: it and the lines behind it are handled, up to the
    /// next long line still being parsed. (Gone when the connection closed meanwhile.)
    private func parsedOffLoop(_ token: UInt64, _ incoming: RPCIncoming) {
        guard let context, let line = queuedLines.first(where: { $0.token == token }), line.incoming == nil else {
            return
        }
        line.incoming = incoming
        line.bytes = nil
        takeQueuedLines(context: context)
    }

    /// Handles the queued lines that are parsed, oldest first, up to one that is not.
    private func takeQueuedLines(context: ChannelHandlerContext) {
        while let line = queuedLines.first, let incoming = line.incoming {
            queuedLines.removeFirst()
            take(incoming, withdrawing: line.cancelled, context: context)
        }
        if !insideRead {
            commitDirectWrites()
            scheduleFlush(context: context)
        }
        resumeReadingIfPossible(context: context)
        if draining { closeIfDrained(context: context) }
    }

    /// Admits what a line holds; a request whose id is in `cancelled` was cancelled
    /// before it could start and is answered so instead.
    private func take(_ incoming: RPCIncoming, withdrawing cancelled: Set<RPCID> = [], context: ChannelHandlerContext) {
        switch incoming {
        case .failure(let error):
            write(RPCReply.error(id: nil, error).bytes, context: context)
        case .single(let element):
            admit(element, batch: nil, slot: 0, withdrawing: cancelled, context: context)
        case .batch(let elements):
            let expecting = elements.filter(expectsReply).count
            let batch = expecting > 0 ? BatchReply(count: expecting) : nil
            var slot = 0
            for element in elements {
                let expects = expectsReply(element)
                admit(element, batch: expects ? batch : nil, slot: slot, withdrawing: cancelled, context: context)
                if expects { slot += 1 }
            }
        }
    }

    private func admit(
        _ element: RPCElement, batch: BatchReply?, slot: Int, withdrawing cancelled: Set<RPCID>,
        context: ChannelHandlerContext
    ) {
        if !cancelled.isEmpty, expectsReply(element), case .request(let request) = element, let id = request.id,
           cancelled.contains(id) {
            deliver(RPCReply.error(id: id, .cancelled(started: false)), batch: batch, slot: slot, context: context)
        } else {
            admit(element, batch: batch, slot: slot, context: context)
        }
    }

    /// Starts an element now, or holds it while back-pressure applies. A cancel is never
    /// held: it must reach work in flight, and withdraws a held request before it starts.
    private func admit(_ element: RPCElement, batch: BatchReply?, slot: Int, context: ChannelHandlerContext) {
        if directPending > 0, mustFollowDirectWrites(element, batch: batch) { commitDirectWrites() }
        if case .request(let request) = element, request.flags.contains(.transport) {
            cancel(request, context: context)
        } else if !draining, !held.isEmpty || mustHold(context: context) {
            held.append(Held(element: element, batch: batch, slot: slot))
        } else {
            handle(element, batch: batch, slot: slot, context: context)
        }
    }

    /// Starts held elements, oldest first, for as long as back-pressure allows (all of
    /// them when draining: they are answered `shuttingDown` without work).
    private func startHeldIfPossible(context: ChannelHandlerContext) {
        while let next = held.first, draining || !mustHold(context: context) {
            held.removeFirst()
            if directPending > 0, mustFollowDirectWrites(next.element, batch: next.batch) { commitDirectWrites() }
            handle(next.element, batch: next.batch, slot: next.slot, context: context)
        }
        if !insideRead { commitDirectWrites() }
    }

    private func expectsReply(_ element: RPCElement) -> Bool {
        switch element {
        // An invalid element without an id is a notification (say, with positional
        // params): notifications never get a reply, not even an error.
        case .invalid(let id, _): return id != nil
        case .request(let request): return request.id != nil && !request.flags.contains(.transport)
        }
    }

    private func handle(_ element: RPCElement, batch: BatchReply?, slot: Int, context: ChannelHandlerContext) {
        switch element {
        case .invalid(let id, let error):
            if id != nil {
                deliver(RPCReply.error(id: id, error), batch: batch, slot: slot, context: context)
            }
        case .request(let request):
            if request.flags.contains(.transport) {
                cancel(request, context: context)
            } else if request.method.hasPrefix("$/") {
                // Unknown protocol-level notifications are ignored; requests get -32601.
                if request.id != nil {
                    deliver(RPCReply.error(id: request.id, .methodNotFound(method: request.method)),
                            batch: batch, slot: slot, context: context)
                }
            } else if draining {
                if request.id != nil {
                    deliver(RPCReply.error(id: request.id, .shuttingDown), batch: batch, slot: slot, context: context)
                }
            } else {
                dispatch(request, batch: batch, slot: slot, context: context)
            }
        }
    }

    private func dispatch(_ request: RPCRequest, batch: BatchReply?, slot: Int, context: ChannelHandlerContext) {
        let observed = observer?.started(request, peer: session.peerDescription, loop: loopCounters)
        var memoryMissed = false
        if batch == nil, let id = request.id {
            if case .untouch = session.callbackQueue {
                if let write = dispatcher.directWrite(request, id: id, session: session), let directGroup {
                    directPending += 1
                    directKeys.insert(write.key)
                    directGroup.add(write, observed: observed, from: self)
                    if !insideRead { commitDirectWrites() }
                    return
                }
                if directPending > 0, !readsNoPendingKey(request) { commitDirectWrites() }
                switch dispatcher.answerFromMemory(request, id: id, session: session, into: &outbound) {
                case .answered(let error):
                    observed?.finished(error: error)
                    appended(context: context)
                    return
                case .notAnswered(let missed):
                    memoryMissed = missed
                    // What `handle` queues goes after the sets before it.
                    commitDirectWrites()
                }
            } else if !session.callbackQueue.ordersByPriority {
                var writer = JSONWriter(capacity: 256)
                switch dispatcher.answerFromMemory(request, id: id, session: session, into: &writer) {
                case .answered(let error):
                    // Only the policy's delivery hop remains.
                    let reply = RPCReply(id: id, element: writer.bytes, error: error)
                    let respond = track(request, batch: nil, slot: 0, observed: observed, context: context)
                    session.callbackQueue.execute { respond(reply) }
                    return
                case .notAnswered(let missed):
                    memoryMissed = missed
                }
            }
        }
        let respond = track(request, batch: batch, slot: slot, observed: observed, context: context)
        let seq = nextSeq &- 1
        let task = dispatcher.handle(request, session: session, memoryMissed: memoryMissed, respond: respond)
        // The reply may already have been written (a memory hit under `untouch`).
        if let task, inFlight[seq] != nil {
            inFlight[seq]?.task = task
        }
    }

    /// Enters a request in the in-flight table (its sequence number is `nextSeq - 1` when
    /// this returns) and returns the closure its reply comes back through.
    private func track(
        _ request: RPCRequest, batch: BatchReply?, slot: Int, observed: Observer.Request?,
        context: ChannelHandlerContext
    ) -> @Sendable (RPCReply) -> Void {
        let seq = nextSeq
        nextSeq &+= 1
        inFlight[seq] = InFlight(id: request.id, batch: batch, batchSlot: slot)
        loopCounters.requestStarted()

        let eventLoop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let mailbox = self.mailbox
        return { reply in
            if eventLoop.inEventLoop {
                let handler = bound.value
                // Replies posted from other threads earlier go first.
                if mailbox.hasPending { handler.drainMailbox() }
                handler.complete(seq: seq, reply: reply, observed: observed)
            } else if mailbox.post(.init(seq: seq, reply: reply, observed: observed)) {
                eventLoop.execute { bound.value.drainMailbox() }
            }
        }
    }

    /// Whether `element` must be handled after this connection's direct sets are
    /// committed. Not a set that may join them (with an id, alone on its line, under
    /// `untouch`), nor a read memory may answer of a key none of them writes (`dispatch`
    /// looks again once it knows whether memory answered): everything else, so a read
    /// sees the sets before it and replies to queued work keep their order after them.
    private func mustFollowDirectWrites(_ element: RPCElement, batch: BatchReply?) -> Bool {
        guard batch == nil, case .untouch = session.callbackQueue, case .request(let request) = element,
              request.id != nil else { return true }
        return !dispatcher.hasDirectWrite(request) && !readsNoPendingKey(request)
    }

    /// `request` has a memory answer that reads no key of the direct sets waiting.
    private func readsNoPendingKey(_ request: RPCRequest) -> Bool {
        guard let key = dispatcher.memoryAnswerKey(request) else { return false }
        return key.map { !directKeys.contains($0) } ?? true
    }

    /// Commits the loop's group now if this connection has sets in it (with every other
    /// connection's), so that what comes next is handled after them.
    private func commitDirectWrites() {
        if directPending > 0 { directGroup?.commit() }
    }

    /// The group committed one of this connection's sets: its reply joins `outbound`.
    func directWriteCommitted(_ outcome: Dispatcher.DirectOutcome, observed: Observer.Request?) {
        // Replies to this connection's queued work that the ioQueue produced before the
        // commit (their jobs ran ahead of it) go first, as they would had the set been
        // queued too: with `untouch`, replies to ioQueue requests leave in arrival order.
        // (A set queued while the ioQueue was busy, then the next one direct.)
        if mailbox.hasPending { drainMailbox() }
        directPending -= 1
        if directPending == 0 { directKeys.removeAll(keepingCapacity: true) }
        let error = dispatcher.writeReply(outcome, into: &outbound)
        noteStorageError(error)
        observed?.finished(error: error)
    }

    /// Counts a reply's error if the storage engine failed (not ready, cannot write,
    /// cannot read), for the daemon's warnings.
    private func noteStorageError(_ error: RPCError?) {
        if let error, (-32003 ... -32001).contains(error.code) {
            counters.storageErrorReplied("\(error.reason): \(error.message)")
        }
    }

    /// Every set of this connection in the group is answered: hand the replies to the
    /// channel now, unless a read burst is under way (its end does it).
    func directWritesAnswered() {
        guard let context, !insideRead else { return }
        emitOutbound(context: context)
        context.flush()
    }

    /// Completes every reply posted to the mailbox, in posting order.
    private func drainMailbox() {
        for posted in mailbox.takeAll() {
            complete(seq: posted.seq, reply: posted.reply, observed: posted.observed)
        }
    }

    /// Carries out a `$/cancelRequest`; returns the id it cancels (nil for a malformed one).
    @discardableResult
    private func cancel(_ request: RPCRequest, context: ChannelHandlerContext) -> RPCID? {
        // The table's only transport method today is $/cancelRequest.
        guard case .cancel(let target)? = try? dispatcher.transportAction(for: request) else { return nil }
        // A held request never started: withdraw it and answer as an unstarted cancel.
        if held.contains(where: { $0.requestID == target }) {
            var kept = CircularBuffer<Held>(initialCapacity: held.count)
            for entry in held {
                if entry.requestID == target {
                    deliver(RPCReply.error(id: target, .cancelled(started: false)), batch: entry.batch,
                            slot: entry.slot, context: context)
                } else {
                    kept.append(entry)
                }
            }
            held = kept
        }
        // A scan of the in-flight table (at most --max-in-flight entries): cancels are
        // rare, and an index by id would cost an insert and a removal on every request.
        for (seq, entry) in inFlight where entry.id == target && !entry.cancelled {
            inFlight[seq]?.cancelled = true
            // Synchronous: an unstarted task will never run, and delivers -32800
            // (started: false) through the callback queue.
            entry.task?.cancel()
        }
        return target
    }

    // MARK: Replies

    /// Runs on the event loop for every reply, whichever thread produced it. The reply is
    /// observed here, once written, so a deferred result that could not be encoded is
    /// recorded with its error (and the loop's own histograms take it).
    private func complete(seq: UInt64, reply: RPCReply, observed: Observer.Request?) {
        guard let context, let entry = inFlight.removeValue(forKey: seq) else {
            observed?.finished(error: reply.error)
            return
        }
        loopCounters.requestsFinished()

        noteStorageError(reply.error)
        let handlerError = reply.error
        var reply = reply
        if entry.cancelled, reply.isSuccess {
            reply = .error(id: entry.id, .cancelled(started: true))
        }
        var encodingFailure: RPCError?
        if entry.id != nil || entry.batch != nil {
            encodingFailure = deliver(reply, batch: entry.batch, slot: entry.batchSlot, context: context)
        }
        observed?.finished(error: handlerError ?? encodingFailure)
        if !insideRead { scheduleFlush(context: context) }
        startHeldIfPossible(context: context)
        resumeReadingIfPossible(context: context)
        if draining { closeIfDrained(context: context) }
    }

    /// Returns the error that replaced a deferred result which could not be encoded.
    @discardableResult
    private func deliver(_ reply: RPCReply, batch: BatchReply?, slot: Int, context: ChannelHandlerContext) -> RPCError? {
        guard let batch else {
            // A deferred result is encoded here, on the loop, straight into `outbound`.
            guard !closing else { return nil }
            let failure = reply.writeLine(into: &outbound)
            appended(context: context)
            return failure
        }
        let (element, failure) = reply.element()
        batch.slots[slot] = element
        batch.remaining -= 1
        guard batch.remaining == 0 else { return failure }
        var line: [UInt8] = [UInt8(ascii: "[")]
        line.reserveCapacity(batch.slots.reduce(2) { $0 + ($1?.count ?? 0) + 1 })
        for (index, bytes) in batch.slots.enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            line.append(contentsOf: bytes ?? [])
        }
        line.append(UInt8(ascii: "]"))
        write(line, context: context)
        return failure
    }

    /// Appends one reply line to `outbound` (see `appended`).
    private func write(_ bytes: [UInt8], context: ChannelHandlerContext) {
        guard !closing else { return }
        outbound.raw(bytes)
        outbound.newline()
        appended(context: context)
    }

    /// After a reply line went into `outbound`: inside a read burst it waits for the
    /// burst's end (unless `outboundChunk` bytes wait); between reads it goes out with
    /// this tick's flush.
    private func appended(context: ChannelHandlerContext) {
        if outbound.bytes.count >= Self.outboundChunk { emitOutbound(context: context) }
        if !insideRead { scheduleFlush(context: context) }
    }

    /// Hands the gathered reply lines to the channel as one buffer (not flushed).
    private func emitOutbound(context: ChannelHandlerContext) {
        guard !outbound.bytes.isEmpty else { return }
        defer { outbound.reset() }
        guard !closing else { return }
        let count = outbound.bytes.count
        let unsentBefore = unsentBytes(context: context)
        if unsentBefore > 0, unsentBefore + count > maxOutputBuffer {
            // The client stopped reading while replies it asked for piled up.
            closing = true
            counters.outputBufferOverflowed()
            logger.warning("disconnected a client that does not read its replies", metadata: [
                "peer": "\(session.peerDescription)", "unsentBytes": "\(unsentBefore)",
                "maxOutputBuffer": "\(maxOutputBuffer)",
            ])
            context.close(promise: nil)
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: count)
        buffer.writeBytes(outbound.bytes)
        context.write(wrapOutboundOut(buffer), promise: nil)
    }

    /// Reply bytes written to the channel and not yet taken by the kernel.
    private func unsentBytes(context: ChannelHandlerContext) -> Int {
        (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
    }

    /// Closes a draining connection once nothing is held or in flight and the client has
    /// sent nothing for `drainQuietPeriod`.
    private func closeIfDrained(context: ChannelHandlerContext) {
        guard draining, !closing, inFlight.isEmpty, held.isEmpty, queuedLines.isEmpty else { return }
        let reads = drainReads
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: Self.drainQuietPeriod) {
            let handler = bound.value
            guard let context = handler.context, !handler.closing, handler.drainReads == reads,
                  handler.inFlight.isEmpty, handler.held.isEmpty, handler.queuedLines.isEmpty else { return }
            handler.closeAfterFlush(context: context)
        }
    }

    private func closeAfterFlush(context: ChannelHandlerContext) {
        guard !closing else { return }
        emitOutbound(context: context)
        closing = true
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(channel.allocator.buffer(capacity: 0)))
            .whenComplete { _ in channel.close(promise: nil) }
    }

    /// Replies that arrive between reads are coalesced: one buffer and one flush per
    /// event-loop tick.
    private func scheduleFlush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let handler = bound.value
            handler.flushScheduled = false
            guard let context = handler.context else { return }
            handler.emitOutbound(context: context)
            context.flush()
        }
    }

    /// Whether back-pressure applies: too much in flight, or replies above the water mark.
    private func mustHold(context: ChannelHandlerContext) -> Bool {
        inFlight.count >= maxInFlight || !context.channel.isWritable
    }

    private func resumeReadingIfPossible(context: ChannelHandlerContext) {
        guard readPending, draining || (held.isEmpty && queuedLines.isEmpty && !mustHold(context: context)) else {
            return
        }
        readPending = false
        context.read()
    }
}


extension CallbackQueue {
    /// Whether deliveries are ordered by each request's priority (an `operationQueue`).
    fileprivate var ordersByPriority: Bool {
        if case .operationQueue = self { return true }
        return false
    }
}

/// Replies that other threads (the ioQueue, a callback queue) produced for one connection,
/// waiting for its event loop.
///
/// A burst of replies costs one hop: only the post that finds the mailbox idle schedules a
/// drain on the loop, and that drain completes everything posted until it runs. (One hop
/// per reply made every reply a loop task of its own, with its own flush and `write(2)`,
/// and a wake-up of the loop for each.) Order: the order of posting.
///
/// Threading: `post` from any thread; `takeAll` on the connection's event loop. `Locked`
/// guards the queue and the scheduled flag; held only to append or swap.
final class ReplyMailbox: Sendable {
    /// One reply, with what the in-flight table and the metrics need to finish it.
    struct Posted: Sendable {
        var seq: UInt64
        var reply: RPCReply
        var observed: Observer.Request?
    }

    private struct State {
        var replies: [Posted] = []
        var drainScheduled = false
    }

    private let state = Locked(State())

    /// Queues a reply; true when the caller must schedule a drain (none is pending).
    func post(_ posted: Posted) -> Bool {
        state.withLock { s in
            s.replies.append(posted)
            if s.drainScheduled { return false }
            s.drainScheduled = true
            return true
        }
    }

    /// Whether replies wait (a quick look; the loop drains them before answering in order).
    var hasPending: Bool { state.withLock { !$0.replies.isEmpty } }

    /// Everything posted so far; the next post schedules a new drain.
    func takeAll() -> [Posted] {
        state.withLock { s in
            s.drainScheduled = false
            let taken = s.replies
            s.replies = []
            return taken
        }
    }
}

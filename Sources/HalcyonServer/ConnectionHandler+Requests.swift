// The start path of a connection's requests: the one direct-write check, the memory,
// direct and queued paths (one prepared call handed from each to the next), the in-flight
// entry each reply comes back to, and cancellation.

import HalcyonCache
import HalcyonJSON
import HalcyonRPC
import HalcyonSupport
import NIOCore

extension ConnectionHandler {
    // MARK: Starting requests

    /// The one start path of an element: a cancel is carried out, anything else handled.
    /// Its one direct-write check: what must see this connection's waiting direct writes,
    /// or be answered after them, commits them first.
    func start(_ element: consuming RPCElement, batch: Batch?, slot: Int, context: ChannelHandlerContext) {
        if direct?.mustFollow(element, inBatch: batch != nil, session: session, dispatcher: dispatcher) == true {
            commitDirectWrites()
        }
        switch consume element {
        case .invalid(let id, let error):
            if id != nil {
                deliver(RPCReply.error(id: id, error), batch: batch, slot: slot, context: context)
            }
        case .request(let request):
            if request.flags.contains(.transport) {
                cancel(request, context: context)
            } else if request.spec == nil, request.method.hasPrefix("$/") {
                // Unknown protocol-level notifications are ignored; requests get -32601.
                if request.id != nil {
                    deliver(RPCReply.error(id: request.id, .methodNotFound(method: request.method)),
                            batch: batch, slot: slot, context: context)
                }
            } else if !lifecycle.isOpen {
                if request.id != nil {
                    deliver(RPCReply.error(id: request.id, .shuttingDown), batch: batch, slot: slot, context: context)
                }
            } else {
                dispatch(request, batch: batch, slot: slot, context: context)
            }
        }
    }

    /// Prepares `request` once and hands the prepared call down the paths in turn: the
    /// direct write, the memory answer, then `handle`, each taking it as the one before
    /// left it.
    private func dispatch(_ request: RPCRequest, batch: Batch?, slot: Int, context: ChannelHandlerContext) {
        let observed = observer?.started(request, peer: session.peerDescription, loop: loopCounters, at: requestStart())
        var call = dispatcher.prepare(request, session: session)
        if batch == nil, let id = request.id {
            if case .untouch = session.callbackQueue {
                if let group = direct?.group, let write = dispatcher.directWrite(call) {
                    direct?.joining(write)
                    group.add(write, observed: observed, from: context.channel)
                    if !insideRead { commitDirectWrites() }
                    return
                }
                switch dispatcher.answerFromMemory(&call, into: &outbound.writer) {
                case .answered(let error):
                    memoryAnswered(observed, error: error)
                    appended(context: context)
                    return
                case .notAnswered:
                    // What `handle` queues goes after the writes before it.
                    commitDirectWrites()
                }
            } else if !session.callbackQueue.ordersByPriority {
                var writer = JSONWriter(capacity: 256)
                switch dispatcher.answerFromMemory(&call, into: &writer) {
                case .answered(let error):
                    // Only the policy's delivery hop remains.
                    let reply = RPCReply(id: id, element: writer.bytes, error: error)
                    let respond = track(id: id, batch: nil, slot: 0, observed: observed, context: context)
                    session.callbackQueue.execute { respond(reply) }
                    return
                case .notAnswered:
                    break
                }
            }
        }
        let seq = inFlight.nextSeq
        let respond = track(id: request.id, batch: batch, slot: slot, observed: observed, context: context)
        // The reply may already have been written (a memory hit under `untouch`).
        if let task = dispatcher.handle(call, respond: respond) {
            inFlight.attach(task, to: seq)
        }
    }

    /// Starts a line of a hot shape (`HotLine`), if it is one and the connection is where
    /// the synchronous and direct paths would take the request it parses to: under
    /// `untouch`, open, nothing held before it and no back-pressure, no trace lines to
    /// write, outside `--access` (which the dispatcher checks). Returns false, having done
    /// nothing, for any other line, and for one the dispatcher declines (a key or value the
    /// params would refuse, a get memory cannot answer at once, a set the journal cannot
    /// take at once): the ordinary path then parses it.
    ///
    /// The steps are those of `start` and `dispatch` for a request with an id. A get: the
    /// direct-write check (a read of a key a waiting write writes commits the writes
    /// first), the memory answer, and on a miss the commit and the queued read with its
    /// in-flight entry. A set: it joins the loop's direct-write group.
    func startHotLine(_ line: ByteBuffer, context: ChannelHandlerContext) -> Bool {
        guard case .untouch = session.callbackQueue, session.access == nil, lifecycle.isOpen, openingAt == nil,
              !mustHold(context: context), observer?.tracesRequests != true else { return false }
        return line.withUnsafeReadableBytes { bytes -> Bool in
            guard let hot = HotLine.read(bytes) else { return false }
            let key = CacheKey(utf8: UnsafeRawBufferPointer(rebasing: bytes[hot.key]))
            let start = requestStart()
            switch hot.method {
            case .get:
                return startHotGet(hot, key: key, start: start, context: context)
            case .set:
                guard let group = direct?.group,
                      let write = dispatcher.hotDirectWrite(
                        id: hot.id, key: key, value: Array(UnsafeRawBufferPointer(rebasing: bytes[hot.value])),
                        session: session)
                else { return false }
                direct?.joining(write)
                group.add(write, observed: observer?.started(methodIndex: hot.methodIndex, loop: loopCounters, at: start),
                          from: context.channel)
                if !insideRead { commitDirectWrites() }
                return true
            }
        }
    }

    /// The get of a hot line (see `startHotLine`).
    private func startHotGet(_ hot: HotRequest, key: CacheKey, start: UInt64, context: ChannelHandlerContext) -> Bool {
        if direct?.mustFollowRead(of: key) == true { commitDirectWrites() }
        switch dispatcher.answerHotGet(
            id: hot.id, key: key, session: session, arrivedBy: arrivalInstant(), into: &outbound.writer
        ) {
        case .answered(let error):
            memoryAnswered(observer?.started(methodIndex: hot.methodIndex, loop: loopCounters, at: start), error: error)
            appended(context: context)
            return true
        case .missed(let miss):
            // What is queued goes after the writes before it.
            commitDirectWrites()
            let observed = observer?.started(methodIndex: hot.methodIndex, loop: loopCounters, at: start)
            let seq = inFlight.nextSeq
            let respond = track(id: .number(hot.id), batch: nil, slot: 0, observed: observed, context: context)
            if let task = dispatcher.retrieve(after: miss, session: session, respond: respond) {
                inFlight.attach(task, to: seq)
            }
            return true
        case .declined:
            return false
        }
    }

    /// When a request starting now started: the read burst's instant inside one
    /// (`Observer.Burst`), else the clock's.
    private func requestStart() -> UInt64 {
        insideRead ? burst.requestStart() : MonotonicClock.nanoseconds()
    }

    /// Records a memory answer written at once: one without an error, given inside a read
    /// burst, when the burst ends; any other now.
    private func memoryAnswered(_ observed: Observer.Request?, error: RPCError?) {
        guard let observed else { return }
        if error == nil, insideRead { burst.answered(observed) } else { observed.finished(error: error) }
    }

    /// Enters a request with id `id` (nil: a notification) in the in-flight table and
    /// returns the closure its reply comes back through, from any thread.
    private func track(
        id: RPCID?, batch: Batch?, slot: Int, observed: Observer.Request?, context: ChannelHandlerContext
    ) -> @Sendable (RPCReply) -> Void {
        let seq = inFlight.begin(id: id, batch: batch, slot: slot)
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
                // From the ioQueue the loop is woken once per round, for every reply of it.
                DeliveryRound.whenRoundEnds { eventLoop.execute { bound.value.drainMailbox() } }
            }
        }
    }

    /// Carries out a `$/cancelRequest`, on the event loop: withdraws the requests read and
    /// not started (`-32800`, `started: false`), marks the in-flight entries and cancels
    /// their `CacheTask`s synchronously. A success reply that reaches a marked entry is
    /// replaced by `-32800` (`started: true`): mark and write happen on this one thread, so
    /// no success is written after the cancel was read.
    func cancel(_ request: RPCRequest, context: ChannelHandlerContext) {
        // The table's only transport method today is $/cancelRequest.
        guard case .cancel(let target)? = try? dispatcher.transportAction(for: request) else { return }
        for (place, held) in inbound.withdraw(target) {
            // A line being opened holds its elements from the head: their place moved.
            if let index = openingAt, place < index { openingAt = index - 1 }
            deliver(RPCReply.error(id: target, .cancelled(started: false)), batch: held.batch, slot: held.slot,
                    context: context)
        }
        // Synchronous: an unstarted task will never run, and delivers -32800 (started:
        // false) through the callback queue.
        for task in inFlight.cancel(id: target) { task.cancel() }
    }

    /// Commits the loop's group now if this connection has writes in it (with every other
    /// connection's), so that what comes next is handled after them.
    func commitDirectWrites() {
        // Through a copy: the commit hands this connection its outcomes, which changes `direct`.
        if let group = direct?.groupToCommit { group.commit() }
    }

    /// The group committed writes of this connection: their replies join `outbound`, and go
    /// out now unless a read burst is under way (its end sends them).
    func applyDirectOutcomes(_ outcomes: [DirectWriteGroup.Outcome], context: ChannelHandlerContext) {
        // Replies to this connection's queued work that the ioQueue produced before the
        // commit (their jobs ran ahead of it) go first, as they would had the writes been
        // queued too: with `untouch`, replies to ioQueue requests leave in arrival order.
        if mailbox.hasPending { drainMailbox() }
        direct?.applied(outcomes.count)
        // The outcomes of one commit are answered together: one reading of the clock.
        let now = MonotonicClock.nanoseconds()
        for applied in outcomes {
            let error = lifecycle.writesReplies
                ? dispatcher.writeReply(applied.outcome, into: &outbound.writer) : nil
            noteStorageError(error)
            applied.observed?.finished(error: error, at: now)
        }
        if insideRead {
            if outbound.isFull { emitOutbound(context: context) }
            return
        }
        emitOutbound(context: context)
        context.flush()
    }

}

extension CallbackQueue {
    /// Whether deliveries are ordered by each request's priority (an `operationQueue`).
    fileprivate var ordersByPriority: Bool {
        if case .operationQueue = self { return true }
        return false
    }
}

// A connection's replies: completed on its event loop, written into its outbound buffer,
// and handed to the channel by its flush rule.

import HalcyonRPC
import NIOCore

extension ConnectionHandler {
    // MARK: Replies

    /// Completes every reply posted to the mailbox, in posting order.
    func drainMailbox() {
        for posted in mailbox.takeAll() {
            complete(seq: posted.seq, reply: posted.reply, observed: posted.observed)
        }
    }

    /// Runs on the event loop for every reply, whichever thread produced it. The reply is
    /// observed here, once written, so a deferred result that could not be encoded is
    /// recorded with its error (and the loop's own histograms take it).
    func complete(seq: UInt64, reply: RPCReply, observed: Observer.Request?) {
        guard let context, let entry = inFlight.finish(seq) else {
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
        release(context: context)
    }

    /// Counts a reply's error if the storage engine failed (not ready, cannot write,
    /// cannot read), for the daemon's warnings.
    func noteStorageError(_ error: RPCError?) {
        if let error, (-32003 ... -32001).contains(error.code) {
            counters.storageErrorReplied("\(error.reason): \(error.message)")
        }
    }

    /// Writes a reply, alone or into its batch's line; returns the error that replaced a
    /// deferred result which could not be encoded.
    @discardableResult
    func deliver(_ reply: RPCReply, batch: Batch?, slot: Int, context: ChannelHandlerContext) -> RPCError? {
        guard let batch else {
            // A deferred result is encoded here, on the loop, straight into `outbound`.
            guard lifecycle.writesReplies else { return nil }
            let failure = reply.writeLine(into: &outbound.writer)
            appended(context: context)
            return failure
        }
        let (element, failure) = reply.element()
        if let line = batch.fill(slot, with: element) { write(line, context: context) }
        return failure
    }

    /// Appends one reply line to `outbound` (see `appended`).
    func write(_ line: [UInt8], context: ChannelHandlerContext) {
        guard lifecycle.writesReplies else { return }
        outbound.append(line: line)
        appended(context: context)
    }

    /// After a reply line went into `outbound`: inside a read burst it waits for the
    /// burst's end (unless `outbound` is full); between reads it goes out with this tick's
    /// flush.
    func appended(context: ChannelHandlerContext) {
        if outbound.isFull { emitOutbound(context: context) }
        if !insideRead { scheduleFlush() }
    }

    /// Hands the gathered reply lines to the channel as one buffer (not flushed), or closes
    /// a connection whose client does not read them (see `ConnectionOutbound`).
    func emitOutbound(context: ChannelHandlerContext) {
        guard lifecycle.writesReplies else { return outbound.discard() }
        let channel = context.channel
        let emission = outbound.emit(
            channelWritable: channel.isWritable,
            unsent: { (try? channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0 },
            allocator: channel.allocator)
        switch emission {
        case .nothing:
            return
        case .write(let buffer):
            context.write(wrapOutboundOut(buffer), promise: nil)
        case .overflow(let unsent):
            lifecycle.close()
            counters.outputBufferOverflowed()
            logger.warning("disconnected a client that does not read its replies", metadata: [
                "peer": "\(session.peerDescription)", "unsentBytes": "\(unsent)",
                "maxOutputBuffer": "\(outbound.maxBuffered)",
            ])
            context.close(promise: nil)
        }
    }

    /// Replies that arrive between reads are coalesced: one buffer and one flush per
    /// event-loop tick, at the end of the tick's turn (`TurnFlush`).
    func scheduleFlush() {
        guard !outbound.flushScheduled, let turnFlush else { return }
        outbound.flushScheduled = true
        turnFlush.add(self)
    }

    /// The end of the turn `scheduleFlush` waited for: the gathered replies go out.
    func flushAtTurnEnd() {
        outbound.flushScheduled = false
        guard let context else { return }
        emitOutbound(context: context)
        context.flush()
    }
}

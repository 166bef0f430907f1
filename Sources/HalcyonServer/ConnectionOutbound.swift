// The reply bytes of one connection not yet handed to its channel, and their rules.

import HalcyonJSON
import HalcyonRPC
import NIOCore

/// The reply lines of one connection that have not been handed to the channel yet, in the
/// one order every reply takes: the order they were appended in.
///
/// Flush rule: the lines gathered during a read burst of several lines, and those appended
/// between reads, go to the channel as one buffer with one flush at the end of the event
/// loop's turn, once every channel's reads of the turn are done (`scheduleFlush`,
/// `TurnFlush`); the reply of a burst of one line goes when the burst ends; the replies of
/// direct writes go when the loop's group is committed, also at the end of the turn
/// (`applyDirectOutcomes`); and once `chunk` bytes wait they go at once, even inside a
/// burst, so writability (and with it back-pressure) follows the replies of a long burst.
///
/// Overflow rule: if the bytes the channel still holds unsent plus the bytes about to be
/// handed over pass `maxBuffered` while earlier bytes are still unsent, the client is not
/// reading its replies: `emit` says so and hands nothing over, and the connection is
/// closed (Redis's client-output-buffer hard limit). A single buffer larger than the bound
/// still goes out when nothing else is unsent.
///
/// Threading: a value owned by one `ConnectionHandler`, used only on its event loop.
struct ConnectionOutbound {
    /// Collects the replies of one batch; written as one line when the last arrives.
    ///
    /// Threading: shared by the inbound queue, the in-flight table and the outbound buffer
    /// of one connection, all on its event loop; never leaves it.
    final class Batch {
        private var slots: [[UInt8]?]
        private var remaining: Int

        init(count: Int) {
            slots = Array(repeating: nil, count: count)
            remaining = count
        }

        /// Fills `slot`; returns the whole batch line once every slot is filled.
        func fill(_ slot: Int, with element: [UInt8]) -> [UInt8]? {
            slots[slot] = element
            remaining -= 1
            guard remaining == 0 else { return nil }
            var line: [UInt8] = [UInt8(ascii: "[")]
            line.reserveCapacity(slots.reduce(2) { $0 + ($1?.count ?? 0) + 1 })
            for (index, bytes) in slots.enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                line.append(contentsOf: bytes ?? [])
            }
            line.append(UInt8(ascii: "]"))
            return line
        }
    }

    /// What `emit` did.
    enum Emission {
        /// Nothing waited.
        case nothing
        /// The gathered lines, as one buffer to write.
        case write(ByteBuffer)
        /// The client is not reading: `unsent` bytes were still in the channel. The lines
        /// were dropped; the connection must close.
        case overflow(unsent: Int)
    }

    /// Bytes gathered above which they go to the channel at once, even inside a burst.
    static let chunk = 64 << 10

    /// The largest capacity `spare` keeps: a connection that once sent a large value does
    /// not hold its buffer for good.
    static let spareLimit = 16 << 10

    /// Unsent bytes above which a client that is not reading is disconnected.
    let maxBuffered: Int
    /// The lines gathered; replies are encoded straight into it.
    var writer = JSONWriter(capacity: 4096)
    /// Whether this connection already waits for its loop's end-of-turn flush.
    var flushScheduled = false
    /// The buffer the last emit handed over, kept to carry the next one: once the channel
    /// has written and dropped it, its storage is this value's alone and is refilled in
    /// place, where a new buffer per read burst would cost an allocation and a free each
    /// (while the channel still holds it, the refill takes fresh storage, as a value's
    /// copy-on-write does). Kept only up to `spareLimit` bytes of capacity.
    private var spare: ByteBuffer?
    /// The capacity of the buffer kept for the next emit; nil when none is kept.
    var spareCapacity: Int? { spare?.capacity }
    /// The most the channel holds unsent while it is writable: its high water mark (a
    /// write past the mark makes it unwritable at once). nil when unknown.
    let unsentBoundWhileWritable: Int?

    init(maxBuffered: Int, unsentBoundWhileWritable: Int? = nil) {
        self.maxBuffered = maxBuffered
        self.unsentBoundWhileWritable = unsentBoundWhileWritable
    }

    var isEmpty: Bool { writer.bytes.isEmpty }

    /// Whether `chunk` bytes wait, so they must go to the channel now.
    var isFull: Bool { writer.bytes.count >= Self.chunk }

    /// Appends one reply line (`line` without its newline).
    mutating func append(line: [UInt8]) {
        writer.raw(line)
        writer.newline()
    }

    /// Whether the overflow rule could trip on the lines gathered, so `emit` needs the
    /// channel's unsent bytes: not while the channel is writable and its high water mark
    /// plus these lines fit under `maxBuffered` (asking the channel is an option lookup
    /// through dynamic casts, on every emit).
    func needsUnsentCount(channelWritable: Bool) -> Bool {
        guard channelWritable, let bound = unsentBoundWhileWritable else { return true }
        return bound + writer.bytes.count > maxBuffered
    }

    /// Takes the gathered lines as one buffer, checking the overflow rule against the bytes
    /// the channel still holds unsent. Empties the buffer in every case.
    ///
    /// `unsent` is asked only when `needsUnsentCount` says the rule could trip. Both are
    /// taken in this one mutating call, so the handler never copies this value to ask.
    mutating func emit(channelWritable: Bool, unsent: () -> Int, allocator: ByteBufferAllocator) -> Emission {
        guard !writer.bytes.isEmpty else { return .nothing }
        defer { writer.reset() }
        let count = writer.bytes.count
        if needsUnsentCount(channelWritable: channelWritable) {
            let unsent = unsent()
            if unsent > 0, unsent + count > maxBuffered { return .overflow(unsent: unsent) }
        }
        var buffer = spare.take() ?? allocator.buffer(capacity: count)
        buffer.clear()
        buffer.writeBytes(writer.bytes)
        if buffer.capacity <= Self.spareLimit { spare = buffer }
        return .write(buffer)
    }

    /// Drops whatever was gathered (the connection is closing).
    mutating func discard() {
        writer.reset()
        spare = nil
    }
}

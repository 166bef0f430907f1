// Line framing: splits a connection's byte stream into request lines and enforces
// `--max-line-bytes` without ever closing the connection for it.
//
// How lines are cut: the connection's handler hands each read's bytes here, and lines are
// cut a step at a time; an unfinished line waits for the next read, copied out of the read
// buffer once and then grown in place (a fragment small beside the buffer it is in is
// copied out compact, so an idle connection holds only its fragment). No
// `ByteToMessageHandler` in front: it cost a pipeline hop and a wrapped frame per line.
// A line is copied once however many reads it spans: copying the unfinished line again at
// every read would make the cost of a line grow with the square of its length.
//
// Unfinished lines: a line longer than `--max-line-bytes` is discarded as it arrives. All
// connections' unfinished lines together are bounded by `--max-input-buffer` (an
// `InputBudget` the framing layers share): the line that would pass it is dropped and
// answered -32005 `inputBufferFull`, and the connection carries on. Both refusals are
// counted (`lineTooLongRefusals`, `inputBufferFullRefusals`).
//
// Long lines (the connection handler's part, noted here beside the framing): jansson's
// parse time grows with the line, and on the loop a connection storing large values would
// hold every other connection of its loop for the whole parse. So a line of 64 KiB or more
// (`defaultOffLoopParseBytes`) is parsed on a concurrent parse queue and handed back
// (`linesParsedOffLoop`); so is a line of 16 KiB or more once the read burst has parsed
// 64 KiB on the loop, or while a line of its connection waits for its parse (shorter lines
// stay: for them the hop costs more than the parse). It keeps its place: until it is back
// the connection reads no more, and the lines read behind it are parsed but wait in
// arrival order. A cancel alone on a line does not wait: it is carried out at once and
// also marks the waiting lines. On close, a line still being parsed is parsed on the loop,
// so it is answered `shuttingDown` like every other line read. The lines waiting for or in an off-loop parse are bounded
// across connections by a second budget as large as `--max-input-buffer`; past it a long
// line is parsed on its loop as before (that loop reads nothing meanwhile, which is the
// back-pressure). The figures behind the two sizes, and the latencies of a connection
// beside one sending long lines, are in Benchmarks/RESULTS.md, "Parsing long lines off the
// event loop".

import HalcyonSupport
import NIOCore
#if canImport(Glibc)
import Glibc
#endif

/// One unit the framing layer hands to the connection.
enum LineFrame: Equatable {
    /// A complete, non-empty line without its `\n` (and without a `\r` before it).
    case line(ByteBuffer)
    /// A line longer than the limit was dropped (up to and including its `\n`); the
    /// connection answers it with `-32600 lineTooLong` and carries on.
    case tooLong
    /// An unfinished line was dropped because all connections' unfinished lines together
    /// reached the `InputBudget`; answered `-32005 inputBufferFull`, then as `.tooLong`.
    case overBudget
}

/// The bytes of unfinished request lines all connections may hold together
/// (`--max-input-buffer`), so many slow senders of long lines cannot exhaust memory
/// although each stays under `--max-line-bytes`.
///
/// Threading: thread-safe; one `Locked` counter shared by every connection's decoder.
final class InputBudget: Sendable {
    let limit: Int
    private let used = Locked(0)

    init(limit: Int) { self.limit = limit }

    /// Takes `bytes` more from the budget; false (and nothing taken) when it would pass
    /// the limit.
    func charge(_ bytes: Int) -> Bool {
        used.withLock { used in
            guard used + bytes <= limit else { return false }
            used += bytes
            return true
        }
    }

    func release(_ bytes: Int) {
        guard bytes > 0 else { return }
        used.withLock { $0 -= bytes }
    }

    /// Bytes held now, for tests and logs.
    var inUse: Int { used.withLock { $0 } }
}

/// Splits bytes on `\n`, drops empty lines, strips a trailing `\r`, and discards any
/// line longer than `maxLineBytes` while still reading past it.
///
/// Unlike NIO's own line decoder, exceeding the limit is not a fatal error: the
/// protocol keeps the connection usable, so the decoder enters a *discarding* state,
/// reports `.tooLong` once, throws the line's bytes away as they arrive (so memory stays
/// bounded by the limit, not by what the peer sends) and resumes at the next `\n`.
///
/// ```
///  state       on "…\n" found                  on no "\n" yet
///  .reading    emit line (or .tooLong if big)  buffer > limit: emit .tooLong, -> .discarding
///  .discarding drop through "\n", -> .reading  drop everything buffered
/// ```
///
/// `ConnectionHandler` runs it itself, a step at a time (`step`), on the bytes of each
/// read: a `ByteToMessageHandler` in front would cost a pipeline hop and a wrapped frame
/// per line. As a `ByteToMessageDecoder` it still frames in a pipeline of its own (tests).
///
/// Threading: owned by one connection; runs on that channel's event loop only.
struct LineFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = LineFrame

    private enum State {
        case reading
        case discarding
    }

    let maxLineBytes: Int
    /// Shared by all connections; nil means no bound across connections.
    let budget: InputBudget?
    /// What this decoder holds of `budget`: the unfinished line's bytes so far.
    private var charged = 0
    private var state = State.reading
    /// How many readable bytes are already known to hold no `\n`, so a line that
    /// arrives in many reads is scanned once, not once per read.
    private var scanned = 0
    /// The bytes of an unfinished line between reads (`resume`, `keep`), and whether the
    /// buffer `resume` returned last is that copy rather than the read buffer.
    private var unfinished: ByteBuffer?
    private var ownsResumed = false

    init(maxLineBytes: Int, budget: InputBudget? = nil) {
        precondition(maxLineBytes > 0, "maxLineBytes must be positive")
        self.maxLineBytes = maxLineBytes
        self.budget = budget
    }

    /// Matches the budget's charge to `held` bytes of unfinished line; false when the
    /// budget cannot cover them.
    private mutating func chargeBudget(holding held: Int) -> Bool {
        guard let budget else { return true }
        if held > charged {
            guard budget.charge(held - charged) else { return false }
        } else {
            budget.release(charged - held)
        }
        charged = held
        return true
    }

    /// What one step of framing found.
    enum Step {
        /// A frame; step again.
        case frame(LineFrame)
        /// Bytes consumed with nothing to report (a blank line, the end of a dropped
        /// line); step again.
        case skipped
        /// No complete line is buffered: wait for the next read.
        case needMoreData
    }

    /// Gives back what this decoder holds of the shared budget, and drops the unfinished
    /// line `resume` kept (the connection closed or the decoder is gone).
    mutating func release() {
        unfinished = nil
        budget?.release(charged)
        charged = 0
    }

    /// The bytes of a read to step through: the read itself, or the unfinished line kept
    /// from earlier reads with the read appended (the framer has already scanned the
    /// earlier bytes and resumes where it stopped). Appended in place (the kept copy is
    /// unique), so a line read in many pieces is copied once, not once a read. Hand what
    /// is left after `.needMoreData` to `keep`.
    mutating func resume(_ read: ByteBuffer) -> ByteBuffer {
        guard var earlier = unfinished else { return read }
        unfinished = nil
        var read = read
        earlier.writeBuffer(&read)
        ownsResumed = true
        return earlier
    }

    /// Keeps what is left of the bytes `resume` gave, an unfinished line, for the next read.
    mutating func keep(_ rest: inout ByteBuffer, allocator: ByteBufferAllocator) {
        defer { ownsResumed = false }
        guard rest.readableBytes > 0 else { return }
        if ownsResumed, rest.readableBytes * 2 >= rest.capacity {
            // Most of our own copy is a line still arriving: kept in place (lines framed
            // from its front dropped), not copied again.
            rest.discardReadBytes()
            unfinished = rest
        } else {
            // Copied out, compact: the read buffer it came in can be reused by the next
            // read, and an idle connection holds only its fragment.
            var kept = allocator.buffer(capacity: rest.readableBytes)
            kept.writeBuffer(&rest)
            unfinished = kept
        }
    }

    mutating func decoderRemoved(context: ChannelHandlerContext) {
        release()
    }

    /// Frames one line of `buffer`, consuming its bytes (see the type's table).
    mutating func step(_ buffer: inout ByteBuffer) -> Step {
        let readable = buffer.readableBytes
        let newline: Int? = buffer.withUnsafeReadableBytes { bytes in
            guard scanned < bytes.count, let base = bytes.baseAddress else { return nil }
            guard let hit = memchr(base + scanned, 0x0A, bytes.count - scanned) else { return nil }
            return base.distance(to: UnsafeRawPointer(hit))
        }

        guard let newline else {
            switch state {
            case .reading:
                if readable > maxLineBytes {
                    state = .discarding
                    buffer.moveReaderIndex(forwardBy: readable)
                    scanned = 0
                    _ = chargeBudget(holding: 0)
                    return .frame(.tooLong)
                } else if !chargeBudget(holding: readable) {
                    state = .discarding
                    buffer.moveReaderIndex(forwardBy: readable)
                    scanned = 0
                    _ = chargeBudget(holding: 0)
                    return .frame(.overBudget)
                } else {
                    scanned = readable
                }
            case .discarding:
                buffer.moveReaderIndex(forwardBy: readable)
                scanned = 0
            }
            return .needMoreData
        }

        scanned = 0
        // The line is complete: it leaves the decoder now (or is dropped), so it no longer
        // counts as unfinished input.
        _ = chargeBudget(holding: 0)
        switch state {
        case .discarding:
            // The over-long line was already reported when it crossed the limit.
            buffer.moveReaderIndex(forwardBy: newline + 1)
            state = .reading
            return .skipped
        case .reading:
            var length = newline
            if length > 0, buffer.getInteger(at: buffer.readerIndex + length - 1, as: UInt8.self) == 0x0D {
                length -= 1
            }
            if length > maxLineBytes {
                buffer.moveReaderIndex(forwardBy: newline + 1)
                return .frame(.tooLong)
            } else if length == 0 {
                buffer.moveReaderIndex(forwardBy: newline + 1)
                return .skipped
            } else {
                let line = buffer.getSlice(at: buffer.readerIndex, length: length)!
                buffer.moveReaderIndex(forwardBy: newline + 1)
                return .frame(.line(line))
            }
        }
    }

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        switch step(&buffer) {
        case .frame(let frame):
            context.fireChannelRead(wrapInboundOut(frame))
            return .continue
        case .skipped:
            return .continue
        case .needMoreData:
            return .needMoreData
        }
    }

    mutating func decodeLast(
        context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool
    ) throws -> DecodingState {
        // Complete lines still buffered are served; a trailing fragment without its
        // `\n` is not a message (framing is by newline) and is dropped.
        while try decode(context: context, buffer: &buffer) == .continue {}
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        return .needMoreData
    }
}

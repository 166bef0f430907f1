// The transport in-process, on SwiftNIO's EmbeddedChannel: framing, back-pressure, cancel
// withdrawal, batches, flushes and the drain, with no socket and no sleeps. Time moves
// only when a test advances the embedded loop. Only requests answered on the loop itself
// (server.ping) are used: EmbeddedEventLoop may not be touched from the ioQueue, so work
// that runs there is tested end to end instead.

import Foundation
import HalcyonCache
import HalcyonSupport
import HalcyonJSON
import HalcyonRPC
@testable import HalcyonServer
import Logging
import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing

@Suite("Line framing")
struct LineFrameDecoderTests {
    private func line(_ text: String) -> LineFrame { .line(ByteBuffer(string: text)) }

    @Test func framesWholeSplitAndDripFedInput() throws {
        try ByteToMessageDecoderVerifier.verifyDecoder(
            stringInputOutputPairs: [
                ("a\n", [line("a")]),
                ("bc\r\n", [line("bc")]),
                ("\n", []),
                ("defgh\n", [line("defgh")]),
            ],
            decoderFactory: { LineFrameDecoder(maxLineBytes: 8) }
        )
    }

    @Test func overLongLineIsReportedOnceAndSkipped() throws {
        try ByteToMessageDecoderVerifier.verifyDecoder(
            stringInputOutputPairs: [
                ("0123456789abcdef\n", [.tooLong]),
                ("ok\n", [line("ok")]),
            ],
            decoderFactory: { LineFrameDecoder(maxLineBytes: 4) }
        )
    }

    @Test func budgetBoundsUnfinishedLinesAcrossDecoders() throws {
        let budget = InputBudget(limit: 10)
        let first = EmbeddedChannel(handler: ByteToMessageHandler(LineFrameDecoder(maxLineBytes: 100, budget: budget)))
        let second = EmbeddedChannel(handler: ByteToMessageHandler(LineFrameDecoder(maxLineBytes: 100, budget: budget)))
        try first.writeInbound(ByteBuffer(string: "12345678"))
        #expect(budget.inUse == 8)
        try second.writeInbound(ByteBuffer(string: "abcd"))
        #expect(try second.readInbound(as: LineFrame.self) == .overBudget)
        #expect(budget.inUse == 8)
        // The refused line is skipped through its end; the next one is framed.
        try second.writeInbound(ByteBuffer(string: "ef\nok\n"))
        #expect(try second.readInbound(as: LineFrame.self) == line("ok"))
        // A finished line no longer counts, nor does a closed connection's fragment.
        try first.writeInbound(ByteBuffer(string: "9\n"))
        #expect(try first.readInbound(as: LineFrame.self) == line("123456789"))
        #expect(budget.inUse == 0)
        try first.writeInbound(ByteBuffer(string: "xyz"))
        #expect(budget.inUse == 3)
        _ = try first.finish()
        #expect(budget.inUse == 0)
        _ = try second.finish()
    }
}

@Suite("Connection handler", .timeLimit(.minutes(1)))
struct ConnectionHandlerTests {
    /// A connection on an embedded channel in front of a real cache in a fresh folder.
    final class Harness {
        let folder: URL
        let cache: HybridCache
        let channel: EmbeddedChannel
        let counters = ServerCounters()

        /// `longLine`: the shortest line parsed apart, in a later task of the loop.
        /// `memoryClock`: the memory tier's clock (default the system's).
        init(
            maxInFlight: Int = 16, longLine: Int = ConnectionHandler.defaultOffLoopParseBytes,
            parseBudget: InputBudget? = nil, memoryClock: (any CacheClock)? = nil
        ) throws {
            folder = URL(fileURLWithPath: NSTemporaryDirectory())
                .appendingPathComponent("hc-transport-\(UUID().uuidString.prefix(8))")
            var memory = MemoryStorage.Config()
            if let memoryClock { memory.clock = memoryClock }
            cache = HybridCache(config: .init(memory: memory, disk: .init(directory: folder)))
            let facts = ServerFacts(
                version: "test", socketPath: "/nowhere", startedAt: Date(), limits: [],
                diskExpiration: .never, memoryExpiration: .never, debugMethodsEnabled: true,
                liveCounters: { LiveCounters() }
            )
            let handler = ConnectionHandler(
                dispatcher: Dispatcher(cache: cache, facts: facts), counters: counters,
                maxInFlight: maxInFlight, maxBatch: 10, maxLineBytes: 1 << 20,
                session: ConnectionSession(peerDescription: "test"), logger: Logger(label: "test"),
                parseBudget: parseBudget, offLoopParseBytes: longLine, parseQueue: nil
            )
            channel = EmbeddedChannel()
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(unixDomainSocketPath: "/nowhere")).wait()
        }

        deinit { try? FileManager.default.removeItem(at: folder) }

        /// Delivers one read burst, then the rest of the loop's turn: its tasks, the
        /// end-of-turn flush among them.
        func send(_ text: String) throws {
            try channel.writeInbound(ByteBuffer(string: text))
            channel.embeddedEventLoop.run()
        }

        /// Delivers one read burst without running the loop's tasks afterwards, so a long
        /// line's parse has not come back yet, and no reply has gone out (they leave at the
        /// end of the turn).
        func read(_ text: String) {
            channel.pipeline.fireChannelRead(ByteBuffer(string: text))
            channel.pipeline.fireChannelReadComplete()
        }

        /// Every reply line written so far, parsed.
        func replies() throws -> [JSONValue] {
            var out: [JSONValue] = []
            while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
                let text = buffer.readString(length: buffer.readableBytes) ?? ""
                for line in text.split(separator: "\n") {
                    out.append(try JSONValue.parse(Array(line.utf8)).get())
                }
            }
            return out
        }
    }

    private static func ping(_ id: Int) -> String { #"{"jsonrpc":"2.0","id":\#(id),"method":"server.ping"}"# + "\n" }

    @Test func answersEachLineAndSkipsBlankOnes() throws {
        let h = try Harness()
        try h.send(Self.ping(1) + "\n\r\n" + Self.ping(2))
        let ids = try h.replies().compactMap { $0["id"]?.int64 }
        #expect(ids == [1, 2])
    }

    /// A clock that moves one second on every reading, so that each reading shows.
    final class TickingClock: CacheClock, Sendable {
        private let current = Locked(Date(timeIntervalSince1970: 1_700_000_000))
        func now() -> Date { current.withLock { $0 = $0.addingTimeInterval(1); return $0 } }
    }

    /// The memory hits of one socket read are judged and extended at one reading of the
    /// memory tier's clock, taken after the read; each later read takes its own.
    @Test func memoryHitsOfOneReadShareOneInstant() throws {
        let h = try Harness(memoryClock: TickingClock())
        // Stored in memory directly: a `cache.set` line may queue behind the cache's
        // start-up work and answer later.
        #expect(h.cache.memoryStorage.store(CacheEntry(bytes: Array("v".utf8)), forKey: "k", expiration: .seconds(100)))
        func get(_ id: Int) -> String { #"{"jsonrpc":"2.0","id":\#(id),"method":"cache.get","params":{"key":"k"}}"# + "\n" }
        try h.send(get(1) + get(2) + get(3))
        let together = try h.replies().map { $0["result"]?["expiresAt"]?.int64 }
        try h.send(get(4))
        try h.send(get(5))
        let apart = try h.replies().map { $0["result"]?["expiresAt"]?.int64 }
        #expect(together.count == 3 && together.allSatisfy { $0 != nil && $0 == together[0] }, "\(together)")
        #expect(apart.count == 2 && apart.allSatisfy { $0 != nil }, "\(apart)")
        if let first = together.first ?? nil, apart.count == 2, let fourth = apart[0], let fifth = apart[1] {
            #expect(first < fourth && fourth < fifth)
        }
    }

    @Test func batchRepliesAsOneLine() throws {
        let h = try Harness()
        try h.send("[" + Self.ping(1).dropLast() + "," + Self.ping(2).dropLast() + "]\n")
        let replies = try h.replies()
        #expect(replies.count == 1)
        #expect(replies.first?.kind == .array)
        #expect(replies.first?.count == 2)
    }

    @Test func repliesWaitWhileTheChannelIsNotWritable() throws {
        let h = try Harness()
        h.channel.isWritable = false
        h.channel.pipeline.fireChannelWritabilityChanged()
        try h.send(Self.ping(1) + Self.ping(2) + Self.ping(3))
        #expect(try h.replies().isEmpty, "requests started while replies could not be sent")
        h.channel.isWritable = true
        h.channel.pipeline.fireChannelWritabilityChanged()
        h.channel.embeddedEventLoop.run()
        #expect(try h.replies().compactMap { $0["id"]?.int64 } == [1, 2, 3])
    }

    @Test func cancelWithdrawsAHeldRequest() throws {
        let h = try Harness()
        h.channel.isWritable = false
        h.channel.pipeline.fireChannelWritabilityChanged()
        try h.send(Self.ping(7) + #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":7}}"# + "\n")
        let cancelled = try h.replies()
        #expect(cancelled.count == 1)
        #expect(cancelled.first?["error"]?["code"]?.int64 == -32800)
        #expect(cancelled.first?["error"]?["data"]?["started"]?.bool == false)
        h.channel.isWritable = true
        h.channel.pipeline.fireChannelWritabilityChanged()
        h.channel.embeddedEventLoop.run()
        #expect(try h.replies().isEmpty, "a withdrawn request still ran")
    }

    @Test func drainAnswersHeldRequestsThenCloses() throws {
        let h = try Harness()
        h.channel.isWritable = false
        h.channel.pipeline.fireChannelWritabilityChanged()
        try h.send(Self.ping(1) + "[" + Self.ping(2).dropLast() + "]\n")
        h.channel.pipeline.fireUserInboundEventTriggered(ShutdownEvent.drain)
        h.channel.embeddedEventLoop.run()
        let replies = try h.replies()
        #expect(replies.count == 2)
        #expect(replies.first?["error"]?["data"]?["reason"]?.string == "shuttingDown")
        #expect(replies.last?[0]?["error"]?["data"]?["reason"]?.string == "shuttingDown")
        #expect(h.channel.isActive)
        h.channel.embeddedEventLoop.advanceTime(by: ConnectionHandler.drainQuietPeriod)
        #expect(!h.channel.isActive, "an idle draining connection stayed open")
    }

    @Test func closeAnswersAHeldBatchAndCloses() throws {
        let h = try Harness()
        h.channel.isWritable = false
        h.channel.pipeline.fireChannelWritabilityChanged()
        try h.send("[" + Self.ping(1).dropLast() + "," + Self.ping(2).dropLast() + "]\n")
        h.channel.pipeline.fireUserInboundEventTriggered(ShutdownEvent.close)
        h.channel.embeddedEventLoop.run()
        let replies = try h.replies()
        #expect(replies.count == 1)
        #expect(replies.first?.count == 2)
        #expect(replies.first?[1]?["error"]?["data"]?["reason"]?.string == "shuttingDown")
        #expect(!h.channel.isActive)
    }

    /// A ping padded with spaces to `bytes` bytes (its `\n` not counted).
    private static func longPing(_ id: Int, bytes: Int = 300) -> String {
        let short = #"{"jsonrpc":"2.0","id":\#(id),"method":"server.ping"}"#
        return "{" + String(repeating: " ", count: bytes - short.count) + short.dropFirst() + "\n"
    }

    private static func cancel(_ id: Int) -> String {
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":\#(id)}}"# + "\n"
    }

    @Test func linesBehindALongLineWaitForItAndKeepTheirOrder() throws {
        let h = try Harness(longLine: 200)
        h.read(Self.longPing(1) + Self.ping(2) + "[" + Self.ping(3).dropLast() + "," + Self.ping(4).dropLast() + "]\n"
               + Self.longPing(5) + Self.ping(6))
        #expect(try h.replies().isEmpty, "a line behind a long one was answered before it")
        h.channel.embeddedEventLoop.run()
        let replies = try h.replies()
        #expect(replies.map { $0["id"]?.int64 ?? $0[0]?["id"]?.int64 } == [1, 2, 3, 5, 6])
        #expect(replies[safe: 2]?[1]?["id"]?.int64 == 4)
        // The two long lines, and the batch: a quarter of the bound or more, behind a line
        // being parsed.
        #expect(h.counters.snapshot.linesParsedOffLoop == 3)
        // Once nothing waits, a short line is answered during its read again.
        h.read(Self.ping(7))
        #expect(try h.replies().compactMap { $0["id"]?.int64 } == [7])
        #expect(h.counters.snapshot.linesParsedOffLoop == 3)
    }

    @Test func aCancelReadBehindALongLineWithdrawsItsRequest() throws {
        // Cancels are under a quarter of the bound, so they are never handed off.
        let h = try Harness(longLine: 400)
        h.read(Self.longPing(7, bytes: 450) + Self.ping(8) + Self.cancel(8) + Self.cancel(7) + Self.ping(9))
        h.channel.embeddedEventLoop.run()
        let replies = try h.replies()
        #expect(replies.map { $0["id"]?.int64 } == [7, 8, 9])
        for withdrawn in replies.prefix(2) {
            #expect(withdrawn["error"]?["code"]?.int64 == -32800)
            #expect(withdrawn["error"]?["data"]?["started"]?.bool == false)
        }
        #expect(replies.last?["result"] != nil)
    }

    @Test func aReadBurstParsesAQuarterOfTheBoundOnTheLoopThenHandsLinesOff() throws {
        let h = try Harness(longLine: 400)
        // 300 + 300 bytes parsed on the loop reach the bound: the next line of 100 bytes
        // or more goes off the loop, and a short one behind it waits for it.
        h.read(Self.longPing(1) + Self.longPing(2) + Self.longPing(3, bytes: 150) + Self.ping(4))
        h.channel.embeddedEventLoop.run()
        #expect(try h.replies().map { $0["id"]?.int64 } == [1, 2, 3, 4])
        #expect(h.counters.snapshot.linesParsedOffLoop == 1, "not exactly the third line was parsed apart")
        // The next burst starts its count again.
        h.read(Self.longPing(5))
        h.channel.embeddedEventLoop.run()
        #expect(try h.replies().map { $0["id"]?.int64 } == [5])
        #expect(h.counters.snapshot.linesParsedOffLoop == 1, "a new burst's first line was parsed apart")
    }

    @Test func longLinesPastTheParseBudgetAreParsedOnTheLoop() throws {
        let budget = InputBudget(limit: 700)
        let h = try Harness(longLine: 200, parseBudget: budget)
        h.read(Self.longPing(1) + Self.longPing(2) + Self.longPing(3, bytes: 600) + Self.ping(4))
        #expect(try h.replies().isEmpty)
        #expect(budget.inUse == 600, "the first two lines are not both charged, or the third is")
        h.channel.embeddedEventLoop.run()
        #expect(try h.replies().map { $0["id"]?.int64 } == [1, 2, 3, 4])
        #expect(budget.inUse == 0, "a parsed line still holds its share of the budget")
        // With no room left, a long line is parsed during its read, as a short one is.
        #expect(budget.charge(700))
        let apart = h.counters.snapshot.linesParsedOffLoop
        h.read(Self.longPing(5) + Self.ping(6))
        h.channel.embeddedEventLoop.run()
        #expect(try h.replies().map { $0["id"]?.int64 } == [5, 6])
        #expect(h.counters.snapshot.linesParsedOffLoop == apart, "a line was parsed apart with no budget left")
    }

    @Test func drainAnswersALongLineBeingParsedThenCloses() throws {
        let h = try Harness(longLine: 200)
        h.read(Self.longPing(1) + Self.ping(2))
        h.channel.pipeline.fireUserInboundEventTriggered(ShutdownEvent.drain)
        h.channel.embeddedEventLoop.run()
        #expect(h.channel.isActive)
        let replies = try h.replies()
        #expect(replies.map { $0["id"]?.int64 } == [1, 2])
        #expect(replies.allSatisfy { $0["error"]?["data"]?["reason"]?.string == "shuttingDown" })
        h.channel.embeddedEventLoop.advanceTime(by: ConnectionHandler.drainQuietPeriod)
        #expect(!h.channel.isActive, "an idle draining connection stayed open")
    }

    @Test func closeAnswersALongLineStillBeingParsed() throws {
        let h = try Harness(longLine: 200)
        h.read(Self.longPing(1) + Self.ping(2))
        h.channel.pipeline.fireUserInboundEventTriggered(ShutdownEvent.close)
        h.channel.embeddedEventLoop.run()
        let replies = try h.replies()
        #expect(replies.map { $0["id"]?.int64 } == [1, 2])
        #expect(replies.allSatisfy { $0["error"]?["data"]?["reason"]?.string == "shuttingDown" })
        #expect(!h.channel.isActive)
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}

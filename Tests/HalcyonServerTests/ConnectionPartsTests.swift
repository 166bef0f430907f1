// The parts a connection's state is made of, alone and on SwiftNIO's EmbeddedChannel: the
// lifecycle's transitions, the outbound buffer's overflow rule, the inbound queue's
// release order, and how a direct-write group hands each connection its own outcomes.
// Time moves only when a test advances the embedded loop.

import Foundation
@testable import HalcyonCache
import HalcyonJSON
import HalcyonRPC
@testable import HalcyonServer
import Logging
import NIOCore
import NIOEmbedded
import Testing

@Suite("Connection lifecycle")
struct ConnectionLifecycleTests {
    @Test func movesForwardOnlyAndRefusesWhatItCannotDo() {
        var life = ConnectionLifecycle.open
        #expect(life.isOpen && life.writesReplies && life.drainReads == nil)
        let drained = life.drain()
        #expect(drained && life == .draining(reads: 0))
        let again = life.drain()
        #expect(!again, "a second drain restarted the drain")
        life.noteRead()
        life.noteRead()
        #expect(life.drainReads == 2)
        #expect(!life.isOpen && life.writesReplies)
        let closed = life.close()
        #expect(closed)
        let closedTwice = life.close()
        #expect(!closedTwice, "closing twice was allowed")
        let redrained = life.drain()
        #expect(!redrained, "a closing connection went back to draining")
        life.noteRead()
        #expect(life == .closing && !life.writesReplies)
        life.closed()
        #expect(life == .closed && !life.writesReplies)
    }

    @Test func anOpenConnectionCountsNoReadsAndClosesAtOnce() {
        var life = ConnectionLifecycle.open
        life.noteRead()
        #expect(life == .open)
        let closed = life.close()
        #expect(closed && life == .closing)
    }

    @Test func aReadWhileDrainingPostponesTheClose() throws {
        let h = try ConnectionHandlerTests.Harness()
        h.channel.pipeline.fireUserInboundEventTriggered(ShutdownEvent.drain)
        h.channel.embeddedEventLoop.advanceTime(by: .milliseconds(50))
        try h.send(#"{"jsonrpc":"2.0","id":1,"method":"server.ping"}"# + "\n")
        #expect(try h.replies().first?["error"]?["data"]?["reason"]?.string == "shuttingDown")
        // The quiet period that began with the drain ends here, but a read came meanwhile.
        h.channel.embeddedEventLoop.advanceTime(by: .milliseconds(60))
        #expect(h.channel.isActive, "a connection that just read closed before it was quiet")
        h.channel.embeddedEventLoop.advanceTime(by: ConnectionHandler.drainQuietPeriod)
        #expect(!h.channel.isActive, "a quiet draining connection stayed open")
    }
}

@Suite("Connection outbound buffer")
struct ConnectionOutboundTests {
    private static let allocator = ByteBufferAllocator()

    /// The buffer `out` hands a writable channel that still holds `unsent` bytes; nil, with
    /// `failure` recorded, when it hands nothing over or refuses.
    private static func written(
        _ out: inout ConnectionOutbound, unsent: Int = 0, _ failure: Comment,
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> ByteBuffer? {
        guard case .write(let buffer) = out.emit(channelWritable: true, unsent: { unsent }, allocator: allocator) else {
            Issue.record(failure, sourceLocation: sourceLocation)
            return nil
        }
        return buffer
    }

    @Test func emitsWhatWaitsAsOneBufferThenNothing() {
        var out = ConnectionOutbound(maxBuffered: 100)
        out.append(line: Array("a".utf8))
        out.append(line: Array("bc".utf8))
        guard let buffer = Self.written(&out, "nothing emitted") else { return }
        #expect(String(buffer: buffer) == "a\nbc\n")
        #expect(out.isEmpty)
        guard case .nothing = out.emit(channelWritable: true, unsent: { 0 }, allocator: Self.allocator) else {
            Issue.record("emitted twice")
            return
        }
    }

    @Test func overflowsOnlyWhileEarlierBytesAreUnsent() {
        var out = ConnectionOutbound(maxBuffered: 10)
        let big = Array(repeating: UInt8(ascii: "x"), count: 20)
        // A single reply larger than the bound goes out when nothing else waits.
        out.append(line: big)
        guard Self.written(&out, "a lone large reply was refused") != nil else { return }
        out.append(line: Array("yy".utf8))
        guard Self.written(&out, unsent: 5, "refused below the bound") != nil else { return }
        out.append(line: Array("zzzz".utf8))
        guard case .overflow(let unsent) = out.emit(channelWritable: true, unsent: { 8 }, allocator: Self.allocator) else {
            Issue.record("a client that does not read was not refused")
            return
        }
        #expect(unsent == 8)
        #expect(out.isEmpty, "an overflow kept the refused bytes")
    }

    @Test func theUnsentCountIsSkippedOnlyWhenTheRuleCannotTrip() {
        let line = Array(repeating: UInt8(ascii: "x"), count: 9)  // 10 bytes with its newline
        // A channel that does not give its high water mark is always asked.
        var unknown = ConnectionOutbound(maxBuffered: 100)
        unknown.append(line: line)
        #expect(unknown.needsUnsentCount(channelWritable: true))
        var out = ConnectionOutbound(maxBuffered: 100, unsentBoundWhileWritable: 90)
        out.append(line: line)
        #expect(!out.needsUnsentCount(channelWritable: true), "90 unsent at most plus 10 gathered fit under 100")
        #expect(out.needsUnsentCount(channelWritable: false), "an unwritable channel may hold more than its mark")
        out.append(line: [])  // one more byte: 90 + 11 passes the bound
        #expect(out.needsUnsentCount(channelWritable: true))
    }

    @Test func theChannelIsAskedForItsUnsentBytesOnlyWhenTheRuleCanTrip() {
        var out = ConnectionOutbound(maxBuffered: 100, unsentBoundWhileWritable: 90)
        var asked = 0
        out.append(line: Array("a".utf8))
        _ = out.emit(channelWritable: true, unsent: { asked += 1; return 0 }, allocator: Self.allocator)
        #expect(asked == 0, "asked while the rule could not trip")
        out.append(line: Array("a".utf8))
        _ = out.emit(channelWritable: false, unsent: { asked += 1; return 0 }, allocator: Self.allocator)
        #expect(asked == 1, "not asked for an unwritable channel")
    }

    @Test func aBufferTheChannelStillHoldsIsNeverRefilled() {
        var out = ConnectionOutbound(maxBuffered: 1 << 20)
        out.append(line: Array("first".utf8))
        guard let held = Self.written(&out, "nothing emitted") else { return }
        // The channel has not written `held` yet: the next lines must not land in it.
        out.append(line: Array("second".utf8))
        guard let next = Self.written(&out, "nothing emitted") else { return }
        #expect(String(buffer: held) == "first\n", "a buffer still held by the channel was overwritten")
        #expect(String(buffer: next) == "second\n")
    }

    @Test func aBufferTheChannelDroppedCarriesTheNextLines() {
        var out = ConnectionOutbound(maxBuffered: 1 << 20)
        func emitted(_ line: String) -> UnsafeRawPointer? {
            out.append(line: Array(line.utf8))
            guard let buffer = Self.written(&out, "nothing emitted") else { return nil }
            #expect(String(buffer: buffer) == line + "\n")
            return buffer.withUnsafeReadableBytes { UnsafeRawPointer($0.baseAddress) }
        }
        let first = emitted("one")
        #expect(first != nil)
        #expect(emitted("two") == first, "a dropped buffer's storage was not reused")
        // A burst larger than the spare limit is sent but its buffer is not kept.
        let large = String(repeating: "x", count: ConnectionOutbound.spareLimit + 1)
        #expect(emitted(large) != nil)
        #expect(out.spareCapacity == nil, "a buffer above the spare limit was kept")
        #expect(emitted("three") != nil)
        #expect(out.spareCapacity.map { $0 <= ConnectionOutbound.spareLimit } == true)
    }

    @Test func aBatchIsOneLineInSlotOrderOnceEverySlotIsFilled() {
        let batch = ConnectionOutbound.Batch(count: 3)
        #expect(batch.fill(2, with: Array("c".utf8)) == nil)
        #expect(batch.fill(0, with: Array("a".utf8)) == nil)
        #expect(batch.fill(1, with: Array("b".utf8)).map { String(decoding: $0, as: UTF8.self) } == "[a,b,c]")
    }
}

@Suite("Connection inbound queue")
struct ConnectionInboundTests {
    private static func line(_ text: String) -> RPCIncoming {
        Array(text.utf8).withUnsafeBytes { RPCMessageParser.parse(line: $0, maxBatch: 10) }
    }

    private static func ping(_ id: Int) -> String { #"{"jsonrpc":"2.0","id":\#(id),"method":"server.ping"}"# }

    @Test func aLineBeingParsedHoldsEverythingBehindIt() {
        var inbound = ConnectionInbound()
        let token = inbound.appendParsing(ByteBuffer(string: Self.ping(1)))
        inbound.appendLine(Self.line(Self.ping(2)))
        #expect(inbound.linesWaiting == 2)
        let early = inbound.next(mayStart: true)
        #expect(early == nil, "a line left from behind one being parsed")
        let unknown = inbound.parsed(token &+ 1, Self.line(Self.ping(9)))
        #expect(!unknown, "an unknown parse was taken")
        let known = inbound.parsed(token, Self.line(Self.ping(1)))
        #expect(known)
        guard case .line(.single(.request(let first)), _)? = inbound.next(mayStart: false) else {
            Issue.record("the parsed line did not leave first")
            return
        }
        #expect(first.id == .number(1))
        guard case .line(.single(.request(let second)), _)? = inbound.next(mayStart: false) else {
            Issue.record("the second line did not follow")
            return
        }
        #expect(second.id == .number(2))
        #expect(inbound.isEmpty && inbound.linesWaiting == 0)
    }

    @Test func heldElementsWaitForBackPressureAndKeepTheirPlace() {
        var inbound = ConnectionInbound()
        guard case .single(let a) = Self.line(Self.ping(1)), case .single(let b) = Self.line(Self.ping(2)),
              case .single(let c) = Self.line(Self.ping(3)) else {
            Issue.record("unparsable ping")
            return
        }
        inbound.hold(.init(element: c, batch: nil, slot: 0))
        inbound.hold(.init(element: a, batch: nil, slot: 0), at: 0)
        inbound.hold(.init(element: b, batch: nil, slot: 0), at: 1)
        let held = inbound.next(mayStart: false)
        #expect(held == nil, "an element started under back-pressure")
        var ids: [RPCID?] = []
        while case .element(let held)? = inbound.next(mayStart: true) { ids.append(held.requestID) }
        #expect(ids == [.number(1), .number(2), .number(3)])
    }

    @Test func aCancelRemovesHeldRequestsAndMarksWaitingLines() {
        var inbound = ConnectionInbound()
        guard case .single(let a) = Self.line(Self.ping(1)), case .single(let b) = Self.line(Self.ping(2)) else {
            Issue.record("unparsable ping")
            return
        }
        inbound.hold(.init(element: a, batch: nil, slot: 0))
        inbound.hold(.init(element: b, batch: nil, slot: 0))
        _ = inbound.appendParsing(ByteBuffer(string: Self.ping(2)))
        let removed = inbound.withdraw(.number(2))
        #expect(removed.map(\.place) == [1])
        #expect(removed.first?.held.requestID == .number(2))
        inbound.parseAll { buffer in
            buffer.withUnsafeReadableBytes { RPCMessageParser.parse(line: $0, maxBatch: 10) }
        }
        guard case .element(let kept)? = inbound.next(mayStart: true),
              case .line(_, let withdrawn)? = inbound.next(mayStart: true) else {
            Issue.record("the queue lost an entry")
            return
        }
        #expect(kept.requestID == .number(1))
        #expect(withdrawn == [.number(2)], "the line waiting was not told of the cancel")
    }
}

@Suite("Direct-write outcomes", .timeLimit(.minutes(1)))
struct DirectWriteOutcomeTests {
    /// Connections on one embedded loop sharing one group, in front of a journaled cache.
    final class Loop {
        let fixture = DispatcherFixture(prefix: "hc-direct", debugMethods: true)
        let loop = EmbeddedEventLoop()
        let groups = LoopShares()
        var cache: HybridCache { fixture.cache }
        var dispatcher: Dispatcher { fixture.dispatcher }

        /// Waits (on this thread, the loop's) until the ioQueue is idle, so the writes take the
        /// direct path.
        func waitUntilIdle() { fixture.waitUntilIdle() }

        func connect() throws -> EmbeddedChannel {
            let handler = ConnectionHandler(
                dispatcher: dispatcher, counters: ServerCounters(), maxInFlight: 16, maxBatch: 10,
                maxLineBytes: 1 << 20, session: ConnectionSession(peerDescription: "test"),
                logger: Logger(label: "test"), loopShares: groups, parseQueue: nil
            )
            let channel = EmbeddedChannel(loop: loop)
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(unixDomainSocketPath: "/nowhere")).wait()
            return channel
        }
    }

    private static func set(_ id: Int, _ key: String, _ value: String) -> String {
        #"{"jsonrpc":"2.0","id":\#(id),"method":"cache.set","params":{"key":"\#(key)","value":"\#(value)"}}"# + "\n"
    }

    private static func get(_ id: Int, _ key: String) -> String {
        #"{"jsonrpc":"2.0","id":\#(id),"method":"cache.get","params":{"key":"\#(key)"}}"# + "\n"
    }

    /// One read burst, without running the loop's tasks afterwards.
    fileprivate static func read(_ channel: EmbeddedChannel, _ text: String) {
        channel.pipeline.fireChannelRead(ByteBuffer(string: text))
        channel.pipeline.fireChannelReadComplete()
    }

    private static func replies(_ channel: EmbeddedChannel) throws -> [JSONValue] {
        var out: [JSONValue] = []
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            let text = buffer.readString(length: buffer.readableBytes) ?? ""
            for line in text.split(separator: "\n") { out.append(try JSONValue.parse(Array(line.utf8)).get()) }
        }
        return out
    }

    @Test func oneCommitHandsEachConnectionItsOwnOutcomesInItsOwnOrder() throws {
        let l = Loop()
        let a = try l.connect()
        let b = try l.connect()
        l.waitUntilIdle()
        Self.read(a, Self.set(1, "k", "a1") + Self.set(2, "k", "a2"))
        Self.read(b, Self.set(10, "j", "b1") + Self.set(11, "k", "b2") + Self.set(12, "j", "b3"))
        // Gathered for the end of the turn: no reply before the commit.
        #expect(try Self.replies(a).isEmpty && Self.replies(b).isEmpty, "a direct write answered before its commit")
        l.loop.run()
        let fromA = try Self.replies(a)
        let fromB = try Self.replies(b)
        #expect(fromA.map { $0["id"]?.int64 } == [1, 2])
        #expect(fromB.map { $0["id"]?.int64 } == [10, 11, 12])
        #expect((fromA + fromB).allSatisfy { $0["result"]?["stored"]?.bool == true })
        // The group ran in the order the writes were added: b's write of k came last.
        Self.read(a, Self.get(3, "k") + Self.get(4, "j"))
        l.loop.run()
        #expect(try Self.replies(a).map { $0["result"]?["value"]?.string } == ["b2", "b3"])
    }

    @Test func aReadOfAWaitingKeyCommitsFirstAndSeesItsOwnWrites() throws {
        let l = Loop()
        let a = try l.connect()
        let b = try l.connect()
        l.waitUntilIdle()
        Self.read(b, Self.set(10, "other", "b"))
        Self.read(a, Self.set(1, "k", "v1") + Self.get(2, "k") + Self.set(3, "k", "v2") + Self.get(4, "k"))
        // b's write was committed with a's, within a's read, and b's reply reached b's own
        // channel then, before any task of the loop ran.
        #expect(try Self.replies(b).map { $0["id"]?.int64 } == [10])
        l.loop.run()
        let fromA = try Self.replies(a)
        #expect(fromA.map { $0["id"]?.int64 } == [1, 2, 3, 4])
        #expect(fromA[safe: 1]?["result"]?["value"]?.string == "v1", "a get saw a write sent after it")
        #expect(fromA[safe: 3]?["result"]?["value"]?.string == "v2")
    }
}

@Suite("Replies at the end of the loop's turn", .timeLimit(.minutes(1)))
struct TurnFlushTests {
    private static func ping(_ id: Int) -> String { #"{"jsonrpc":"2.0","id":\#(id),"method":"server.ping"}"# + "\n" }

    /// The buffers written so far, each as the ids of its reply lines.
    private static func writes(_ channel: EmbeddedChannel) throws -> [[Int64]] {
        var out: [[Int64]] = []
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            let text = buffer.readString(length: buffer.readableBytes) ?? ""
            out.append(try text.split(separator: "\n").map { try JSONValue.parse(Array($0.utf8)).get()["id"]?.int64 ?? -1 })
        }
        return out
    }

    @Test func burstsOfSeveralLinesAreAnsweredAtTheEndOfTheTurnEachInOneWrite() throws {
        let l = DirectWriteOutcomeTests.Loop()
        let a = try l.connect()
        let b = try l.connect()
        DirectWriteOutcomeTests.read(a, Self.ping(1) + Self.ping(2))
        DirectWriteOutcomeTests.read(b, Self.ping(3) + Self.ping(4) + Self.ping(5))
        #expect(try Self.writes(a).isEmpty && Self.writes(b).isEmpty, "a reply went out before the turn's reads were done")
        l.loop.run()
        #expect(try Self.writes(a) == [[1, 2]])
        #expect(try Self.writes(b) == [[3, 4, 5]])
        // The next turn's burst waits for its own turn's end.
        DirectWriteOutcomeTests.read(a, Self.ping(6) + Self.ping(7))
        #expect(try Self.writes(a).isEmpty)
        l.loop.run()
        #expect(try Self.writes(a) == [[6, 7]])
    }

    @Test func aLoneLineIsAnsweredWhenItsBurstEnds() throws {
        let l = DirectWriteOutcomeTests.Loop()
        let a = try l.connect()
        DirectWriteOutcomeTests.read(a, Self.ping(1))
        #expect(try Self.writes(a) == [[1]])
    }

    @Test func aConnectionClosedBeforeTheTurnEndsIsSkipped() throws {
        let l = DirectWriteOutcomeTests.Loop()
        let a = try l.connect()
        let b = try l.connect()
        DirectWriteOutcomeTests.read(a, Self.ping(1) + Self.ping(2))
        DirectWriteOutcomeTests.read(b, Self.ping(3) + Self.ping(4))
        a.close(promise: nil)
        #expect(!a.isActive)
        #expect(try Self.writes(b).isEmpty, "a close ran the turn's end early")
        l.loop.run()
        #expect(try Self.writes(b) == [[3, 4]])
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}

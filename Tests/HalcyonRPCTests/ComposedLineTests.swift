import Foundation
@testable import HalcyonCache
import HalcyonJSON
import HalcyonSupport
@testable import HalcyonRPC
import Testing

/// The composed reply lines (a found `cache.get`, a `cache.set`) against the writer's: the
/// same bytes whenever one is composed, nothing written whenever it declines.
@Suite struct ComposedLineTests {
    typealias Found = HybridCache.RetrieveResult

    /// What `success` with `getResult` writes.
    static func general(id: RPCID, _ found: Found, encoding: ValueEncoding?) -> [UInt8] {
        var w = JSONWriter()
        RPCResponseWriter.success(id: id, into: &w) { (w: inout JSONWriter) throws(RPCError) in
            try w.getResult(found, encoding: encoding)
        }
        return w.bytes
    }

    /// What `foundGetLine` writes (nil when it declines), after a line already in the writer.
    static func composed(id: RPCID, _ found: Found, encoding: ValueEncoding?) -> [UInt8]? {
        var w = JSONWriter()
        RPCResponseWriter.error(id: .number(0), .shuttingDown, into: &w)
        let before = w.bytes
        guard RPCResponseWriter.foundGetLine(id: id, found, encoding: encoding, into: &w) else {
            #expect(w.bytes == before, "a declined line writes nothing")
            return nil
        }
        #expect(w.bytes.starts(with: before))
        return Array(w.bytes[before.count...])
    }

    static func found(_ value: String, flags: UInt32 = 1, version: UInt64 = 7, tier: CacheType = .memory,
                      expiresAt: Date? = nil) -> Found {
        Found(cacheType: tier, entry: CacheEntry(bytes: Array(value.utf8), flags: flags, version: version),
              expiresAt: expiresAt)
    }

    @Test func composesTheSameBytesAsTheWriter() {
        let values = ["", "a", String(repeating: "x", count: 100), "key:12 / ~!@#$%^&*()_+{}[]|:;'<>,.?",
                      String(repeating: "0123456789abcdef", count: 256)]
        let ids: [Int64] = [0, 1, -5, 42, Int64.max, Int64.min]
        let instants: [Date?] = [nil, .distantFuture, Date(timeIntervalSince1970: 1_900_000_000),
                                 Date(timeIntervalSince1970: 1_900_000_000.25), Date(timeIntervalSince1970: -3.5),
                                 Date.distantFuture.addingTimeInterval(-0.5), Date(timeIntervalSince1970: 1e17)]
        var composedLines = 0
        for value in values {
            for id in ids {
                for instant in instants {
                    for tier in [CacheType.memory, .disk] {
                        for version in [UInt64(0), 7, UInt64.max] {
                            for encoding in [nil, ValueEncoding.utf8] {
                                let f = Self.found(value, version: version, tier: tier, expiresAt: instant)
                                let line = Self.composed(id: .number(id), f, encoding: encoding)
                                #expect(line != nil, "plain ASCII of at most 4096 bytes composes")
                                if let line {
                                    composedLines += 1
                                    #expect(line == Self.general(id: .number(id), f, encoding: encoding))
                                }
                            }
                        }
                    }
                }
            }
        }
        #expect(composedLines == values.count * ids.count * instants.count * 2 * 3 * 2)
    }

    @Test func declinesWhatItDoesNotCompose() {
        // Escapes, non-ASCII, a control byte: the writer's escaping and validation.
        for value in ["say \"hi\"", "back\\slash", "tab\there", "line\nfeed", "caf\u{e9}", "\u{2028}"] {
            #expect(Self.composed(id: .number(1), Self.found(value), encoding: nil) == nil)
        }
        // Another stored or requested encoding, another id, a miss, a value too long.
        #expect(Self.composed(id: .number(1), Self.found("{}", flags: 3), encoding: nil) == nil)
        #expect(Self.composed(id: .number(1), Self.found("abc", flags: 0), encoding: nil) == nil)
        #expect(Self.composed(id: .number(1), Self.found("abc"), encoding: .base64) == nil)
        #expect(Self.composed(id: .number(1), Self.found("abc"), encoding: .json) == nil)
        #expect(Self.composed(id: .string("a"), Self.found("abc"), encoding: nil) == nil)
        #expect(Self.composed(id: .fractional(1.5), Self.found("abc"), encoding: nil) == nil)
        #expect(Self.composed(id: .number(1), Found(cacheType: .none, entry: nil, expiresAt: nil), encoding: nil) == nil)
        let long = String(repeating: "y", count: RPCResponseWriter.maxComposedValue + 1)
        #expect(Self.composed(id: .number(1), Self.found(long), encoding: nil) == nil)
    }

    @Test func declinesInsideABatch() {
        var w = JSONWriter()
        w.beginArray()
        #expect(!RPCResponseWriter.foundGetLine(id: .number(1), Self.found("abc"), encoding: nil, into: &w))
        let stored = HybridCache.StoreResult(stored: true, size: 3, expiresAt: nil, version: 1)
        #expect(!RPCResponseWriter.storedLine(id: .number(1), stored, into: &w))
        #expect(w.bytes == Array("[".utf8))
    }

    @Test func composesTheSameSetLinesAsTheWriter() {
        let instants: [Date?] = [nil, .distantFuture, Date(timeIntervalSince1970: 1_900_000_000),
                                 Date(timeIntervalSince1970: 1_900_000_000.75), Date(timeIntervalSince1970: 1e17)]
        var composedLines = 0
        for id in [Int64(0), 9, -1, Int64.max, Int64.min] {
            for instant in instants {
                for (stored, version) in [(true, UInt64?.some(0)), (true, 12), (true, UInt64.max), (false, nil)] {
                    for size in [0, 100, Int.max] {
                        let r = HybridCache.StoreResult(stored: stored, size: size, expiresAt: instant, version: version)
                        var general = JSONWriter()
                        RPCResponseWriter.success(id: .number(id), into: &general) { (w: inout JSONWriter) throws(RPCError) in
                            Dispatcher.WriteMethods.writeSet(r, into: &w)
                        }
                        var composed = JSONWriter()
                        #expect(RPCResponseWriter.storedLine(id: .number(id), r, into: &composed))
                        #expect(composed.bytes == general.bytes)
                        composedLines += 1
                    }
                }
            }
        }
        #expect(composedLines == 5 * instants.count * 4 * 3)
        var w = JSONWriter()
        let r = HybridCache.StoreResult(stored: true, size: 3, expiresAt: nil, version: 1)
        #expect(!RPCResponseWriter.storedLine(id: .string("s"), r, into: &w))
        #expect(!RPCResponseWriter.storedLine(id: .null, r, into: &w))
        #expect(w.bytes.isEmpty)
    }

    /// `success`'s envelope written by the writer's calls, one by one.
    static func envelopeByCalls(id: RPCID, into w: inout JSONWriter, result: (inout JSONWriter) -> Void) {
        let isLine = w.depth == 0
        w.beginObject()
        w.key("jsonrpc"); w.string(static: "2.0")
        w.key("id"); id.write(to: &w)
        w.key("result")
        result(&w)
        w.endObject()
        if isLine { w.newline() }
    }

    @Test func composesTheSameEnvelopeAsTheWritersCalls() {
        let results: [(inout JSONWriter) -> Void] = [
            { $0.bool(true) },
            { $0.beginObject(); $0.field("pong", true); $0.field("n", 3); $0.endObject() },
            { $0.beginArray(); $0.int(1); $0.string("a\"b"); $0.endArray() },
        ]
        for id in [Int64(0), 1, -5, 42, Int64.max, Int64.min] {
            for result in results {
                var composed = JSONWriter()
                RPCResponseWriter.success(id: .number(id), into: &composed) { (w: inout JSONWriter) throws(RPCError) in result(&w) }
                var byCalls = JSONWriter()
                Self.envelopeByCalls(id: .number(id), into: &byCalls, result: result)
                #expect(composed.bytes == byCalls.bytes)
                #expect(composed.depth == 0)
                // As batch elements, after another element: the comma, no newline.
                var batch = JSONWriter()
                RPCResponseWriter.beginBatch(into: &batch)
                RPCResponseWriter.error(id: .number(0), .shuttingDown, into: &batch)
                RPCResponseWriter.success(id: .number(id), into: &batch) { (w: inout JSONWriter) throws(RPCError) in result(&w) }
                RPCResponseWriter.endBatch(into: &batch)
                var batchByCalls = JSONWriter()
                RPCResponseWriter.beginBatch(into: &batchByCalls)
                RPCResponseWriter.error(id: .number(0), .shuttingDown, into: &batchByCalls)
                Self.envelopeByCalls(id: .number(id), into: &batchByCalls, result: result)
                RPCResponseWriter.endBatch(into: &batchByCalls)
                #expect(batch.bytes == batchByCalls.bytes)
            }
        }
    }

    @Test func aComposedEnvelopeRollsBackToTheError() {
        var w = JSONWriter()
        let failure = RPCResponseWriter.success(id: .number(7), into: &w) { (w: inout JSONWriter) throws(RPCError) in
            w.beginObject(); w.field("partial", true)
            throw RPCError.shuttingDown
        }
        var expected = JSONWriter()
        RPCResponseWriter.error(id: .number(7), .shuttingDown, into: &expected)
        #expect(failure == .shuttingDown)
        #expect(w.bytes == expected.bytes)
        #expect(w.depth == 0)
    }

    @Test func composesTheSamePongLineAsTheWriter() {
        for id in [Int64(0), 3, -1, Int64.max, Int64.min] {
            var general = JSONWriter()
            RPCResponseWriter.success(id: .number(id), into: &general) { (w: inout JSONWriter) throws(RPCError) in
                Dispatcher.InfoMethods.writePong(into: &w)
            }
            var composed = JSONWriter()
            #expect(RPCResponseWriter.pongLine(id: .number(id), into: &composed))
            #expect(composed.bytes == general.bytes)
        }
        var w = JSONWriter()
        #expect(!RPCResponseWriter.pongLine(id: .string("p"), into: &w))
        w.beginArray()
        #expect(!RPCResponseWriter.pongLine(id: .number(1), into: &w))
        #expect(w.bytes == Array("[".utf8))
    }

    /// A deferred reply with a line writer: the composed line when it composes, the
    /// result writer's when it declines, and the same element inside a batch.
    @Test func aDeferredReplyOffersItsLineFirst() {
        let offered = Locked(0)
        func reply(_ found: Found, id: RPCID) -> RPCReply {
            RPCReply.deferred(id: id, line: { id, w in
                offered.withLock { $0 += 1 }
                return RPCResponseWriter.foundGetLine(id: id, found, encoding: nil, into: &w)
            }) { (w: inout JSONWriter) throws(RPCError) in try w.getResult(found, encoding: nil) }
        }
        for value in ["plain", "needs \"escape\"", "caf\u{e9}"] {
            let f = Self.found(value, tier: .disk, expiresAt: Date(timeIntervalSince1970: 1_900_000_000))
            var w = JSONWriter()
            let before = offered.withLock { $0 }
            #expect(reply(f, id: .number(9)).writeLine(into: &w) == nil)
            #expect(offered.withLock { $0 } == before + 1)
            #expect(w.bytes == Self.general(id: .number(9), f, encoding: nil))
            var element = Self.general(id: .number(9), f, encoding: nil)
            element.removeLast()
            #expect(reply(f, id: .number(9)).element().bytes == element)
        }
        // A string id: offered, declined (the line writers compose number ids only).
        let f = Self.found("plain")
        let before = offered.withLock { $0 }
        var w = JSONWriter()
        #expect(reply(f, id: .string("s")).writeLine(into: &w) == nil)
        #expect(offered.withLock { $0 } == before + 1)
        #expect(w.bytes == Self.general(id: .string("s"), f, encoding: nil))
    }
}

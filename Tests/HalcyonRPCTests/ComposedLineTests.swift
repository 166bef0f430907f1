import Foundation
@testable import HalcyonCache
import HalcyonJSON
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
}

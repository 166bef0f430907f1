// The hottest reply lines composed whole (`JSONWriter.appendLine`): a found `cache.get`,
// a `cache.set` and a `server.ping`, in their common shapes. Each writes exactly the bytes
// `success` with the method's result writer writes (tested side by side), or nothing: then
// the caller takes `success`.
//
// Why: the writer's calls pay for an `Array.append` each; a get's reply made fifteen, and
// checked its value's UTF-8 apart from looking for escapes (one pass here: plain ASCII is
// both). Figures: Benchmarks/RESULTS.md, "Server CPU per request with and without the
// scanner", under "The reply lines of a get hit and of a set, composed whole".

import Foundation
import HalcyonCache
import HalcyonJSON

extension RPCResponseWriter {
    /// The longest value `foundGetLine` composes; a longer one goes the writer's way, where
    /// the per-piece appends no longer matter next to the value's copy.
    static let maxComposedValue = 4096

    /// An expiration instant as the wire shows it (`JSONWriter.field(_:expiresAt:)`):
    /// rounded up to a whole second, null from the distant future on, an integer when it
    /// fits a double exactly, else the double (`.other`, which a composed line leaves to
    /// the writer).
    enum WireInstant {
        case null
        case seconds(Int64)
        case other(Double)

        init(_ instant: Date?) {
            guard let instant, instant < .distantFuture else { self = .null; return }
            let date = Date(timeIntervalSince1970: instant.timeIntervalSince1970.rounded(.up))
            guard date < .distantFuture else { self = .null; return }
            let seconds = date.timeIntervalSince1970
            guard seconds.rounded() == seconds, abs(seconds) < 9_007_199_254_740_992 else { self = .other(seconds); return }
            self = .seconds(Int64(seconds))
        }
    }

    /// Writes the reply line of a found `cache.get` when it has the common shape: a number
    /// id, between lines, a value stored as utf8 and shown so, plain ASCII, at most
    /// `maxComposedValue` bytes. Otherwise writes nothing and returns false: `success` with
    /// `getResult` writes it.
    static func foundGetLine(
        id: RPCID, _ found: HybridCache.RetrieveResult, encoding requested: ValueEncoding?, into writer: inout JSONWriter
    ) -> Bool {
        guard let entry = found.entry, found.cacheType != .none else { return false }
        return entry.withLent { lent in
            foundGetLine(
                id: id, lent, cacheType: found.cacheType, expiresAt: found.expiresAt, encoding: requested, into: &writer)
        }
    }

    /// `foundGetLine` of a found entry lent where it lies (`HybridCache.memoryLookup`'s
    /// `taking`), with the tier that found it and its lifetime.
    static func foundGetLine(
        id: RPCID, _ entry: LentEntry, cacheType: CacheType, expiresAt found: Date?,
        encoding requested: ValueEncoding?, into writer: inout JSONWriter
    ) -> Bool {
        guard writer.depth == 0, case .number(let number) = id,
              ValueEncoding(storedFlags: entry.flags) == .utf8, requested == nil || requested == .utf8,
              entry.bytes.count <= maxComposedValue
        else { return false }
        let expiresAt = WireInstant(found)
        if case .other = expiresAt { return false }
        let value = entry.bytes
        return writer.appendLine(upTo: value.count &+ 192) { line in
            line.put(#"{"jsonrpc":"2.0","id":"#)
            line.putDecimal(number)
            line.put(#","result":{"found":true,"value":"#)
            guard line.putPlainQuoted(value) else { return false }
            line.put(#","encoding":"utf8","cacheType":""#)
            line.put(cacheType.wireName)
            line.put(#"","expiresAt":"#)
            line.put(expiresAt)
            line.put(#","version":"#)
            line.putDecimal(Int64(clamping: entry.version))
            line.put("}}\n")
            return true
        }
    }

    /// Writes the reply line of a `cache.set` (`WriteMethods.writeSet`) when it has the
    /// common shape: a number id, between lines. Otherwise writes nothing and returns
    /// false: `success` with `writeSet` writes it.
    static func storedLine(id: RPCID, _ r: HybridCache.StoreResult, into writer: inout JSONWriter) -> Bool {
        guard writer.depth == 0, case .number(let number) = id else { return false }
        let expiresAt = WireInstant(r.expiresAt)
        if case .other = expiresAt { return false }
        return writer.appendLine(upTo: 160) { line in
            line.put(#"{"jsonrpc":"2.0","id":"#)
            line.putDecimal(number)
            line.put(r.stored ? #","result":{"stored":true,"size":"# : #","result":{"stored":false,"size":"#)
            line.putDecimal(Int64(r.size))
            line.put(#","expiresAt":"#)
            line.put(expiresAt)
            line.put(#","version":"#)
            if let version = r.version { line.putDecimal(Int64(clamping: version)) } else { line.put("null") }
            line.put("}}\n")
            return true
        }
    }
}

extension RPCResponseWriter {
    /// Writes the reply line of a `server.ping` (`InfoMethods.writePong`) for a number id,
    /// between lines. Otherwise writes nothing and returns false: `success` with
    /// `writePong` writes it.
    static func pongLine(id: RPCID, into writer: inout JSONWriter) -> Bool {
        guard writer.depth == 0, case .number(let number) = id else { return false }
        return writer.appendLine(upTo: 80) { line in
            line.put(#"{"jsonrpc":"2.0","id":"#)
            line.putDecimal(number)
            line.put(#","result":{"pong":true}"#)
            line.put("}\n")
            return true
        }
    }
}

extension JSONWriter.LineComposer {
    /// An instant a composed line may hold (`.other` never reaches here).
    mutating func put(_ instant: RPCResponseWriter.WireInstant) {
        switch instant {
        case .seconds(let seconds): putDecimal(seconds)
        case .null, .other: put("null")
        }
    }
}

// How the storage engine's values look on the wire: expirations in the protocol's forms,
// and the one-line `field` helpers the handlers write results with.

import Foundation
import HalcyonCache
import HalcyonJSON

extension CacheType {
    /// The tier's name on the wire (its raw value), for `JSONWriter.string(static:)`.
    var wireName: StaticString {
        switch self {
        case .none: "none"
        case .memory: "memory"
        case .disk: "disk"
        case .upstream: "upstream"
        }
    }
}

extension ValueEncoding {
    /// The encoding's name on the wire (its raw value), for `JSONWriter.string(static:)`.
    var wireName: StaticString {
        switch self {
        case .utf8: "utf8"
        case .base64: "base64"
        case .json: "json"
        }
    }
}

extension JSONWriter {
    /// An extending policy in the protocol's form (`"none"`, `"cacheTime"`,
    /// `{"expirationTime": <expiration>}`).
    mutating func extending(_ extending: ExpirationExtending) {
        switch extending {
        case .none: string("none")
        case .cacheTime: string("cacheTime")
        case .expirationTime(let e): beginObject(); key("expirationTime"); expiration(e); endObject()
        }
    }

    /// An expiration in the protocol's form (`"never"`, `{"seconds": N}`, ...).
    mutating func expiration(_ expiration: StorageExpiration) {
        switch expiration {
        case .never: string("never")
        case .expired: string("expired")
        case .seconds(let s):
            // Whole spans as integers: `{"seconds":300}` reads back exactly as a user
            // would write it, and as the `days` form already does.
            beginObject(); key("seconds")
            if s.rounded() == s, abs(s) < 9_007_199_254_740_992 { int(Int64(s)) } else { double(s) }
            endObject()
        case .days(let d):
            beginObject(); key("days"); int(Int64(d)); endObject()
        case .date(let date):
            beginObject(); key("date"); unixTime(date); endObject()
        }
    }

    mutating func field(_ name: StaticString, _ value: Bool) { key(name); bool(value) }
    mutating func field(_ name: StaticString, _ value: Int) { key(name); int(Int64(value)) }
    mutating func field(_ name: StaticString, _ value: UInt64) { key(name); int(Int64(clamping: value)) }
    mutating func field(_ name: StaticString, _ value: String) { key(name); string(value) }
    mutating func field(_ name: StaticString, _ value: CacheType) { key(name); string(static: value.wireName) }
    mutating func field(_ name: StaticString, _ value: ValueEncoding) { key(name); string(static: value.wireName) }
    mutating func field(_ name: StaticString, time value: Date?) { key(name); unixTime(value) }

    /// An expiration instant, rounded UP to a whole second. The disk tier stores whole
    /// seconds already (Docs/PROTOCOL.md §5), but the memory tier keeps the exact instant (now + TTL);
    /// rounding up shows it the way the spec says stored instants are, so a client never
    /// sees a fraction and never sees a time earlier than the one the disk copy would show.
    mutating func field(_ name: StaticString, expiresAt value: Date?) {
        key(name)
        // One rule with the composed reply lines (`RPCResponseWriter.WireInstant`).
        switch RPCResponseWriter.WireInstant(value) {
        case .null: null()
        case .seconds(let seconds): int(seconds)
        case .other(let seconds): double(seconds)
        }
    }

    /// A past instant (a last access, the start), rounded DOWN to a whole second: never
    /// later than the event itself, and whole like every other instant on the wire.
    mutating func field(_ name: StaticString, roundedDown value: Date?) {
        key(name)
        guard let value, value < .distantFuture else { return null() }
        unixTime(Date(timeIntervalSince1970: value.timeIntervalSince1970.rounded(.down)))
    }
}

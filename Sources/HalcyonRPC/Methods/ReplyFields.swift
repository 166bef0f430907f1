// How the storage engine's values look on the wire: expirations in the protocol's forms,
// and the one-line `field` helpers the handlers write results with.

import Foundation
import HalcyonCache
import HalcyonJSON

extension JSONWriter {
    /// An expiration in the protocol's form (`"never"`, `{"seconds": N}`, ...).
    mutating func expiration(_ expiration: StorageExpiration) {
        switch expiration {
        case .never: string("never")
        case .expired: string("expired")
        case .seconds(let s):
            beginObject(); key("seconds"); double(s); endObject()
        case .days(let d):
            beginObject(); key("days"); int(Int64(d)); endObject()
        case .date(let date):
            beginObject(); key("date"); unixTime(date); endObject()
        }
    }

    mutating func field(_ name: String, _ value: Bool) { key(name); bool(value) }
    mutating func field(_ name: String, _ value: Int) { key(name); int(Int64(value)) }
    mutating func field(_ name: String, _ value: UInt64) { key(name); int(Int64(clamping: value)) }
    mutating func field(_ name: String, _ value: String) { key(name); string(value) }
    mutating func field(_ name: String, time value: Date?) { key(name); unixTime(value) }
}

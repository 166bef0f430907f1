// How the storage engine's values look on the wire: instants as Unix seconds (null for
// never), expirations in the protocol's forms, tiers by name.

import Foundation
import HalcyonCache
import HalcyonJSON

extension JSONWriter {
    /// An instant as Unix seconds; `nil` and `distantFuture` (never) as `null`.
    mutating func time(_ date: Date?) {
        guard let date, date < Date.distantFuture.addingTimeInterval(-1) else {
            null()
            return
        }
        let seconds = date.timeIntervalSince1970
        if seconds.rounded() == seconds, abs(seconds) < 9.0e15 {
            int(Int64(seconds))
        } else {
            double(seconds)
        }
    }

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
            beginObject(); key("date"); time(date); endObject()
        }
    }

    mutating func field(_ name: String, _ value: Bool) { key(name); bool(value) }
    mutating func field(_ name: String, _ value: Int) { key(name); int(Int64(value)) }
    mutating func field(_ name: String, _ value: UInt64) { key(name); int(Int64(clamping: value)) }
    mutating func field(_ name: String, _ value: String) { key(name); string(value) }
    mutating func field(_ name: String, time value: Date?) { key(name); time(value) }
}

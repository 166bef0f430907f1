// Instants on the wire: Unix seconds, null for "never" (Docs/PROTOCOL.md §5).

import Foundation
import HalcyonJSON

extension JSONWriter {
    /// Writes an instant as Unix seconds: an integer when whole (stored expirations are
    /// rounded up to whole seconds, so usually), else a real. `nil` and
    /// `Date.distantFuture` (how `StorageExpiration.never` ends) are written as `null`.
    public mutating func unixTime(_ date: Date?) {
        guard let date, date < .distantFuture else { return null() }
        let seconds = date.timeIntervalSince1970
        if seconds.rounded() == seconds, abs(seconds) < 9_007_199_254_740_992 {
            int(Int64(seconds))
        } else {
            double(seconds)
        }
    }
}

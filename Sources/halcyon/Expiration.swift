// Turning `--ttl`, `--expires-at` and `--never` into the protocol's expiration forms.

import HalcyonJSON

/// A protocol expiration (`StorageExpiration` on the wire) chosen on the command line.
enum Expiration {
    case never
    /// `"expired"`: already over, which expires the key now (`touch k 0`).
    case expired
    /// `{"seconds": N}`, N > 0.
    case seconds(Double)
    /// `{"date": T}`, Unix seconds.
    case date(Double)

    /// Parses a TTL argument: a duration (`10m`, `1h30m`, `90`) or `never`.
    /// - Parameter zeroExpiresNow: accept a zero duration (`touch k 0`), which expires
    ///   the entry now; elsewhere zero is refused, since storing an already expired value
    ///   is a mistake rather than a request.
    static func ttl(_ text: String, option: String, zeroExpiresNow: Bool = false) throws(CLIError) -> Expiration {
        if text.lowercased() == "never" { return .never }
        do {
            let seconds = zeroExpiresNow ? try Durations.secondsOrZero(text) : try Durations.seconds(text)
            return seconds == 0 ? .expired : .seconds(seconds)
        } catch {
            throw .usage("\(option): \(error.description)")
        }
    }

    /// Picks the one expiration given by `--ttl`, `--expires-at` or `--never`, or nil
    /// for the daemon's default.
    static func choose(ttl: String?, expiresAt: String?, never: Bool) throws(CLIError) -> Expiration? {
        let given = [ttl != nil, expiresAt != nil, never].filter { $0 }.count
        guard given <= 1 else { throw .usage("give only one of --ttl, --expires-at and --never") }
        if let ttl { return try Self.ttl(ttl, option: "--ttl") }
        if let expiresAt {
            do { return .date(try Durations.unixTime(expiresAt)) } catch { throw .usage("--expires-at: \(error.description)") }
        }
        return never ? .never : nil
    }

    /// Writes this expiration as a JSON value (after its key).
    func write(to writer: inout JSONWriter) {
        switch self {
        case .never:
            writer.string("never")
        case .expired:
            writer.string("expired")
        case .seconds(let seconds):
            writer.beginObject()
            writer.key("seconds")
            Self.writeNumber(seconds, to: &writer)
            writer.endObject()
        case .date(let time):
            writer.beginObject()
            writer.key("date")
            Self.writeNumber(time, to: &writer)
            writer.endObject()
        }
    }

    /// Whole numbers go as JSON integers, so `10m` reads `{"seconds":600}` in logs.
    private static func writeNumber(_ value: Double, to writer: inout JSONWriter) {
        if value == value.rounded(), abs(value) < 1e15 {
            writer.int(Int64(value))
        } else {
            writer.double(value)
        }
    }
}

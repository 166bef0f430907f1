// Human durations and instants as the command line takes them: `500ms`, `30s`, `10m`,
// `2h`, `7d`, `1h30m`, or a bare number of seconds; instants as Unix seconds or ISO 8601.

#if canImport(Glibc)
import Glibc
#endif
import HalcyonJSON

/// Parses and prints the durations `set --ttl`, `touch` and `--timeout` take.
///
/// Threading: stateless; any thread.
enum Durations {
    /// Why a duration or instant was refused; the text is the usage error's message.
    struct ParseError: Error, CustomStringConvertible {
        let description: String
    }

    /// Parses `text` into a positive number of seconds, by the grammar the daemon uses
    /// too (`HumanDuration` in HalcyonJSON; the table in Docs/DURATIONS.md): a bare number
    /// (`90`, `1.5`) is seconds; otherwise one or more `<number><unit>` groups added
    /// together (`1h30m`, `2m30.5s`), units `ms s sec m min h d w`.
    /// - Throws: `ParseError` for text outside the grammar, or a total that is not
    ///   greater than zero.
    static func seconds(_ text: String) throws(ParseError) -> Double {
        switch HumanDuration.seconds(text) {
        case .success(let seconds):
            guard seconds > 0 else { throw ParseError(description: "duration '\(text)' must be greater than zero") }
            return seconds
        case .failure(.empty):
            throw ParseError(description: "empty duration")
        case .failure(.unknownUnit):
            throw ParseError(description: "invalid duration unit in '\(text)' (use ms, s, m, min, h, d or w)")
        case .failure(.malformed), .failure(.tooLarge):
            throw ParseError(description: "invalid duration '\(text)' (use e.g. 500ms, 30s, 10m, 2h, 7d, 1h30m)")
        }
    }

    /// Like `seconds`, but 0 is allowed (`--wait 0`).
    static func secondsOrZero(_ text: String) throws(ParseError) -> Double {
        if case .success(let seconds) = HumanDuration.seconds(text), seconds == 0 { return 0 }
        return try self.seconds(text)
    }

    /// Parses an instant: Unix seconds (`1763865660`, `1763865660.5`) or an RFC 3339 date
    /// (ISO 8601 with a time zone: `2026-11-23T10:00:00Z`, `2026-11-23T11:00:00.5+01:00`).
    static func unixTime(_ text: String) throws(ParseError) -> Double {
        if let seconds = Double(text), seconds.isFinite { return seconds }
        if let seconds = rfc3339(Array(text.utf8)) { return seconds }
        throw ParseError(description: "invalid time '\(text)' (use Unix seconds or ISO 8601 such as 2026-11-23T10:00:00Z)")
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, as Unix seconds; nil for anything else.
    private static func rfc3339(_ bytes: [UInt8]) -> Double? {
        var index = 0
        func number(_ digits: Int) -> Int? {
            guard index + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<(index + digits)] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += digits
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
              expect("Tt "), let hour = number(2), expect(":"), let minute = number(2), expect(":"),
              let second = number(2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        var fraction = 0.0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                fraction += Double(bytes[index] - UInt8(ascii: "0")) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offset = 0
        if expect("Zz") {
            offset = 0
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        } else {
            return nil
        }
        guard index == bytes.count else { return nil }
        var fields = tm()
        fields.tm_year = Int32(year - 1900)
        fields.tm_mon = Int32(month - 1)
        fields.tm_mday = Int32(day)
        fields.tm_hour = Int32(hour)
        fields.tm_min = Int32(minute)
        fields.tm_sec = Int32(second)
        let utc = timegm(&fields)
        // timegm normalises 31 February into March: such a date is not a date.
        guard fields.tm_mday == Int32(day) else { return nil }
        return Double(utc - offset) + fraction
    }

    /// A short human form of a non-negative span: `45s`, `9m 59s`, `2h 5m`, `3d 4h`.
    /// Spans under ten seconds keep one decimal so sub-second TTLs stay visible.
    /// - Parameter rounding: how the span is cut to what is shown. Time left before an
    ///   expiry rounds down, as a countdown does: the daemon rounds stored expiries up to
    ///   whole seconds, so a fresh 10-minute entry has up to 600.99 s left, which is `10m`,
    ///   not `10m 1s`.
    static func describe(_ seconds: Double, rounding: FloatingPointRoundingRule = .toNearestOrAwayFromZero) -> String {
        let span = max(0, seconds)
        if span < 10 {
            let tenths = (span * 10).rounded(rounding) / 10
            return tenths == tenths.rounded() ? "\(Int(tenths))s" : "\(tenths)s"
        }
        let whole = Int(span.rounded(rounding))
        let (days, hours, minutes, secs) = (whole / 86_400, whole % 86_400 / 3600, whole % 3600 / 60, whole % 60)
        if days > 0 { return hours > 0 ? "\(days)d \(hours)h" : "\(days)d" }
        if hours > 0 { return minutes > 0 ? "\(hours)h \(minutes)m" : "\(hours)h" }
        if minutes > 0 { return secs > 0 ? "\(minutes)m \(secs)s" : "\(minutes)m" }
        return "\(secs)s"
    }

    /// An instant as `2026-11-23 10:00:00 UTC`: fixed, sortable, and the same on every
    /// machine, which matters more in a cache's logs than the local zone.
    static func formatUTC(_ unixSeconds: Double) -> String {
        var time = time_t(unixSeconds.rounded(.down))
        var fields = tm()
        guard gmtime_r(&time, &fields) != nil else { return "\(unixSeconds)" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(fields.tm_year + 1900)-\(two(fields.tm_mon + 1))-\(two(fields.tm_mday)) "
            + "\(two(fields.tm_hour)):\(two(fields.tm_min)):\(two(fields.tm_sec)) UTC"
    }

    /// The wall clock, in Unix seconds.
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

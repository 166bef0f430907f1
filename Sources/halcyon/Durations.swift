// Human durations and instants as the command line takes them: `500ms`, `30s`, `10m`,
// `2h`, `7d`, `1h30m`, or a bare number of seconds; instants as Unix seconds or ISO 8601.

import Foundation
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

    /// Parses an instant: Unix seconds (`1763865660`, `1763865660.5`) or an ISO 8601 date
    /// with a time zone (`2026-11-23T10:00:00Z`).
    static func unixTime(_ text: String) throws(ParseError) -> Double {
        if let seconds = Double(text), seconds.isFinite { return seconds }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        throw ParseError(description: "invalid time '\(text)' (use Unix seconds or ISO 8601 such as 2026-11-23T10:00:00Z)")
    }

    /// A short human form of a non-negative span: `45s`, `9m 59s`, `2h 5m`, `3d 4h`.
    /// Spans under ten seconds keep one decimal so sub-second TTLs stay visible.
    static func describe(_ seconds: Double) -> String {
        let span = max(0, seconds)
        if span < 10 {
            let tenths = (span * 10).rounded() / 10
            return tenths == tenths.rounded() ? "\(Int(tenths))s" : "\(tenths)s"
        }
        let whole = Int(span.rounded())
        let (days, hours, minutes, secs) = (whole / 86_400, whole % 86_400 / 3600, whole % 3600 / 60, whole % 60)
        if days > 0 { return hours > 0 ? "\(days)d \(hours)h" : "\(days)d" }
        if hours > 0 { return minutes > 0 ? "\(hours)h \(minutes)m" : "\(hours)h" }
        if minutes > 0 { return secs > 0 ? "\(minutes)m \(secs)s" : "\(minutes)m" }
        return "\(secs)s"
    }

    /// An instant as `2026-11-23 10:00:00 UTC`: fixed, sortable, and the same on every
    /// machine, which matters more in a cache's logs than the local zone.
    static func formatUTC(_ unixSeconds: Double) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: Date(timeIntervalSince1970: unixSeconds)) + " UTC"
    }
}

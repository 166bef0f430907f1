// Sizes and durations as people write them on a command line (`64MiB`, `300s`, `1h30m`,
// `never`), turned into the numbers the cache and the server use, and back into text for
// the start-up log line and `server.info`.

import Foundation
import HalcyonCache
import HalcyonJSON

/// Parsers and formatters for human-written sizes and durations.
///
/// Sizes: a number (fractions allowed) and an optional unit. `KiB`/`MiB`/`GiB`/`TiB` are
/// binary (1024-based); `KB`/`MB`/`GB`/`TB` are decimal (1000-based), as SI and disk
/// vendors use them; a bare `K`/`M`/`G`/`T` is binary, as in systemd and coreutils; `B`
/// or no unit means bytes. Units are case-insensitive (`64mib` works). A fractional
/// result is rounded down to whole bytes (`1.5KiB` is 1536).
///
/// Durations: the grammar of `HumanDuration` (HalcyonJSON), shared with the CLI: one or
/// more `<number><unit>` parts, added up (`1h30m`, `1.5s`, `500ms`, `10min`); a bare
/// number means seconds; see Docs/DURATIONS.md. Expirations accept the same
/// forms plus `never`; a whole number of days becomes `StorageExpiration.days` so that
/// `7d` equals the default `.days(7)`.
///
/// Pure functions: thread-safe, callable from any thread.
public enum HumanUnits {
    /// Why a text is not a size or a duration; `description` is a one-line message.
    public enum ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Empty text.
        case empty
        /// Not of the form the parser expects.
        case malformed(String)
        /// The unit is not one we know.
        case unknownUnit(text: String, unit: String)
        /// The value does not fit the target type.
        case tooLarge(String)
        /// A negative value, or zero where only a positive value makes sense.
        case notPositive(String)

        public var description: String {
            switch self {
            case .empty: return "empty value"
            case .malformed(let text): return "'\(text)' is not a valid value"
            case .unknownUnit(let text, let unit): return "'\(text)': unknown unit '\(unit)'"
            case .tooLarge(let text): return "'\(text)' is too large"
            case .notPositive(let text): return "'\(text)' must be greater than zero"
            }
        }
    }

    // MARK: Sizes

    /// Parses a byte count such as `64MiB`, `1GB`, `512K`, `4096`.
    /// - Throws: `ParseError` for empty, malformed, unknown-unit or overflowing text.
    public static func parseByteCount(_ text: String) throws(ParseError) -> UInt64 {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { throw .empty }
        let (number, unit) = try splitNumber(trimmed, original: text)
        guard unit.count == unit.trimmingCharacters(in: .whitespaces).count else { throw .malformed(text) }
        let multiplier: Double
        switch unit.lowercased() {
        case "", "b": multiplier = 1
        case "k", "kib": multiplier = 1024
        case "m", "mib": multiplier = 1024 * 1024
        case "g", "gib": multiplier = 1024 * 1024 * 1024
        case "t", "tib": multiplier = 1024 * 1024 * 1024 * 1024
        case "kb": multiplier = 1e3
        case "mb": multiplier = 1e6
        case "gb": multiplier = 1e9
        case "tb": multiplier = 1e12
        default: throw .unknownUnit(text: text, unit: unit)
        }
        // Whole numbers without a unit are exact; going through Double would lose
        // precision above 2^53.
        if multiplier == 1, let exact = UInt64(number) { return exact }
        guard let value = Double(number), value.isFinite, value >= 0 else { throw .malformed(text) }
        let bytes = (value * multiplier).rounded(.down)
        guard bytes < 18_446_744_073_709_551_616.0 else { throw .tooLarge(text) }
        return UInt64(bytes)
    }

    /// Parses a byte count that must fit an `Int` (memory limits, line and batch sizes).
    public static func parseIntByteCount(_ text: String) throws(ParseError) -> Int {
        let value = try parseByteCount(text)
        guard value <= UInt64(Int.max) else { throw .tooLarge(text) }
        return Int(value)
    }

    /// Formats a byte count in the largest binary unit that divides it exactly
    /// (`1073741824` → `1GiB`, `1536` → `1536B`, never `1.5KiB`), so the text parses back
    /// to the same number.
    public static func formatByteCount(_ bytes: UInt64) -> String {
        let units: [(String, UInt64)] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        for (name, size) in units where bytes >= size && bytes % size == 0 {
            return "\(bytes / size)\(name)"
        }
        return "\(bytes)B"
    }

    // MARK: Durations

    /// Parses a duration such as `300s`, `10m`, `1h30m`, `1.5s`, `500ms`, `7d`; a bare
    /// number is seconds. Zero is allowed (callers decide what it means).
    /// - Throws: `ParseError` for empty, malformed, unknown-unit or non-finite text.
    public static func parseDuration(_ text: String) throws(ParseError) -> TimeInterval {
        // The grammar shared with the CLI (HalcyonJSON/HumanDuration.swift, Docs/DURATIONS.md).
        switch HumanDuration.seconds(text) {
        case .success(let seconds): return seconds
        case .failure(.empty): throw .empty
        case .failure(.malformed):
            if text.trimmingCharacters(in: .whitespaces).first == "-" { throw .notPositive(text) }
            throw .malformed(text)
        case .failure(.unknownUnit(let unit)): throw .unknownUnit(text: text, unit: unit)
        case .failure(.tooLarge): throw .tooLarge(text)
        }
    }

    /// Parses an expiration: `never`, or a positive duration. A whole number of days
    /// (`7d`, `2w`) becomes `.days`, anything else `.seconds`.
    /// - Throws: `ParseError.notPositive` for a zero duration: an entry that expires when
    ///   stored would make the tier useless, so a flag never means that.
    public static func parseExpiration(_ text: String) throws(ParseError) -> StorageExpiration {
        if text.trimmingCharacters(in: .whitespaces).lowercased() == "never" { return .never }
        let seconds = try parseDuration(text)
        guard seconds > 0 else { throw .notPositive(text) }
        let days = seconds / 86_400
        if days == days.rounded(), days <= Double(Int32.max) { return .days(Int(days)) }
        return .seconds(seconds)
    }

    /// Formats a duration compactly (`600` → `10m`, `5400` → `1h30m`, `1.5` → `1.5s`);
    /// the text parses back to the same number of seconds.
    public static func formatDuration(_ seconds: TimeInterval) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "\(seconds)s" }
        if seconds == 0 { return "0s" }
        if seconds != seconds.rounded() {
            if seconds < 1 { return "\(formatNumber(seconds * 1000))ms" }
            return "\(formatNumber(seconds))s"
        }
        var remaining = Int64(seconds)
        var text = ""
        for (name, size) in [("d", Int64(86_400)), ("h", 3600), ("m", 60), ("s", 1)] where remaining >= size {
            text += "\(remaining / size)\(name)"
            remaining %= size
        }
        return text
    }

    /// Formats an expiration the way `parseExpiration` reads it.
    public static func formatExpiration(_ expiration: StorageExpiration) -> String {
        switch expiration {
        case .never: return "never"
        case .seconds(let seconds): return formatDuration(seconds)
        case .days(let days): return "\(days)d"
        case .date(let date): return ISO8601DateFormatter().string(from: date)
        case .expired: return "expired"
        }
    }

    // MARK: Helpers

    /// Splits `12.5MiB` into (`12.5`, `MiB`); the number must lead.
    private static func splitNumber(_ text: String, original: String) throws(ParseError) -> (String, String) {
        let end = text.firstIndex { !($0.isASCII && ($0.isNumber || $0 == ".")) } ?? text.endIndex
        let number = String(text[text.startIndex..<end])
        guard !number.isEmpty else {
            if text.first == "-" { throw .notPositive(original) }
            throw .malformed(original)
        }
        return (number, String(text[end...]))
    }

    private static func formatNumber(_ value: Double) -> String {
        // Up to 6 decimals, trailing zeros dropped: enough for milliseconds, no "1.5000001".
        var text = String(format: "%.6f", value)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }
}

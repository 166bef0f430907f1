// The one grammar for durations that people type: daemon flags (`--disk-expiration 7d`), the
// CLI (`--ttl 1h30m`, `--timeout 500ms`) and, matching it, the Python client. The
// accepted and refused forms are tabled in Docs/DURATIONS.md; change both together.

/// Parses human durations.
///
/// Grammar (after trimming surrounding spaces and tabs):
///
///     duration := number | group+
///     group    := number unit
///     number   := digit+ ("." digit+)?
///     unit     := "ms" | "s" | "sec" | "m" | "min" | "h" | "d" | "w"   (any letter case)
///
/// Groups add up (`1h30m` is 5400 s, in any order); a bare number is seconds. No signs,
/// exponents, spaces inside, quotes, `inf`/`nan`. The result may be 0; callers that need
/// a positive span (a TTL) refuse 0 themselves, and `never` is a word that expiration
/// parsers check before calling this.
///
/// Pure: thread-safe.
public enum HumanDuration {
    /// Why a text is not a duration.
    public enum Refusal: Error, Sendable, Equatable {
        /// Nothing but spaces.
        case empty
        /// Not of the grammar's shape.
        case malformed
        /// A group's unit is not one of the grammar's.
        case unknownUnit(String)
        /// 10^15 seconds or more.
        case tooLarge
    }

    /// The largest span accepted, exclusive, in seconds (about 31 million years).
    public static let limit = 1e15

    /// `text` in seconds (≥ 0), or why not.
    public static func seconds(_ text: String) -> Result<Double, Refusal> {
        let bytes = Array(text.utf8)
        var start = 0, end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        guard start < end else { return .failure(.empty) }
        var i = start
        var total = 0.0
        var groups = 0
        while i < end {
            guard let (value, next) = number(bytes, from: i, to: end) else { return .failure(.malformed) }
            i = next
            var unitEnd = i
            while unitEnd < end, isLetter(bytes[unitEnd]) { unitEnd += 1 }
            if unitEnd == i {
                // A bare number is the whole text, or nothing.
                guard groups == 0, i == end else { return .failure(.malformed) }
                total = value
                break
            }
            let unit = String(decoding: bytes[i..<unitEnd], as: UTF8.self).lowercased()
            switch unit {
            case "ms": total += value / 1000  // divided: 250ms is exactly 0.25
            case "s", "sec": total += value
            case "m", "min": total += value * 60
            case "h": total += value * 3600
            case "d": total += value * 86_400
            case "w": total += value * 604_800
            default: return .failure(.unknownUnit(unit))
            }
            groups += 1
            i = unitEnd
        }
        guard total.isFinite, total < limit else { return .failure(.tooLarge) }
        return .success(total)
    }

    /// `digit+ ("." digit+)?` at `from`: its value and the index after it.
    private static func number(_ bytes: [UInt8], from: Int, to end: Int) -> (Double, Int)? {
        var i = from
        while i < end, isDigit(bytes[i]) { i += 1 }
        guard i > from else { return nil }
        if i < end, bytes[i] == UInt8(ascii: ".") {
            let fraction = i + 1
            var j = fraction
            while j < end, isDigit(bytes[j]) { j += 1 }
            guard j > fraction else { return nil }
            i = j
        }
        guard let value = Double(String(decoding: bytes[from..<i], as: UTF8.self)) else { return nil }
        return (value, i)
    }

    private static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
    private static func isLetter(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A }
}

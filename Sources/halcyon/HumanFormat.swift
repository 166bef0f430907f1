// Human renderings of results: sizes, expiries, relative times, and the key/value table
// `stats` and `info` print by default.

import HalcyonJSON

/// Formats result values for people. Machine output is always `--json`.
///
/// Threading: stateless; any thread.
enum HumanFormat {
    /// `5 bytes`, `1.5 KiB (1536 bytes)`: the exact count stays visible next to the
    /// rounded one, so sizes can be compared across commands.
    static func size(_ bytes: Int64) -> String {
        let units = ["KiB", "MiB", "GiB", "TiB"]
        guard bytes >= 1024 else { return bytes == 1 ? "1 byte" : "\(bytes) bytes" }
        var value = Double(bytes)
        var unit = -1
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        let rounded = (value * 10).rounded() / 10
        let number = rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
        return "\(number) \(units[unit]) (\(bytes) bytes)"
    }

    /// An `expiresAt` member: `never`, `in 9m 59s (2026-11-23 10:00:00 UTC)`, or
    /// `expired 3s ago (…)` for an entry the sweep has not removed yet.
    static func expiry(_ value: JSONValue?, now: Double = Durations.now()) -> String {
        guard let value, let time = value.double else { return "never" }
        let delta = time - now
        let when = Durations.formatUTC(time)
        return delta >= 0
            ? "in \(Durations.describe(delta, rounding: .down)) (\(when))"
            : "expired \(Durations.describe(-delta)) ago (\(when))"
    }

    /// How long a memory copy stays in RAM: `in memory for 5m`, `in memory for good`.
    static func residency(_ value: JSONValue?, now: Double = Durations.now()) -> String {
        guard let value, let time = value.double else { return "in memory for good" }
        return "in memory for \(Durations.describe(max(0, time - now), rounding: .down))"
    }

    /// A past instant: `3s ago (2026-11-23 09:59:57 UTC)`. The disk tier rounds times up
    /// to whole seconds, so an access a moment ago may lie up to a second ahead: that
    /// reads `just now`, not `in 0.4s`.
    static func pastTime(_ value: JSONValue?, now: Double = Durations.now()) -> String {
        guard let value, let time = value.double else { return "unknown" }
        let delta = now - time
        let when = Durations.formatUTC(time)
        if abs(delta) < 1 { return "just now (\(when))" }
        return delta >= 0 ? "\(Durations.describe(delta)) ago (\(when))" : "in \(Durations.describe(-delta)) (\(when))"
    }

    /// Rows `name  value` for every leaf of `value`, nested objects as dotted names
    /// (`memory.hits`), in the daemon's member order; byte counts and durations get a
    /// human form beside the number.
    static func table(_ value: JSONValue) -> String {
        var rows: [(String, String)] = []
        flatten(value, prefix: "", into: &rows)
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { name, text in
            name + String(repeating: " ", count: width - name.count + 2) + text
        }.joined(separator: "\n")
    }

    private static func flatten(_ value: JSONValue, prefix: String, into rows: inout [(String, String)]) {
        if value.kind == .object, value.count > 0 {
            for (name, member) in value.members {
                flatten(member, prefix: prefix.isEmpty ? name : "\(prefix).\(name)", into: &rows)
            }
            return
        }
        // A list of named objects (`cache.stats`' `namespaces`): one group of rows per name.
        if let list = value.array, !list.isEmpty, list.allSatisfy({ $0["name"]?.string != nil }) {
            for item in list {
                let name = item["name"]?.string ?? ""
                for (member, inner) in item.members where member != "name" {
                    flatten(inner, prefix: "\(prefix).\(name).\(member)", into: &rows)
                }
            }
            return
        }
        rows.append((prefix, leafText(value, name: prefix)))
    }

    /// A leaf's text: strings unquoted, sizes and uptime humanised, the rest as JSON.
    private static func leafText(_ value: JSONValue, name: String) -> String {
        let leaf = name.split(separator: ".").last.map(String.init)?.lowercased() ?? ""
        if let text = value.string { return text }
        if let integer = value.int64, integer >= 1024,
           leaf.contains("bytes") || leaf.contains("size") || leaf == "memorylimit" {
            return size(integer)
        }
        if leaf.hasSuffix("at"), let time = value.double, time > 1_000_000_000 {
            return "\(value.compactText) (\(Durations.formatUTC(time)))"
        }
        if leaf == "uptime", let seconds = value.double {
            return "\(value.compactText) (\(Durations.describe(seconds)))"
        }
        return value.compactText
    }
}

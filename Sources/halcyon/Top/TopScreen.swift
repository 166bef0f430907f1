// The text of `halcyon top`: the full screen (rows of at most the terminal's width, at
// most its height) and the one line a refresh writes to logs.

/// Lays out a `TopView` for people.
///
/// ```
///  halcyon top  default  halcyond 0.1.0  up 2h 5m                      22:31:05 UTC
///  /run/halcyon/halcyon.sock                                every 1s   q quits
///
///  requests   1204.0/s   sets 203.0/s   in flight 1   connections 3
///  latency    p50 62µs   p99 410µs
///  reads      1001.0/s   memory 97.1%   disk 1.2%   miss 1.7%
///  memory     12.3 MiB of 256 MiB (4.8%)   4123 entries
///  ...
///  METHOD                          REQ/S          P50          P99
///  cache.get                      1001.0         58µs        380µs
/// ```
///
/// Threading: stateless; any thread.
enum TopScreen {
    /// How a row is drawn: the whole row takes one style, so cutting a row to the
    /// terminal's width never cuts an escape sequence.
    enum Style: Equatable {
        case plain, title, heading, alert
    }

    struct Row: Equatable {
        var text: String
        var style: Style = .plain
    }

    /// The rows of one screen.
    /// - Parameters:
    ///   - view: the figures; nil before the second sample (rates need two).
    ///   - sample: the newest sample, for the title when `view` is nil.
    ///   - status: a line for the last row (a lost daemon), or nil.
    ///   - clock: the wall-clock time to show (Unix seconds).
    static func rows(
        view: TopView?, sample: TopSample?, status: String?, interval: Double, clock: Double,
        width: Int, height: Int
    ) -> [Row] {
        let width = max(width, 20)
        let height = max(height, 4)
        var rows: [Row] = []
        let current = view?.sample ?? sample
        let time = String(Durations.formatUTC(clock).split(separator: " ").dropFirst().joined(separator: " "))
        var title = " halcyon top"
        if let current {
            title += "  \(current.cacheName)  halcyond \(current.version)  up \(Durations.describe(current.uptime))"
        }
        rows.append(Row(text: spread(title, time + " ", width: width), style: .title))
        var socket = current.map { " \($0.socket)" } ?? ""
        if let unread = current?.unreadMetricLines, unread > 0 { socket += "  (\(unread) metric lines unread)" }
        rows.append(Row(text: spread(socket, "every \(Durations.describe(interval))   q quits ", width: width)))
        rows.append(Row(text: ""))
        if let view {
            rows += body(view, width: width)
        } else if status == nil {
            rows.append(Row(text: " reading the daemon: the rates need a second sample, \(Durations.describe(interval)) apart"))
        }
        // The status row is kept; the method rows give way first.
        let room = height - (status == nil ? 0 : 1)
        if rows.count > room {
            rows = Array(rows.prefix(room))
        }
        if let status {
            while rows.count < height - 1 { rows.append(Row(text: "")) }
            rows.append(Row(text: " " + status, style: .alert))
        }
        return rows.map { Row(text: cut($0.text, to: width), style: $0.style) }
    }

    /// The figures, then as many method rows as fit (the caller cuts to the height).
    private static func body(_ view: TopView, width: Int) -> [Row] {
        let sample = view.sample
        var rows: [Row] = []
        func row(_ label: String, _ fields: [String]) {
            rows.append(Row(text: " " + pad(label, 11) + fields.joined(separator: "   ")))
        }
        row("requests", ["\(rate(view.requestRate))/s", "sets \(rate(view.setRate))/s",
                         "in flight \(count(sample.inFlight))", "connections \(count(sample.connections))"])
        row("latency", ["p50 \(latency(view.p50))", "p99 \(latency(view.p99))"])
        if view.readRate > 0 {
            var shares = ["\(rate(view.readRate))/s", "memory \(percent(view.memoryShare))", "disk \(percent(view.diskShare))"]
            if view.upstreamShare != nil { shares.append("upstream \(percent(view.upstreamShare))") }
            row("reads", shares + ["miss \(percent(view.missShare))"])
        } else {
            row("reads", ["none"])
        }
        row("memory", [ofLimit(sample.memory.bytes, sample.memoryLimit), "\(count(sample.memory.entries)) entries"])
        row("disk", [ofLimit(sample.disk.bytes, sample.diskLimit), "\(count(sample.disk.entries)) entries"])
        row("dropped", ["evictions \(rate(view.evictionRate))/s (memory \(rate(view.memoryEvictionRate)), disk \(rate(view.diskEvictionRate)))",
                        "expirations \(rate(view.expirationRate))/s"])
        row("journal", ["unwritten \(bytes(sample.unwrittenBytes)) in \(count(sample.unwrittenEntries)) entries",
                        "on disk \(bytes(sample.journalBytes))", "write queue \(count(sample.writesQueued))"])
        if let state = sample.upstreamState {
            let connected = sample.nodes.filter { $0.state == "connected" }.count
            var fields = [state, "\(connected) of \(sample.nodes.count) nodes"]
            if sample.upstreamCluster { fields.append("cluster") }
            fields += ["round trip \(latency(sample.upstreamRoundTripMicros / 1e6))", "reads \(rate(view.upstreamReadRate))/s"]
            row("upstream", fields)
            let shown = sample.nodes.count > 4 ? 3 : sample.nodes.count
            for node in sample.nodes.prefix(shown) {
                let details = node.details.isEmpty ? "" : "   " + node.details.joined(separator: " ")
                rows.append(Row(text: "   " + pad(node.name, 34) + " " + node.state + details,
                                style: node.state == "connected" ? .plain : .alert))
            }
            if shown < sample.nodes.count {
                let down = sample.nodes.dropFirst(shown).filter { $0.state != "connected" }.count
                rows.append(Row(text: "   … \(sample.nodes.count - shown) more nodes, \(down) of them not connected"))
            }
        }
        rows.append(Row(text: ""))
        rows.append(Row(text: " " + pad("METHOD", 28) + left("REQ/S", 10) + left("P50", 12) + left("P99", 12), style: .heading))
        for method in view.methods {
            rows.append(Row(text: " " + pad(method.name, 28) + left(rate(method.rate), 10)
                + left(latency(method.p50), 12) + left(latency(method.p99), 12)))
        }
        if view.methods.isEmpty {
            rows.append(Row(text: " (no requests)"))
        }
        return rows
    }

    /// One line per refresh, for logs: the wall-clock time (UTC), then `name=value`
    /// fields, the busiest methods last.
    static func line(_ view: TopView, clock: Double) -> String {
        let sample = view.sample
        var fields = [
            Durations.formatUTC(clock),
            "requests=\(rate(view.requestRate))/s",
            "p50=\(latency(view.p50))", "p99=\(latency(view.p99))",
            "reads=\(rate(view.readRate))/s",
            "memory_hits=\(percent(view.memoryShare))", "disk_hits=\(percent(view.diskShare))",
        ]
        if view.upstreamShare != nil { fields.append("upstream_hits=\(percent(view.upstreamShare))") }
        fields += [
            "misses=\(percent(view.missShare))",
            "memory=\(compactBytes(sample.memory.bytes))/\(limit(sample.memoryLimit))",
            "disk=\(compactBytes(sample.disk.bytes))/\(limit(sample.diskLimit))",
            "evictions=\(rate(view.evictionRate))/s", "expirations=\(rate(view.expirationRate))/s",
            "unwritten=\(compactBytes(sample.unwrittenBytes))", "unwritten_entries=\(count(sample.unwrittenEntries))",
            "write_queue=\(count(sample.writesQueued))", "connections=\(count(sample.connections))",
        ]
        if let state = sample.upstreamState {
            let connected = sample.nodes.filter { $0.state == "connected" }.count
            fields.append("upstream=\(state)(\(connected)/\(sample.nodes.count))")
        }
        if sample.unreadMetricLines > 0 { fields.append("unread_metric_lines=\(sample.unreadMetricLines)") }
        for method in view.methods {
            fields.append("\(method.name)=\(rate(method.rate))/s")
        }
        return fields.joined(separator: " ")
    }

    // MARK: Numbers

    /// `0.0`, `12.5`, `1204.0`: one decimal, so a rate of a few a second still moves.
    static func rate(_ value: Double) -> String {
        fixed(value, decimals: 1)
    }

    /// `62µs`, `1.2ms`, `25ms`, `1.50s`; `-` for none.
    static func latency(_ seconds: Double?) -> String {
        guard let seconds else { return "-" }
        if seconds < 1e-3 { return "\(Int((seconds * 1e6).rounded()))µs" }
        if seconds < 1e-2 { return fixed(seconds * 1e3, decimals: 1) + "ms" }
        if seconds < 1 { return "\(Int((seconds * 1e3).rounded()))ms" }
        return fixed(seconds, decimals: 2) + "s"
    }

    private static func percent(_ share: Double?) -> String {
        guard let share else { return "-" }
        return fixed(share * 100, decimals: 1) + "%"
    }

    private static func count(_ value: Double) -> String {
        String(Int64(value.rounded()))
    }

    /// `12.3 MiB of 256 MiB (4.8%)`, or `12.3 MiB (no limit)` when the limit is 0.
    private static func ofLimit(_ used: Double, _ limit: Double) -> String {
        guard limit > 0 else { return "\(bytes(used)) (no limit)" }
        return "\(bytes(used)) of \(bytes(limit)) (\(percent(used / limit)))"
    }

    private static func limit(_ value: Double) -> String {
        value > 0 ? compactBytes(value) : "unlimited"
    }

    /// `512 B`, `12.3 MiB`, `1 GiB`.
    static func bytes(_ value: Double) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var scaled = max(0, value)
        var unit = 0
        while scaled >= 1024, unit < units.count - 1 {
            scaled /= 1024
            unit += 1
        }
        if unit == 0 { return "\(Int(scaled)) B" }
        let text = fixed(scaled, decimals: 1)
        return (text.hasSuffix(".0") ? String(text.dropLast(2)) : text) + " " + units[unit]
    }

    /// `bytes` without the space, for a `name=value` field.
    private static func compactBytes(_ value: Double) -> String {
        String(bytes(value).filter { $0 != " " })
    }

    /// `value` with exactly `decimals` decimals, rounded half away from zero.
    static func fixed(_ value: Double, decimals: Int) -> String {
        guard value.isFinite else { return "-" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = Int64((abs(value) * scale).rounded())
        let divisor = Int64(scale)
        let whole = scaled / divisor
        let fraction = String(scaled % divisor)
        let sign = value < 0 && scaled != 0 ? "-" : ""
        guard decimals > 0 else { return sign + String(whole) }
        return sign + String(whole) + "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }

    // MARK: Layout

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    private static func left(_ text: String, _ width: Int) -> String {
        text.count >= width ? " " + text : String(repeating: " ", count: width - text.count) + text
    }

    /// `leading` at the left, `trailing` at the right edge of `width` (after `leading`
    /// when they would overlap).
    private static func spread(_ leading: String, _ trailing: String, width: Int) -> String {
        let gap = width - leading.count - trailing.count
        return leading + String(repeating: " ", count: max(gap, 1)) + trailing
    }

    /// At most `width` characters.
    private static func cut(_ text: String, to width: Int) -> String {
        text.count <= width ? text : String(text.prefix(width))
    }
}

// Reading the Prometheus text format (0.0.4) that `server.metrics` answers: enough of it
// for `halcyon top` to take the per-method request counts and latency histograms, which
// `cache.stats` does not carry.

/// The samples of a Prometheus text exposition.
///
/// Reads what the format allows a sample line to be: `name{label="value",...} number`,
/// with `\\`, `\"` and `\n` escaped in label values, an optional timestamp after the
/// number, `# ...` comments and blank lines skipped. A line it cannot read is skipped and
/// counted (`unreadLines`), never guessed at.
///
/// Threading: a value.
struct PrometheusText {
    /// One sample line.
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    private(set) var samples: [Sample] = []
    /// Lines that were neither comments, blank, nor readable samples.
    private(set) var unreadLines = 0

    init(_ text: String) {
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.first == "#" || line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            if let sample = Self.sample(line.utf8) {
                samples.append(sample)
            } else {
                unreadLines += 1
            }
        }
    }

    /// The samples named `name`.
    func samples(named name: String) -> [Sample] {
        samples.filter { $0.name == name }
    }

    private static func sample(_ line: Substring.UTF8View) -> Sample? {
        var index = line.startIndex
        let nameStart = index
        while index < line.endIndex, isNameByte(line[index]) { index = line.index(after: index) }
        guard index > nameStart else { return nil }
        let name = String(decoding: line[nameStart..<index], as: UTF8.self)
        var labels: [String: String] = [:]
        if index < line.endIndex, line[index] == UInt8(ascii: "{") {
            index = line.index(after: index)
            guard let end = readLabels(line, from: &index, into: &labels) else { return nil }
            index = end
        }
        let rest = String(decoding: line[index...], as: UTF8.self).split(separator: " ", omittingEmptySubsequences: true)
        guard let first = rest.first, let value = number(first) else { return nil }
        return Sample(name: name, labels: labels, value: value)
    }

    /// Reads `label="value",...}` from just after `{`; returns the index after `}`.
    private static func readLabels(
        _ line: Substring.UTF8View, from index: inout Substring.UTF8View.Index, into labels: inout [String: String]
    ) -> Substring.UTF8View.Index? {
        while index < line.endIndex {
            if line[index] == UInt8(ascii: "}") { return line.index(after: index) }
            if line[index] == UInt8(ascii: ",") || line[index] == UInt8(ascii: " ") {
                index = line.index(after: index)
                continue
            }
            let keyStart = index
            while index < line.endIndex, isNameByte(line[index]) { index = line.index(after: index) }
            let key = String(decoding: line[keyStart..<index], as: UTF8.self)
            guard !key.isEmpty, index < line.endIndex, line[index] == UInt8(ascii: "=") else { return nil }
            index = line.index(after: index)
            guard index < line.endIndex, line[index] == UInt8(ascii: "\"") else { return nil }
            index = line.index(after: index)
            var value: [UInt8] = []
            var closed = false
            while index < line.endIndex {
                let byte = line[index]
                index = line.index(after: index)
                if byte == UInt8(ascii: "\"") { closed = true; break }
                if byte == UInt8(ascii: "\\"), index < line.endIndex {
                    let escaped = line[index]
                    index = line.index(after: index)
                    value.append(escaped == UInt8(ascii: "n") ? UInt8(ascii: "\n") : escaped)
                } else {
                    value.append(byte)
                }
            }
            guard closed else { return nil }
            labels[key] = String(decoding: value, as: UTF8.self)
        }
        return nil
    }

    /// A sample value: a decimal or `+Inf`, `-Inf`, `NaN`.
    private static func number(_ text: Substring) -> Double? {
        switch text {
        case "+Inf": return .infinity
        case "-Inf": return -.infinity
        case "NaN": return .nan
        default: return Double(text)
        }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":")
    }
}

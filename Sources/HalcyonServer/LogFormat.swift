// How halcyond's log lines look on stderr: swift-log's text lines, or one JSON object per
// line for log shippers (`--log-format json`).

import Foundation
import Glibc
import HalcyonJSON
import Logging

/// The `--log-format` choices.
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's `StreamLogHandler` line: `<time> <level> <label>: <metadata> [<source>] <message>`.
    case text
    /// One JSON object per line: `time` (RFC 3339, UTC, milliseconds), `level`, `label`,
    /// `message`, then each metadata item as a string member (a metadata key never
    /// replaces one of those four).
    case json

    /// Parses a `--log-format` value.
    /// - Throws: `LogFormat.Invalid` naming the choices.
    public init(parsing text: String) throws(Invalid) {
        guard let format = LogFormat(rawValue: text) else { throw Invalid(text: text) }
        self = format
    }

    /// The handler factory for `LoggingSystem.bootstrap`, at `level`.
    public func makeHandler(level: Logger.Level) -> @Sendable (String) -> any LogHandler {
        switch self {
        case .text:
            return { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        case .json:
            return { label in JSONLogHandler(label: label, logLevel: level) }
        }
    }

    /// A `--log-format` value that is neither `text` nor `json`.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public let text: String
        public var description: String { "--log-format '\(text)': expected text or json" }
    }
}

/// Writes each event as one JSON line to stderr with a single `write(2)`, so lines from
/// several threads never interleave.
///
/// Threading: a value, as swift-log wants; `log(event:)` may run on any thread.
public struct JSONLogHandler: LogHandler {
    public let label: String
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    public init(label: String, logLevel: Logger.Level) {
        self.label = label
        self.logLevel = logLevel
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let own = event.metadata { all.merge(own) { _, new in new } }
        var line = Self.line(
            time: Date(), level: event.level, label: label, message: event.message.description, metadata: all
        )
        line.append(UInt8(ascii: "\n"))
        line.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }

    /// One event as a JSON object (no newline); `metadata` keys sorted, for stable lines.
    static func line(
        time: Date, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata
    ) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.key("time"); w.string(rfc3339(time))
        w.key("level"); w.string(level.rawValue)
        w.key("label"); w.string(label)
        w.key("message"); w.string(message)
        let reserved: Set<String> = ["time", "level", "label", "message"]
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) where !reserved.contains(key) {
            w.key(key); w.string(value.description)
        }
        w.endObject()
        var bytes = w.bytes
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        return bytes
    }

    /// `2026-11-24T00:15:06.123Z`.
    static func rfc3339(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        var seconds = time_t(interval.rounded(.down))
        let millis = Int((interval - interval.rounded(.down)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let ms = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms)Z"
    }
}

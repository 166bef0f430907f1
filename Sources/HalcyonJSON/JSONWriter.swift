// A direct writer of compact JSON into a byte buffer: the fast path for replies.
// jansson builds a tree and serialises it; for the few fixed reply shapes the daemon
// sends, appending bytes straight into one reserved buffer is cheaper (see the
// measurements in Docs/PROTOCOL.md's notes and the branch report).

/// Appends compact JSON to `bytes`, inserting commas and colons itself.
///
/// The caller is responsible for a well-formed sequence of calls (a `key` before every
/// value inside an object, balanced begin/end); the writer only tracks what it needs
/// to place separators. Strings passed as bytes must be valid UTF-8.
///
/// Output choices: only `"`, `\` and control characters below U+0020 are escaped
/// (`\n`, `\r`, `\t`, `\b`, `\f` short forms, others as `\u00XX`); everything else,
/// U+2028/U+2029 included, is written as UTF-8, as RFC 8259 allows. A raw line feed
/// can therefore never appear inside a value, which is what the line framing needs.
///
/// Threading: a value type with no shared state; use one per thread.
public struct JSONWriter: Sendable {
    /// The JSON written so far.
    public var bytes: [UInt8]
    /// Whether the next key or value must be preceded by a comma.
    @usableFromInline var needsComma = false
    /// How many objects/arrays are open.
    public private(set) var depth = 0

    /// Creates an empty writer, reserving `capacity` bytes.
    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// A point to come back to with `rollback(to:)`.
    public struct Mark: Sendable, Equatable {
        let count: Int
        let needsComma: Bool
        let depth: Int
    }

    /// Remembers the current end of the output.
    public var mark: Mark { Mark(count: bytes.count, needsComma: needsComma, depth: depth) }

    /// Forgets everything written after `mark`, so a half-written element can be replaced.
    public mutating func rollback(to mark: Mark) {
        bytes.removeSubrange(mark.count...)
        needsComma = mark.needsComma
        depth = mark.depth
    }

    /// Empties the writer, keeping its capacity, for reuse.
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        needsComma = false
        depth = 0
    }

    @inlinable mutating func separator() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    // MARK: Structure

    public mutating func beginObject() {
        separator()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        depth += 1
    }

    public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
        depth -= 1
    }

    public mutating func beginArray() {
        separator()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
        depth += 1
    }

    public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
        depth -= 1
    }

    /// Ends a top-level line with `\n`; the next value starts a new line without a comma.
    public mutating func newline() {
        bytes.append(UInt8(ascii: "\n"))
        needsComma = false
    }

    // MARK: Keys

    /// Writes a member name known at compile time. It is escaped like any string, so any
    /// text is safe; the usual ASCII names cost a plain copy.
    public mutating func key(_ name: StaticString) {
        separator()
        name.withUTF8Buffer { appendQuoted(UnsafeRawBufferPointer($0)) }
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Writes a member name.
    public mutating func key(_ name: String) {
        separator()
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    // MARK: Values

    /// Writes a string.
    public mutating func string(_ value: String) {
        separator()
        appendQuoted(value)
        needsComma = true
    }

    /// Writes a string whose UTF-8 bytes are given. The bytes must be valid UTF-8.
    public mutating func string(utf8Bytes value: UnsafeRawBufferPointer) {
        separator()
        appendQuoted(value)
        needsComma = true
    }

    /// Writes a string whose UTF-8 bytes are given. The bytes must be valid UTF-8.
    public mutating func string(utf8Bytes value: [UInt8]) {
        value.withUnsafeBytes { string(utf8Bytes: $0) }
    }

    /// Writes an integer.
    public mutating func int(_ value: Int64) {
        separator()
        appendDecimal(value)
        needsComma = true
    }

    /// Writes an integer.
    public mutating func int(_ value: Int) { int(Int64(value)) }

    /// Writes a finite double in its shortest form that reads back to the same value
    /// (Swift's `description`, which always shows a `.` or an exponent, so it reads back
    /// as a real); NaN and infinities, which JSON cannot hold, become `null`.
    public mutating func double(_ value: Double) {
        guard value.isFinite else { return null() }
        separator()
        // Swift's shortest round-trip printer; short results stay in a small String,
        // so this does not allocate.
        var text = value.description
        text.withUTF8 { bytes.append(contentsOf: $0) }
        needsComma = true
    }

    /// Writes `true` or `false`.
    public mutating func bool(_ value: Bool) {
        separator()
        if value {
            bytes.append(contentsOf: [UInt8(ascii: "t"), UInt8(ascii: "r"), UInt8(ascii: "u"), UInt8(ascii: "e")])
        } else {
            bytes.append(contentsOf: [UInt8(ascii: "f"), UInt8(ascii: "a"), UInt8(ascii: "l"), UInt8(ascii: "s"), UInt8(ascii: "e")])
        }
        needsComma = true
    }

    /// Writes `null`.
    public mutating func null() {
        separator()
        bytes.append(contentsOf: [UInt8(ascii: "n"), UInt8(ascii: "u"), UInt8(ascii: "l"), UInt8(ascii: "l")])
        needsComma = true
    }

    /// Writes one pre-serialised JSON value as is. It must be valid compact JSON (a raw
    /// line feed in it would break the line framing).
    public mutating func raw(_ json: [UInt8]) {
        separator()
        bytes.append(contentsOf: json)
        needsComma = true
    }

    /// Writes one pre-serialised JSON value as is (see `raw(_:)`).
    public mutating func raw(_ json: UnsafeRawBufferPointer) {
        separator()
        bytes.append(contentsOf: json)
        needsComma = true
    }

    /// Writes a parsed value in compact form.
    public mutating func value(_ json: JSONValue) {
        raw(json.serializedCompact())
    }

    // MARK: Helpers

    @usableFromInline mutating func appendQuoted(_ text: String) {
        if let done: Void = text.utf8.withContiguousStorageIfAvailable({ appendQuoted(UnsafeRawBufferPointer($0)) }) {
            return done
        }
        var copy = text
        copy.withUTF8 { appendQuoted(UnsafeRawBufferPointer($0)) }
    }

    /// Appends `"`, the escaped bytes, `"`. Runs of bytes needing no escape are copied in
    /// one call.
    @usableFromInline mutating func appendQuoted(_ utf8: UnsafeRawBufferPointer) {
        bytes.reserveCapacity(bytes.count + utf8.count + 2)
        bytes.append(UInt8(ascii: "\""))
        var runStart = 0
        var i = 0
        let n = utf8.count
        while i < n {
            let b = utf8[i]
            if b >= 0x20 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") {
                i += 1
                continue
            }
            if runStart < i { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: utf8[runStart..<i])) }
            appendEscape(b)
            i += 1
            runStart = i
        }
        if runStart < n { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: utf8[runStart..<n])) }
        bytes.append(UInt8(ascii: "\""))
    }

    @usableFromInline mutating func appendEscape(_ b: UInt8) {
        let short: UInt8
        switch b {
        case UInt8(ascii: "\""): short = UInt8(ascii: "\"")
        case UInt8(ascii: "\\"): short = UInt8(ascii: "\\")
        case 0x0A: short = UInt8(ascii: "n")
        case 0x0D: short = UInt8(ascii: "r")
        case 0x09: short = UInt8(ascii: "t")
        case 0x08: short = UInt8(ascii: "b")
        case 0x0C: short = UInt8(ascii: "f")
        default:
            let hex: [UInt8] = Array("0123456789abcdef".utf8)
            bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                      hex[Int(b >> 4)], hex[Int(b & 0xF)]])
            return
        }
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(short)
    }

    @usableFromInline mutating func appendDecimal(_ value: Int64) {
        if value == 0 { bytes.append(UInt8(ascii: "0")); return }
        // Work on the magnitude as UInt64 so Int64.min does not overflow.
        var magnitude = value.magnitude
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        let start = bytes.count
        while magnitude > 0 {
            bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10))
            magnitude /= 10
        }
        bytes[start...].reverse()
    }
}

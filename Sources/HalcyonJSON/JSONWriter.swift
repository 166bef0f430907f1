// A direct writer of compact JSON into a byte buffer: the fast path for replies.
// jansson builds a tree and serialises it; for the few fixed reply shapes the daemon
// sends, appending bytes straight into one reserved buffer is cheaper: no node is
// allocated, and nothing is walked twice.

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
    public var depth: Int { openContainers }
    @usableFromInline var openContainers = 0

    /// Creates an empty writer, reserving `capacity` bytes.
    @inlinable public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// A point to come back to with `rollback(to:)`.
    public struct Mark: Sendable, Equatable {
        @usableFromInline let count: Int
        @usableFromInline let needsComma: Bool
        @usableFromInline let depth: Int
        @usableFromInline init(count: Int, needsComma: Bool, depth: Int) {
            self.count = count
            self.needsComma = needsComma
            self.depth = depth
        }
    }

    /// Remembers the current end of the output.
    public var mark: Mark { Mark(count: bytes.count, needsComma: needsComma, depth: openContainers) }

    /// Forgets everything written after `mark`, so a half-written element can be replaced.
    @inlinable public mutating func rollback(to mark: Mark) {
        bytes.removeSubrange(mark.count...)
        needsComma = mark.needsComma
        openContainers = mark.depth
    }

    /// Empties the writer, keeping its capacity, for reuse.
    @inlinable public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        needsComma = false
        openContainers = 0
    }

    @inlinable mutating func separator() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    // MARK: Structure

    @inlinable public mutating func beginObject() {
        separator()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        openContainers += 1
    }

    @inlinable public mutating func endObject() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
        openContainers -= 1
    }

    @inlinable public mutating func beginArray() {
        separator()
        bytes.append(UInt8(ascii: "["))
        needsComma = false
        openContainers += 1
    }

    @inlinable public mutating func endArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
        openContainers -= 1
    }

    /// Ends a top-level line with `\n`; the next value starts a new line without a comma.
    @inlinable public mutating func newline() {
        bytes.append(UInt8(ascii: "\n"))
        needsComma = false
    }

    /// Appends the whole lines another writer holds (both between lines: each line ends
    /// with its `\n`).
    @inlinable public mutating func appendLines(of other: JSONWriter) {
        bytes.append(contentsOf: other.bytes)
        needsComma = false
    }

    // MARK: Keys

    /// Writes a member name known at compile time: copied as it is, between quotes, so it
    /// must need no escape (the protocol's names are ASCII identifiers; checked in debug
    /// builds).
    @inlinable public mutating func key(_ name: StaticString) {
        name.withUTF8Buffer { appendPlainQuoted($0, colon: true) }
        needsComma = false
    }

    /// Writes a member name.
    @inlinable public mutating func key(_ name: String) {
        separator()
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    // MARK: Values

    /// Writes a string.
    @inlinable public mutating func string(_ value: String) {
        separator()
        appendQuoted(value)
        needsComma = true
    }

    /// Writes a string known at compile time that needs no escape (the protocol's fixed
    /// values: encodings, tiers, `"2.0"`; checked in debug builds).
    @inlinable public mutating func string(static value: StaticString) {
        value.withUTF8Buffer { appendPlainQuoted($0, colon: false) }
        needsComma = true
    }

    /// Writes a string whose UTF-8 bytes are given. The bytes must be valid UTF-8.
    @inlinable public mutating func string(utf8Bytes value: UnsafeRawBufferPointer) {
        separator()
        appendQuoted(value)
        needsComma = true
    }

    /// Writes a string whose UTF-8 bytes are given. The bytes must be valid UTF-8.
    @inlinable public mutating func string(utf8Bytes value: [UInt8]) {
        value.withUnsafeBytes { string(utf8Bytes: $0) }
    }

    /// Writes a string whose bytes `isPlainASCII` accepts, as they are: one copy, with no
    /// scan for escapes.
    @inlinable public mutating func string(plainASCII value: [UInt8]) {
        assert(value.withUnsafeBytes(JSONWriter.isPlainASCII), "a plain string needing an escape")
        separator()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: value)
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    /// Writes an integer.
    @inlinable public mutating func int(_ value: Int64) {
        separator()
        appendDecimal(value)
        needsComma = true
    }

    /// Writes an integer.
    @inlinable public mutating func int(_ value: Int) { int(Int64(value)) }

    /// Writes a finite double in its shortest form that reads back to the same value
    /// (Swift's `description`, which always shows a `.` or an exponent, so it reads back
    /// as a real); NaN and infinities, which JSON cannot hold, become `null`.
    @inlinable public mutating func double(_ value: Double) {
        guard value.isFinite else { return null() }
        separator()
        // Swift's shortest round-trip printer; short results stay in a small String,
        // so this does not allocate.
        var text = value.description
        text.withUTF8 { bytes.append(contentsOf: $0) }
        needsComma = true
    }

    /// Writes `true` or `false`.
    @inlinable public mutating func bool(_ value: Bool) {
        separator()
        appendASCII(value ? "true" : "false")
        needsComma = true
    }

    /// Writes `null`.
    @inlinable public mutating func null() {
        separator()
        appendASCII("null")
        needsComma = true
    }

    /// Writes one pre-serialised JSON value as is. It must be valid compact JSON (a raw
    /// line feed in it would break the line framing).
    @inlinable public mutating func raw(_ json: [UInt8]) {
        separator()
        bytes.append(contentsOf: json)
        needsComma = true
    }

    /// Writes one pre-serialised JSON value as is (see `raw(_:)`).
    @inlinable public mutating func raw(_ json: UnsafeRawBufferPointer) {
        separator()
        bytes.append(contentsOf: json)
        needsComma = true
    }

    /// Writes a parsed value in compact form.
    @inlinable public mutating func value(_ json: JSONValue) {
        raw(json.serializedCompact())
    }

    // MARK: Helpers

    @inlinable mutating func appendQuoted(_ text: String) {
        if let done: Void = text.utf8.withContiguousStorageIfAvailable({ appendQuoted(UnsafeRawBufferPointer($0)) }) {
            return done
        }
        var copy = text
        copy.withUTF8 { appendQuoted(UnsafeRawBufferPointer($0)) }
    }

    /// Appends the separator if one is due, then `"`, `text`, `"` and, with `colon`, `:`,
    /// in one copy through a stack buffer: every `Array.append` checks uniqueness through
    /// the runtime, and a reply's fixed names and values made most of its appends.
    /// `text` must need no escape (checked in debug builds).
    @inlinable mutating func appendPlainQuoted(_ text: UnsafeBufferPointer<UInt8>, colon: Bool) {
        assert(text.allSatisfy { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") },
               "a fixed name or value needing an escape")
        let comma = needsComma
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: text.count &+ 4) { out in
            var at = 0
            if comma { out[0] = UInt8(ascii: ","); at = 1 }
            out[at] = UInt8(ascii: "\"")
            at &+= 1
            if let base = text.baseAddress, let to = out.baseAddress {
                (to + at).update(from: base, count: text.count)
            }
            at &+= text.count
            out[at] = UInt8(ascii: "\"")
            at &+= 1
            if colon {
                out[at] = UInt8(ascii: ":")
                at &+= 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: out[..<at]))
        }
    }

    /// Appends `"`, the escaped bytes, `"`. Runs of bytes needing no escape are copied in
    /// one call.
    @inlinable mutating func appendQuoted(_ raw: UnsafeRawBufferPointer) {
        bytes.append(UInt8(ascii: "\""))
        // Typed view: Array's contiguous fast path (one memcpy per run) needs
        // UnsafeBufferPointer<UInt8>, not the raw buffer.
        let utf8 = UnsafeBufferPointer(start: raw.baseAddress?.assumingMemoryBound(to: UInt8.self), count: raw.count)
        var runStart = 0
        var i = 0
        let n = utf8.count
        while i < n {
            // Eight bytes at a time while none of them needs an escape.
            if i &+ 8 <= n, let base = raw.baseAddress,
               !JSONWriter.wordNeedsEscape(base.loadUnaligned(fromByteOffset: i, as: UInt64.self)) {
                i &+= 8
                continue
            }
            let b = utf8[i]
            if b >= 0x20 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\") {
                i += 1
                continue
            }
            if runStart < i { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i])) }
            appendEscape(b)
            i += 1
            runStart = i
        }
        if runStart < n { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<n])) }
        bytes.append(UInt8(ascii: "\""))
    }

    /// True when one of the eight bytes of `word` may be below 0x20, `"` or `\`
    /// (classic SWAR zero-byte tests; a false positive only sends the caller to the
    /// byte-wise check, never a false negative).
    @inlinable static func wordNeedsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let control = (word &- ones &* 0x20) & ~word & highs
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let hasQuote = (quote &- ones) & ~quote & highs
        let hasBackslash = (backslash &- ones) & ~backslash & highs
        return (control | hasQuote | hasBackslash) != 0
    }

    @inlinable mutating func appendEscape(_ b: UInt8) {
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
            // Only bytes below 0x20 get here, so the high digit is 0 or 1.
            appendASCII("\\u00")
            bytes.append(UInt8(ascii: "0") &+ (b >> 4))
            let low = b & 0xF
            bytes.append(low < 10 ? UInt8(ascii: "0") &+ low : UInt8(ascii: "a") &+ (low &- 10))
            return
        }
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(short)
    }

    @inlinable mutating func appendASCII(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    @inlinable mutating func appendDecimal(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        // Digits right to left into a stack buffer, then one append: reversing them in
        // place through `bytes[start...]` cost a retain and a uniqueness check per number.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            guard let base = digits.baseAddress else { return }
            let end = base + 20
            let first = JSONWriter.writeDigits(value.magnitude, endingAt: end)
            bytes.append(contentsOf: UnsafeBufferPointer(start: first, count: end - first))
        }
    }

    /// Writes the decimal digits of `magnitude` right to left, ending just before `end`
    /// (two digits per division, from `digitPairs`), and returns where they start: at least
    /// one digit, at most 20. On the magnitude, as a UInt64, so that Int64.min does not
    /// overflow.
    ///
    /// Why two at a time: every reply carries a version of 16 digits, and one dependent
    /// division per digit made the digits a visible share of a memory hit's reply.
    @inlinable static func writeDigits(_ magnitude: UInt64, endingAt end: UnsafeMutablePointer<UInt8>)
        -> UnsafeMutablePointer<UInt8>
    {
        let pairs = digitPairs.utf8Start
        var rest = magnitude
        var first = end
        while rest >= 100 {
            let pair = Int(truncatingIfNeeded: rest % 100) &* 2
            rest /= 100
            first -= 2
            first[0] = pairs[pair]
            first[1] = pairs[pair &+ 1]
        }
        if rest >= 10 {
            let pair = Int(truncatingIfNeeded: rest) &* 2
            first -= 2
            first[0] = pairs[pair]
            first[1] = pairs[pair &+ 1]
        } else {
            first -= 1
            first.pointee = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest)
        }
        return first
    }

    /// "00" to "99", each two-digit number at twice its value.
    @inlinable static var digitPairs: StaticString {
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
    }
}

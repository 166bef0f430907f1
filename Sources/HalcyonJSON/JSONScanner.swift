// A hand-written scanner for the plain request lines that make up almost all traffic
// (`{"jsonrpc":"2.0","id":7,"method":"get","params":{"key":"k"}}`), beside jansson, the
// parser of record. jansson lexes a byte at a time and builds a tree of allocated nodes;
// this one skips a plain string eight bytes at a time and records the values in a flat
// table (`FlatJSON`): two allocations in all (Benchmarks/RESULTS.md, "The hot-path scanner
// against jansson").

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Scans one JSON text of the hot subset into a flat document that reads as the tree
/// `json_loadb` would build from it, or says why the text is left to jansson.
///
/// The subset: one object, optionally surrounded by JSON whitespace, whose members are
/// strings without escapes (valid UTF-8, no control characters), integers in plain form
/// with at most 18 digits (no `-0`), `true`, `false`, `null`, or objects of the same kind
/// nested at most `maxDepth` deep (the request, its params, an option object such as
/// `{"seconds": 5}`). That is the shape of `ping`, `get`, `set`, `touch`, `remove`,
/// `incr`, `add` and `cas` as clients send them. Everything else is deferred: arrays
/// (batches, `getMany`), escapes, fractions and exponents, duplicate member names,
/// invalid UTF-8, malformed text. A deferred line is parsed by jansson, so what a request
/// means never depends on which of the two read it; the differential fuzz target
/// (`ScannerFuzzer`) checks that every scanned document reads as jansson's tree, member
/// order and lookups by name included.
///
/// Threading: pure; any thread.
public enum JSONScanner {
    /// What one scan came to.
    public enum Outcome {
        /// The text is in the subset; the document reads as jansson's tree would.
        case parsed(FlatJSON)
        /// The text is left to jansson, for this reason.
        case deferred(Deferral)
    }

    /// Why a text is left to jansson. Each is a shape the scanner does not take, not an
    /// error: jansson decides whether the text is valid JSON.
    public enum Deferral: Sendable, Equatable {
        /// The text is not one object (an array or batch, a scalar, nothing).
        case notAnObject
        /// A string holds a backslash escape.
        case escape
        /// A string holds a byte below U+0020 (jansson refuses those unescaped).
        case controlCharacter
        /// A string is not valid UTF-8.
        case invalidUTF8
        /// A number with a fraction, an exponent, a leading zero, `-0`, or more than 18 digits.
        case unusualNumber
        /// An object holds the same member name twice (jansson is told to refuse that).
        case duplicateMember
        /// An array anywhere, or objects nested deeper than `maxDepth`.
        case nesting
        /// More than `maxNodes` values in all (no request of the subset has that many).
        case tooManyValues
        /// Bytes after the object other than whitespace.
        case trailingBytes
        /// Anything else that is not in the subset: truncated text, a stray byte, a bad literal.
        case malformed
    }

    /// How deep objects may nest: the request, its params, one option object.
    public static let maxDepth = 3

    /// The most values one text may hold, objects and members together.
    public static let maxNodes = 48

    /// Scans `bytes` (one line without its line end).
    public static func scan(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        guard let base = bytes.baseAddress else { return .deferred(.notAnObject) }
        // The table keeps offsets in 32 bits; a request line never comes near 2 GiB.
        guard bytes.count < Int(Int32.max) else { return .deferred(.malformed) }
        return withUnsafeTemporaryAllocation(of: FlatJSON.Node.self, capacity: maxNodes) { table in
            var cursor = Cursor(base: base.assumingMemoryBound(to: UInt8.self), end: bytes.count,
                                table: table.baseAddress!)
            cursor.skipWhitespace()
            guard cursor.peek == UInt8(ascii: "{") else { return .deferred(.notAnObject) }
            guard cursor.object(depth: 1) else { return .deferred(cursor.deferral) }
            cursor.skipWhitespace()
            guard cursor.index == cursor.end else { return .deferred(.trailingBytes) }
            return .parsed(FlatJSON.make(nodes: UnsafeBufferPointer(start: table.baseAddress, count: cursor.nodeCount),
                                         text: bytes))
        }
    }

    /// A position in the text and the reason for the first deferral met.
    ///
    /// Threading: a local value of one scan.
    struct Cursor {
        let base: UnsafePointer<UInt8>
        let end: Int
        var index = 0
        var deferral = Deferral.malformed
        /// The node table being filled, `maxNodes` long; `nodeCount` of it is written.
        let table: UnsafeMutablePointer<FlatJSON.Node>
        var nodeCount = 0

        init(base: UnsafePointer<UInt8>, end: Int, table: UnsafeMutablePointer<FlatJSON.Node>) {
            self.base = base
            self.end = end
            self.table = table
        }

        /// The byte at the cursor, or 0 at the end (0 is never valid JSON outside a string).
        var peek: UInt8 { index < end ? base[index] : 0 }

        mutating func skipWhitespace() {
            while index < end {
                switch base[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        /// Notes why the scan stops and yields nil, for the caller to propagate.
        mutating func stop<T>(_ reason: Deferral) -> T? {
            deferral = reason
            return nil
        }

        /// Notes why the scan stops and yields false.
        mutating func refuse(_ reason: Deferral) -> Bool {
            deferral = reason
            return false
        }

        /// Appends a node for the value starting at the cursor; its index, or nil when the
        /// table is full.
        mutating func append(_ kind: FlatJSON.Node.Kind, start: Int, count: Int) -> Int? {
            guard nodeCount < JSONScanner.maxNodes else { return stop(.tooManyValues) }
            let slot = nodeCount
            (table + slot).initialize(to: .init(kind: kind, start: start, count: count, next: slot + 1))
            nodeCount += 1
            return slot
        }

        /// Scans an object whose `{` is at the cursor into the table; false when deferred.
        mutating func object(depth: Int) -> Bool {
            guard depth <= JSONScanner.maxDepth else { return refuse(.nesting) }
            let opening = index
            guard let slot = append(.object, start: opening, count: 0) else { return false }
            index += 1
            skipWhitespace()
            var members: Int32 = 0
            if peek != UInt8(ascii: "}") {
                while true {
                    guard peek == UInt8(ascii: "\"") else { return refuse(.malformed) }
                    guard let name = stringSpan() else { return false }
                    // jansson is told to refuse a name given twice; a request object has a
                    // handful of members, so comparing with the earlier ones is cheap.
                    if isDuplicate(name, inObjectAt: slot) { return refuse(.duplicateMember) }
                    skipWhitespace()
                    guard peek == UInt8(ascii: ":") else { return refuse(.malformed) }
                    index += 1
                    skipWhitespace()
                    let member = nodeCount
                    guard value(depth: depth) else { return false }
                    table[member].nameStart = Int32(name.lowerBound)
                    table[member].nameCount = Int32(name.count)
                    members += 1
                    skipWhitespace()
                    if peek == UInt8(ascii: ",") {
                        index += 1
                        skipWhitespace()
                        continue
                    }
                    guard peek == UInt8(ascii: "}") else { return refuse(.malformed) }
                    break
                }
            }
            index += 1
            table[slot].count = Int32(index - opening)
            table[slot].next = Int32(nodeCount)
            table[slot].members = members
            return true
        }

        /// Whether an earlier member of the object at `slot` is named `name`.
        func isDuplicate(_ name: Range<Int>, inObjectAt slot: Int) -> Bool {
            var member = slot + 1
            while member < nodeCount {
                let node = table[member]
                if Int(node.nameCount) == name.count,
                   memcmp(base + Int(node.nameStart), base + name.lowerBound, name.count) == 0 {
                    return true
                }
                member = Int(node.next)
            }
            return false
        }

        /// Scans one value at the cursor into the table; false when deferred.
        mutating func value(depth: Int) -> Bool {
            let start = index
            switch peek {
            case UInt8(ascii: "\""):
                guard let span = stringSpan() else { return false }
                return append(.string, start: span.lowerBound, count: span.count) != nil
            case UInt8(ascii: "{"):
                return object(depth: depth + 1)
            case UInt8(ascii: "["):
                return refuse(.nesting)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                guard let number = integer(), let slot = append(.integer, start: start, count: index - start) else {
                    return false
                }
                table[slot].integer = number
                return true
            case UInt8(ascii: "t"):
                guard literal("true") else { return refuse(.malformed) }
                return append(.true, start: start, count: 4) != nil
            case UInt8(ascii: "f"):
                guard literal("false") else { return refuse(.malformed) }
                return append(.false, start: start, count: 5) != nil
            case UInt8(ascii: "n"):
                guard literal("null") else { return refuse(.malformed) }
                return append(.null, start: start, count: 4) != nil
            default:
                return refuse(.malformed)
            }
        }

        /// Consumes `word` when the text holds it at the cursor.
        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard end - index >= count else { return false }
            for offset in 0..<count where base[index + offset] != word.utf8Start[offset] {
                return false
            }
            index += count
            return true
        }

        /// Scans a plain integer: `-?(0|[1-9][0-9]{0,17})` not followed by `.`, `e` or `E`.
        mutating func integer() -> Int64? {
            var negative = false
            if peek == UInt8(ascii: "-") {
                negative = true
                index += 1
            }
            let first = index
            var magnitude: Int64 = 0
            while index < end {
                let digit = base[index] &- UInt8(ascii: "0")
                guard digit < 10 else { break }
                magnitude = magnitude &* 10 &+ Int64(digit)
                index += 1
            }
            let digits = index - first
            guard digits > 0 else { return stop(.malformed) }
            // A leading zero (jansson refuses `01`), `-0` (kept apart so the scanner never
            // has to know how jansson signs a zero), and 19 digits or more (which may
            // overflow, where jansson fails) all go to jansson.
            if base[first] == UInt8(ascii: "0") && (digits > 1 || negative) { return stop(.unusualNumber) }
            guard digits <= 18 else { return stop(.unusualNumber) }
            switch peek {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return stop(.unusualNumber)
            default: break
            }
            return negative ? -magnitude : magnitude
        }

        /// Scans a string whose `"` is at the cursor and returns the span of its contents;
        /// nil (deferred) for an escape, a control character, invalid UTF-8 or no end.
        mutating func stringSpan() -> Range<Int>? {
            index += 1
            let start = index
            var sawNonASCII = false
            while true {
                // Eight bytes at a time while none is `"`, `\`, below 0x20 or above 0x7F.
                while index + 8 <= end {
                    let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                    if Self.needsAttention(word) { break }
                    index += 8
                }
                let stopAt = min(index + 8, end)
                guard index < stopAt else { return stop(.malformed) }
                while index < stopAt {
                    let byte = base[index]
                    switch byte {
                    case UInt8(ascii: "\""):
                        let span = start..<index
                        index += 1
                        if sawNonASCII,
                           !isValidUTF8(UnsafeRawBufferPointer(start: base + span.lowerBound, count: span.count)) {
                            return stop(.invalidUTF8)
                        }
                        return span
                    case UInt8(ascii: "\\"):
                        return stop(.escape)
                    case 0..<0x20:
                        return stop(.controlCharacter)
                    case 0x80...:
                        sawNonASCII = true
                    default:
                        break
                    }
                    index += 1
                }
            }
        }

        private static let ones: UInt64 = 0x0101_0101_0101_0101
        private static let highs: UInt64 = 0x8080_8080_8080_8080

        /// True when some byte of `word` is `"`, `\`, below 0x20 or above 0x7F (exact as a
        /// yes or no for the whole word; the byte loop finds which).
        @inline(__always)
        static func needsAttention(_ word: UInt64) -> Bool {
            @inline(__always) func hasZeroByte(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
            let below0x20 = (word &- ones &* 0x20) & ~word & highs
            let quote = hasZeroByte(word ^ (ones &* 0x22))
            let backslash = hasZeroByte(word ^ (ones &* 0x5C))
            return (word & highs) | below0x20 | quote | backslash != 0
        }
    }
}

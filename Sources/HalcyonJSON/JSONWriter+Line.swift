// A whole line of a fixed shape written in one append. The writer's own calls pay for an
// `Array.append` each (a uniqueness check through the runtime, a capacity check, a generic
// copy); a reply of fifteen pieces paid for fifteen of them. A line composed here goes into
// a stack buffer with plain stores, and into the output with one append.

import CHalcyonSystem

extension JSONWriter {
    /// Plain stores into a buffer the caller sized for everything it writes.
    ///
    /// Threading: a value on one thread's stack, inside `appendLine`.
    public struct LineComposer {
        @usableFromInline let base: UnsafeMutablePointer<UInt8>
        @usableFromInline let capacity: Int
        /// Bytes written so far.
        @usableFromInline var count = 0

        @inlinable init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
            self.base = base
            self.capacity = capacity
        }

        /// Bytes still free in the buffer.
        @inlinable public var room: Int { capacity &- count }

        @inlinable public mutating func put(_ byte: UInt8) {
            precondition(count < capacity, "a composed line outgrew its bound")
            base[count] = byte
            count &+= 1
        }

        /// Copies bytes known at compile time (the line's fixed parts).
        @inlinable public mutating func put(_ text: StaticString) {
            text.withUTF8Buffer { put(UnsafeRawBufferPointer($0)) }
        }

        @inlinable public mutating func put(_ bytes: UnsafeRawBufferPointer) {
            precondition(bytes.count <= room, "a composed line outgrew its bound")
            if let from = bytes.baseAddress, !bytes.isEmpty {
                (base + count).update(from: from.assumingMemoryBound(to: UInt8.self), count: bytes.count)
            }
            count &+= bytes.count
        }

        /// An integer in decimal, as `JSONWriter.int` writes it.
        @inlinable public mutating func putDecimal(_ value: Int64) {
            precondition(room >= 20, "a composed line outgrew its bound")
            if value < 0 { put(UInt8(ascii: "-")) }
            // Right to left into the end of the room, then moved to the front.
            let end = base + capacity
            let first = JSONWriter.writeDigits(value.magnitude, endingAt: end)
            let digits = end - first
            precondition(digits <= room, "a composed line outgrew its bound")
            // The two ranges may overlap when the line nearly fills its bound: memmove's rule.
            UnsafeMutableRawPointer(base + count).copyMemory(from: first, byteCount: digits)
            count &+= digits
        }

        /// Copies `bytes` between quotes when every one of them is ASCII needing no escape,
        /// as `JSONWriter.string(utf8Bytes:)` would write them then; otherwise writes
        /// nothing and returns false.
        @inlinable public mutating func putPlainQuoted(_ bytes: UnsafeRawBufferPointer) -> Bool {
            guard JSONWriter.isPlainASCII(bytes), bytes.count &+ 2 <= room else { return false }
            put(UInt8(ascii: "\""))
            put(bytes)
            put(UInt8(ascii: "\""))
            return true
        }
    }

    /// Appends one whole line that `body` composes in at most `capacity` bytes (its `\n`
    /// included), with one append. `body` returns false, having found that it cannot write
    /// the line this way, to leave the output as it was; this returns what it returned.
    /// Only between lines (`depth` 0), as `newline()` leaves the writer.
    @inlinable public mutating func appendLine(upTo capacity: Int, _ body: (inout LineComposer) -> Bool) -> Bool {
        precondition(openContainers == 0, "a composed line starts between lines")
        guard appendComposed(upTo: capacity, body) else { return false }
        needsComma = false
        return true
    }

    /// Opens an object whose first bytes `body` composes in at most `capacity` bytes, with
    /// one append: `body` writes the `{`, then whole members, and may end after a member
    /// name's `:` so that the next call writes that member's value. Afterwards the writer
    /// is inside the object as `beginObject` and the members' own calls would leave it.
    /// Anywhere a value may start (a comma first when one is due).
    @inlinable public mutating func beginObject(upTo capacity: Int, composing body: (inout LineComposer) -> Void) {
        separator()
        _ = appendComposed(upTo: capacity) { line in
            body(&line)
            return true
        }
        needsComma = false
        openContainers += 1
    }

    /// The one composing append: `body` writes into a stack buffer of `capacity` bytes,
    /// which goes into the output at once unless `body` returns false (then nothing does).
    @inlinable mutating func appendComposed(upTo capacity: Int, _ body: (inout LineComposer) -> Bool) -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            var line = LineComposer(base: base, capacity: capacity)
            guard body(&line) else { return false }
            bytes.append(contentsOf: UnsafeBufferPointer(start: base, count: line.count))
            return true
        }
    }

    /// True when every byte is ASCII and none needs an escape in a JSON string: such
    /// bytes are valid UTF-8 and are written as they are. A vector scan in C
    /// (`hc_json_plain_ascii`), which Swift's SIMD types did not compile to here
    /// (Benchmarks/RESULTS.md, "The plain-string scan").
    @inlinable public static func isPlainASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        return hc_json_plain_ascii(base, bytes.count) != 0
    }
}

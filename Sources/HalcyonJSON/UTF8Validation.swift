// UTF-8 validation without building a String: used to decide whether stored bytes can
// be shown as a `"utf8"` value (-32004 otherwise) and before writing bytes as a string.

/// True when `bytes` is well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates
/// (U+D800...U+DFFF), nothing above U+10FFFF, no truncated sequence.
///
/// Threading: pure; any thread.
public func isValidUTF8(_ bytes: some Collection<UInt8>) -> Bool {
    if let result = bytes.withContiguousStorageIfAvailable({ isValidUTF8(UnsafeRawBufferPointer($0)) }) {
        return result
    }
    return Array(bytes).withUnsafeBytes { isValidUTF8($0) }
}

/// True when `bytes` is well-formed UTF-8; see `isValidUTF8(_:)`. The overload the reply
/// path takes: a generic call from another module goes through the collection's witness
/// table on every read.
public func isValidUTF8(_ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { isValidUTF8($0) }
}

/// True when the bytes are well-formed UTF-8; see `isValidUTF8(_:)`.
public func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let n = bytes.count
    guard let base = bytes.baseAddress else { return true }
    var i = 0
    while i < n {
        // ASCII fast path: eight bytes at a time while none has its top bit set.
        while i + 8 <= n {
            let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            if word & 0x8080_8080_8080_8080 != 0 { break }
            i += 8
        }
        if i >= n { break }
        let b0 = bytes[i]
        if b0 < 0x80 { i += 1; continue }
        @inline(__always) func cont(_ k: Int) -> Bool { i + k < n && bytes[i + k] & 0xC0 == 0x80 }
        switch b0 {
        case 0xC2...0xDF:
            guard cont(1) else { return false }
            i += 2
        case 0xE0...0xEF:
            guard cont(1), cont(2) else { return false }
            let b1 = bytes[i + 1]
            if b0 == 0xE0 && b1 < 0xA0 { return false } // overlong
            if b0 == 0xED && b1 > 0x9F { return false } // surrogate
            i += 3
        case 0xF0...0xF4:
            guard cont(1), cont(2), cont(3) else { return false }
            let b1 = bytes[i + 1]
            if b0 == 0xF0 && b1 < 0x90 { return false } // overlong
            if b0 == 0xF4 && b1 > 0x8F { return false } // above U+10FFFF
            i += 4
        default:
            return false
        }
    }
    return true
}

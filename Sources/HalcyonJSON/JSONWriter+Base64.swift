// Base64 inside JSON strings, and strict decoding of the strings clients send.
// Both go through swift-extras-base64, which works on byte arrays directly and is faster
// than Foundation's `Data` API (Benchmarks/RESULTS.md, "Base64").

import ExtrasBase64

extension JSONWriter {
    /// Writes `data` as a JSON string of standard base64 (with padding), encoded
    /// straight into the output buffer.
    public mutating func base64(_ data: UnsafeRawBufferPointer) {
        separator()
        let encodedCount = Base64.encodedLength(bytesCount: data.count)
        bytes.reserveCapacity(bytes.count + encodedCount + 2)
        bytes.append(UInt8(ascii: "\""))
        if encodedCount > 0 {
            let start = bytes.count
            bytes.append(contentsOf: repeatElement(0, count: encodedCount))
            bytes.withUnsafeMutableBufferPointer { out in
                let target = UnsafeMutableBufferPointer(rebasing: out[start..<(start + encodedCount)])
                data.withMemoryRebound(to: UInt8.self) { input in
                    var outSpan = target.mutableSpan
                    _ = Base64.encode(bytes: input.span, into: &outSpan)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
        needsComma = true
    }

    /// Writes `data` as a JSON string of standard base64 (with padding).
    public mutating func base64(_ data: [UInt8]) {
        data.withUnsafeBytes { base64($0) }
    }
}

/// Strict standard base64 (RFC 4648 §4): the `+/` alphabet, padding required, no
/// whitespace or line breaks, and the unused bits of the last symbol zero, so every
/// byte string has exactly one accepted spelling.
///
/// Threading: stateless; any thread.
public enum StrictBase64 {
    /// Standard base64 of `bytes`, with padding.
    public static func encode(_ bytes: some Collection<UInt8>) -> [UInt8] {
        Base64.encodeToBytes(bytes: bytes)
    }

    /// Standard base64 of `bytes` as a String.
    public static func encodeToString(_ bytes: some Collection<UInt8>) -> String {
        Base64.encodeToString(bytes: bytes)
    }

    /// The bytes `text` encodes; nil when it is not strict standard base64.
    public static func decode(_ text: UnsafeRawBufferPointer) -> [UInt8]? {
        let n = text.count
        guard n % 4 == 0 else { return nil }
        if n == 0 { return [] }
        // The decoder accepts non-zero bits after the last full byte; a canonical
        // encoder never writes them, and accepting them would give one value two spellings.
        let pad = (text[n - 1] == UInt8(ascii: "=") ? 1 : 0) + (text[n - 2] == UInt8(ascii: "=") ? 1 : 0)
        if pad > 0 {
            guard let last = sextet(text[n - 1 - pad]) else { return nil }
            let unusedMask: UInt8 = pad == 2 ? 0x0F : 0x03
            guard last & unusedMask == 0 else { return nil }
        }
        return try? Base64.decode(bytes: text.bindMemory(to: UInt8.self))
    }

    /// The bytes `text` encodes; nil when it is not strict standard base64.
    public static func decode(_ text: [UInt8]) -> [UInt8]? {
        text.withUnsafeBytes { decode($0) }
    }

    /// The bytes `text` encodes; nil when it is not strict standard base64.
    public static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode(UnsafeRawBufferPointer($0)) }
    }

    private static func sextet(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}

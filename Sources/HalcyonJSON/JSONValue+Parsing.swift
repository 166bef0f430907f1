// Parsing bytes into a JSONValue with the flags the protocol relies on.

import CJansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension JSONValue {
    /// jansson flags for every parse: any value at top level, NUL allowed inside strings,
    /// duplicate member names rejected. The EOF check stays on, so trailing bytes after
    /// the value (other than whitespace) are an error.
    static let parseFlags = Int(JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)

    /// Parses one JSON text.
    ///
    /// Threading: any thread; jansson's decoder keeps no global state.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<JSONValue, JSONParseError> {
        // jansson's lexer takes a raw NUL byte for the end of input and would accept
        // `{}\0garbage`. A raw NUL can never be part of a JSON text (inside strings it
        // must be escaped), so refuse it before jansson sees it.
        if let base = bytes.baseAddress, let nul = memchr(base, 0, bytes.count) {
            let position = base.distance(to: UnsafeRawPointer(nul))
            return .failure(JSONParseError(reason: .invalidJSON, message: "NUL byte in input", position: position))
        }
        var error = json_error_t()
        let base = bytes.baseAddress?.assumingMemoryBound(to: CChar.self)
        // jansson wants a non-NULL buffer even for zero bytes.
        let parsed: UnsafeMutablePointer<json_t>? = withUnsafePointer(to: CChar(0)) { empty in
            json_loadb(base ?? empty, bytes.count, parseFlags, &error)
        }
        guard let parsed else { return .failure(JSONParseError(&error)) }
        return .success(JSONValue(owning: parsed))
    }

    /// Parses one JSON text held in an array.
    public static func parse(_ bytes: [UInt8]) -> Result<JSONValue, JSONParseError> {
        bytes.withUnsafeBytes { parse($0) }
    }

    /// Parses one JSON text given as a String.
    public static func parse(_ text: String) -> Result<JSONValue, JSONParseError> {
        var text = text
        return text.withUTF8 { parse(UnsafeRawBufferPointer($0)) }
    }
}

// The quoting rule of `halcyon loop`'s lines: how a command line splits into words, and
// how a reply carries any bytes on one line of UTF-8 text.

import HalcyonJSON

/// Splitting a request line into words and escaping a reply's bytes.
///
/// The rule, one for both directions (Docs/CLI.md, "Many commands, one process"):
/// - A request line is words separated by spaces or tabs; a final CR is dropped.
/// - In a word, `\\` is a backslash, `\n` a line feed, `\r` a carriage return, `\t` a
///   tab, `\xHH` the byte HH (two hex digits; `\x20` is a space). Every other byte stands
///   for itself, including bytes that are not UTF-8. A word that is exactly `""` is the
///   empty word.
/// - A reply writes backslash, line feed, carriage return and tab the same way, and every
///   other control byte, DEL and every byte that is not part of valid UTF-8 as `\xHH`:
///   a reply line is always valid UTF-8 text. bash's `printf '%b'` turns it back into
///   the exact bytes.
///
/// Threading: stateless; any thread.
enum LineEscaping {
    /// Why a request line could not be split.
    struct SyntaxError: Error {
        let message: String
    }

    /// The words of `line` (without its line feed), unescaped.
    /// - Throws: `SyntaxError` for a backslash not followed by one of `\ n r t x`, or
    ///   `\x` not followed by two hex digits.
    static func words(_ line: some Collection<UInt8>) throws(SyntaxError) -> [[UInt8]] {
        var bytes = Array(line)
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        var words: [[UInt8]] = []
        var word: [UInt8] = []
        var inWord = false
        var escaped = false
        var index = 0
        func finish() {
            if inWord { words.append(!escaped && word == [UInt8(ascii: "\""), UInt8(ascii: "\"")] ? [] : word) }
            word = []
            inWord = false
            escaped = false
        }
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"):
                finish()
            case UInt8(ascii: "\\"):
                inWord = true
                escaped = true
                guard index < bytes.count else { throw SyntaxError(message: "a line ends in a lone '\\' (write \\\\ for a backslash)") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\\"): word.append(UInt8(ascii: "\\"))
                case UInt8(ascii: "n"): word.append(UInt8(ascii: "\n"))
                case UInt8(ascii: "r"): word.append(UInt8(ascii: "\r"))
                case UInt8(ascii: "t"): word.append(UInt8(ascii: "\t"))
                case UInt8(ascii: "x"):
                    guard index + 1 < bytes.count, let high = hexValue(bytes[index]), let low = hexValue(bytes[index + 1]) else {
                        throw SyntaxError(message: "\\x needs two hex digits")
                    }
                    word.append(high << 4 | low)
                    index += 2
                default:
                    throw SyntaxError(message: "unknown escape '\\\(Character(Unicode.Scalar(escape)))' (use \\\\ \\n \\r \\t or \\xHH)")
                }
            default:
                inWord = true
                word.append(byte)
            }
        }
        finish()
        return words
    }

    /// Appends `bytes` to `line`, escaped so that the result is one line of UTF-8 text.
    /// - Parameter asWord: also escape spaces (`\x20`), so the result is one word, as a
    ///   reply's tag must be.
    static func escape(_ bytes: [UInt8], into line: inout [UInt8], asWord: Bool = false) {
        line.reserveCapacity(line.count + bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte >= 0x80 {
                let length = validSequenceLength(bytes, at: index)
                if length > 0 {
                    line.append(contentsOf: bytes[index..<(index + length)])
                    index += length
                } else {
                    appendHex(byte, to: &line)
                    index += 1
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\\"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20, 0x7F: appendHex(byte, to: &line)
            case UInt8(ascii: " ") where asWord: appendHex(byte, to: &line)
            default: line.append(byte)
            }
            index += 1
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func appendHex(_ byte: UInt8, to line: inout [UInt8]) {
        line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "x"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]])
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// The length of the valid UTF-8 sequence of two to four bytes at `index`, or 0 when
    /// the bytes there are not one (a stray continuation byte, a truncated, overlong or
    /// surrogate sequence, or beyond U+10FFFF).
    private static func validSequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let lead = bytes[index]
        let length: Int
        var lower: UInt8 = 0x80
        var upper: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; upper = 0x9F
        case 0xF0: length = 4; lower = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; upper = 0x8F
        default: return 0
        }
        guard index + length <= bytes.count else { return 0 }
        // Only the second byte has the narrowed range; the rest are plain continuations.
        guard (lower...upper).contains(bytes[index + 1]) else { return 0 }
        for offset in 2..<length where !(0x80...0xBF).contains(bytes[index + offset]) {
            return 0
        }
        return length
    }
}

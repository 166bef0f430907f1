// `halcyon loop`'s quoting rule: splitting request lines into words, escaping reply bytes
// into one line of UTF-8 text, and the two agreeing with each other.

import Testing
@testable import halcyon

@Suite struct LineEscapingTests {
    private func words(_ line: String) throws -> [String] {
        try LineEscaping.words(Array(line.utf8)).map { String(decoding: $0, as: UTF8.self) }
    }

    private func escaped(_ bytes: [UInt8], asWord: Bool = false) -> String {
        var line: [UInt8] = []
        LineEscaping.escape(bytes, into: &line, asWord: asWord)
        return String(decoding: line, as: UTF8.self)
    }

    private func syntaxError(_ line: String) -> String? {
        do {
            _ = try LineEscaping.words(Array(line.utf8))
            return nil
        } catch {
            return error.message
        }
    }

    @Test func wordsSplitOnSpacesAndTabs() throws {
        #expect(try words("set k v") == ["set", "k", "v"])
        #expect(try words("  set\t\tk   v  ") == ["set", "k", "v"])
        #expect(try words("get k\r") == ["get", "k"])
        #expect(try words("") == [])
        #expect(try words(" \t ") == [])
    }

    @Test func escapesInWordsAreUnescaped() throws {
        #expect(try words(#"set k a\x20b"#) == ["set", "k", "a b"])
        #expect(try words(#"set k \n\r\t\\"#) == ["set", "k", "\n\r\t\\"])
        #expect(try words(#"set k \xC3\xA9"#) == ["set", "k", "é"])
        #expect(try words(#"set k \x00"#) == ["set", "k", "\u{0}"])
        // Only a word that is exactly "" is the empty word; escaped quotes stay quotes.
        #expect(try words(#"set k """#) == ["set", "k", ""])
        #expect(try words(#"set k \x22\x22"#) == ["set", "k", "\"\""])
        #expect(try words(#"set k """""#) == ["set", "k", "\"\"\"\""])
        // A trailing CR is dropped once; an escaped one is kept.
        #expect(try words("set k v\\r\r") == ["set", "k", "v\r"])
    }

    @Test func bytesThatAreNotUTF8PassThroughWords() throws {
        let line: [UInt8] = Array("set k ".utf8) + [0xFF, 0xC3]
        #expect(try LineEscaping.words(line) == [Array("set".utf8), [UInt8(ascii: "k")], [0xFF, 0xC3]])
    }

    @Test func badEscapesAreSyntaxErrors() {
        #expect(syntaxError(#"set k v\"#) == #"a line ends in a lone '\' (write \\ for a backslash)"#)
        #expect(syntaxError(#"set k \q"#) == #"unknown escape '\q' (use \\ \n \r \t or \xHH)"#)
        #expect(syntaxError(#"set k \x4"#) == #"\x needs two hex digits"#)
        #expect(syntaxError(#"set k \xZZ"#) == #"\x needs two hex digits"#)
        #expect(syntaxError(#"set k \x"#) == #"\x needs two hex digits"#)
    }

    @Test func repliesEscapeControlBytesAndBrokenUTF8() {
        #expect(escaped(Array("plain text".utf8)) == "plain text")
        #expect(escaped(Array("a\nb\rc\td\\e".utf8)) == #"a\nb\rc\td\\e"#)
        #expect(escaped([0x00, 0x01, 0x1B, 0x1F, 0x7F]) == #"\x00\x01\x1b\x1f\x7f"#)
        #expect(escaped(Array("a b".utf8)) == "a b")
        #expect(escaped(Array("a b".utf8), asWord: true) == #"a\x20b"#)
        // Valid UTF-8 of every length stays as it is.
        #expect(escaped(Array("é€😀".utf8)) == "é€😀")
        // A lone lead byte, a stray continuation, an overlong form, a surrogate, a
        // truncated sequence and a code point past U+10FFFF are escaped byte by byte.
        #expect(escaped([0xC3]) == #"\xc3"#)
        #expect(escaped([0x80, 0x41]) == #"\x80A"#)
        #expect(escaped([0xC0, 0x80]) == #"\xc0\x80"#)
        #expect(escaped([0xE0, 0x80, 0x80]) == #"\xe0\x80\x80"#)
        #expect(escaped([0xED, 0xA0, 0x80]) == #"\xed\xa0\x80"#)
        #expect(escaped([0xE2, 0x82]) == #"\xe2\x82"#)
        #expect(escaped([0xF4, 0x90, 0x80, 0x80]) == #"\xf4\x90\x80\x80"#)
        #expect(escaped([0xF0, 0x9F, 0x98]) == #"\xf0\x9f\x98"#)
    }

    @Test func escapeAppendsToWhatIsThere() {
        var line = Array("ok ".utf8)
        LineEscaping.escape([0x0A], into: &line)
        #expect(line == Array(#"ok \n"#.utf8))
    }

    /// Every sequence of up to two bytes, escaped as a word, reads back as that one word.
    @Test func escapedWordsReadBackExactly() throws {
        var failures: [[UInt8]] = []
        var inputs: [[UInt8]] = (0...255).map { [UInt8($0)] }
        for first in 0...255 { for second in 0...255 { inputs.append([UInt8(first), UInt8(second)]) } }
        for bytes in inputs {
            var line: [UInt8] = []
            LineEscaping.escape(bytes, into: &line, asWord: true)
            let parsed = try LineEscaping.words(line)
            // `""` escapes to itself and reads back as the empty word, by the rule.
            let expected: [[UInt8]] = bytes == Array(#""""#.utf8) ? [[]] : [bytes]
            if parsed != expected || String(validating: line, as: UTF8.self) == nil || line.contains(where: { $0 < 0x20 }) {
                failures.append(bytes)
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }
}

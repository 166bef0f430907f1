import HalcyonJSON
import HalcyonScannerFuzzing
import Testing

@Suite struct JSONScannerTests {
    private func scan(_ bytes: [UInt8]) -> JSONScanner.Outcome {
        bytes.withUnsafeBytes { JSONScanner.scan($0) }
    }

    private func scan(_ text: String) -> JSONScanner.Outcome { scan(Array(text.utf8)) }

    /// Scans `bytes`, expects the scanner to take them, and reads the document side by side
    /// with jansson's tree (the fuzz target's check).
    private func expectSameTree(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .parsed(let ours) = scan(bytes) else {
            Issue.record("deferred: \(String(decoding: bytes, as: UTF8.self))", sourceLocation: sourceLocation)
            return
        }
        let problem = ScannerFuzzer.disagreement(ours, jansson: JSONValue.parse(bytes))
        #expect(problem == nil, "\(problem ?? "")", sourceLocation: sourceLocation)
    }

    private func deferral(_ bytes: [UInt8]) -> JSONScanner.Deferral? {
        if case .deferred(let reason) = scan(bytes) { return reason }
        return nil
    }

    private func deferral(_ text: String) -> JSONScanner.Deferral? { deferral(Array(text.utf8)) }

    @Test func hotRequestShapesGiveJanssonsTree() {
        let lines = [
            #"{"jsonrpc":"2.0","id":1,"method":"server.ping"}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"get","params":{"key":"user:42"}}"#,
            #"{"jsonrpc":"2.0","id":"a-1","method":"set","params":{"key":"k","value":"hello","ttl":{"seconds":5}}}"#,
            #"{"jsonrpc":"2.0","id":4,"method":"touch","params":{"key":"k","ttl":{"minutes":10}}}"#,
            #"{"jsonrpc":"2.0","id":5,"method":"remove","params":{"key":"k"}}"#,
            #"{"jsonrpc":"2.0","id":6,"method":"incr","params":{"key":"n","by":-12}}"#,
            #"{"jsonrpc":"2.0","id":null,"method":"add","params":{"key":"k","value":"v"}}"#,
            #"{"jsonrpc":"2.0","id":-9,"method":"cas","params":{"key":"k","value":"v","version":123456789012345678}}"#,
            #"{"jsonrpc":"2.0","method":"set","params":{"key":"k","value":"v","sync":false,"ifAbsent":true,"meta":null}}"#,
            " {\t\"jsonrpc\" : \"2.0\" ,\n\"id\" : 0 , \"method\" : \"get\" , \"params\" : { \"key\" : \"k\" } }\r ",
            #"{"jsonrpc":"2.0","id":1,"method":"set","params":{"key":"café € 😀","value":"\#(String(repeating: "0123456789abcdef", count: 64))"}}"#,
            "{}",
            #"{"a":{},"b":""}"#,
        ]
        for line in lines { expectSameTree(Array(line.utf8)) }
    }

    @Test func memberOrderIsTheDocumentsOrder() throws {
        guard case .parsed(let document) = scan(#"{"z":1,"a":2,"m":{"y":3,"b":4}}"#) else {
            Issue.record("deferred")
            return
        }
        let tree = document.tree
        #expect(tree.keys == ["z", "a", "m"])
        #expect(try #require(tree["m"]).keys == ["y", "b"])
    }

    @Test func stringsOfEveryLengthAroundTheWordSize() {
        // The scanner reads strings eight bytes at a time; the quote, a UTF-8 sequence and
        // the end of the text fall at every offset of a word.
        for length in 0..<40 {
            for tail in ["", "é", "€", "😀"] {
                let text = String(repeating: "x", count: length) + tail
                expectSameTree(Array(#"{"k":"\#(text)","\#(text)":1}"#.utf8))
            }
        }
    }

    @Test func deferralForAnythingButOneObject() {
        for text in ["", "   ", "[]", #"[{"jsonrpc":"2.0","method":"ping"}]"#, #""s""#, "42", "null", "}"] {
            #expect(deferral(text) == .notAnObject, "\(text)")
        }
    }

    @Test func deferralForEscapes() {
        #expect(deferral(#"{"key":"a\"b"}"#) == .escape)
        #expect(deferral(#"{"key":"\u00e9"}"#) == .escape)
        #expect(deferral(#"{"k\u0000ey":1}"#) == .escape)
        #expect(deferral(#"{"key":"0123456789abcdef\n"}"#) == .escape)
    }

    @Test func deferralForControlCharacters() {
        #expect(deferral("{\"key\":\"tab\there\"}") == .controlCharacter)
        #expect(deferral(Array("{\"key\":\"nul".utf8) + [0] + Array("\"}".utf8)) == .controlCharacter)
        #expect(deferral("{\"key\":\"0123456789\u{1F}\"}") == .controlCharacter)
    }

    @Test func deferralForInvalidUTF8() {
        let bad: [[UInt8]] = [[0xC3, 0x28], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC0, 0xAF], [0xFF], [0xE2, 0x82]]
        for sequence in bad {
            let line = Array(#"{"key":"abc"#.utf8) + sequence + Array(#"","value":1}"#.utf8)
            #expect(deferral(line) == .invalidUTF8, "\(sequence)")
            if case .success = JSONValue.parse(line) { Issue.record("jansson took invalid UTF-8 \(sequence)") }
        }
    }

    @Test func deferralForUnusualNumbers() {
        for number in ["1.5", "1.", "1e3", "1E3", "-12E+3", "0.0", "-0", "01", "-01", "1234567890123456789",
                       "99999999999999999999", "9223372036854775807", "-9223372036854775808"] {
            #expect(deferral(#"{"jsonrpc":"2.0","id":\#(number),"method":"get"}"#) == .unusualNumber, "\(number)")
        }
        // The longest plain integers are taken, and read as jansson reads them.
        expectSameTree(Array(#"{"a":999999999999999999,"b":-999999999999999999,"c":0}"#.utf8))
    }

    @Test func deferralForDuplicateMembers() {
        #expect(deferral(#"{"jsonrpc":"2.0","id":1,"id":2,"method":"get"}"#) == .duplicateMember)
        #expect(deferral(#"{"params":{"key":"a","key":"b"}}"#) == .duplicateMember)
        // jansson, told to, refuses both.
        if case .success = JSONValue.parse(#"{"id":1,"id":2}"#) { Issue.record("jansson took a duplicate") }
    }

    @Test func deferralForArraysAndDeepNesting() {
        #expect(deferral(#"{"method":"getMany","params":{"keys":["a","b"]}}"#) == .nesting)
        #expect(deferral(#"{"a":{"b":{"c":{"d":1}}}}"#) == .nesting)
        expectSameTree(Array(#"{"a":{"b":{"c":1}}}"#.utf8))
    }

    @Test func deferralForTooManyValues() {
        func object(members: Int) -> String {
            "{" + (0..<members).map { #""m\#($0)":\#($0)"# }.joined(separator: ",") + "}"
        }
        // The root is a value too: `maxNodes - 1` members fill the table exactly.
        expectSameTree(Array(object(members: JSONScanner.maxNodes - 1).utf8))
        #expect(deferral(object(members: JSONScanner.maxNodes)) == .tooManyValues)
        // Nested objects count with their members.
        let nested = "{" + (0..<JSONScanner.maxNodes / 2).map { #""o\#($0)":{"v":1}"# }.joined(separator: ",") + "}"
        #expect(deferral(nested) == .tooManyValues)
    }

    @Test func aMemberIsFoundByNameAndAMissingOneIsNot() throws {
        guard case .parsed(let document) = scan(#"{"jsonrpc":"2.0","id":3,"method":"set","params":{"key":"k","ke":1,"keys":true,"value":"v"}}"#) else {
            Issue.record("deferred")
            return
        }
        try withExtendedLifetime(document) {
            let params = try #require(document.root["params"])
            #expect(params["key"]?.string == "k")
            #expect(params["ke"]?.int64 == 1)
            #expect(params["keys"]?.bool == true)
            #expect(params["value"]?.stringEquals("v") == true)
            #expect(params["k"] == nil)
            #expect(params["valu"] == nil)
            #expect(params.count == 4)
            // Members of the params are not members of the request, and the reverse.
            #expect(document.root["key"] == nil)
            #expect(params["method"] == nil)
            #expect(document.root["id"]?.double == 3)
        }
    }

    @Test func deferralForTrailingBytes() {
        #expect(deferral(#"{"method":"ping"} x"#) == .trailingBytes)
        #expect(deferral(#"{"method":"ping"}{}"#) == .trailingBytes)
        #expect(deferral(Array(#"{"method":"ping"}"#.utf8) + [0] + Array("garbage".utf8)) == .trailingBytes)
    }

    @Test func deferralForMalformedText() {
        for text in [#"{"method":"ping",}"#, #"{"method":"ping""#, #"{"id":tru}"#, #"{"id":nul}"#, #"{"a":-}"#,
                     #"{"a":"unterminated"#, #"{a:1}"#, #"{"a" 1}"#, #"{"a":1 "b":2}"#, "{", #"{"a":}"#] {
            #expect(deferral(text) == .malformed, "\(text)")
        }
    }

    @Test func randomTextNeverDisagreesWithJansson() {
        // Mutations of a hot line: whatever the scanner takes, jansson builds the same.
        var rng = SplitMix64(seed: 0x5CA7_7E55)
        let base = Array(#"{"jsonrpc":"2.0","id":12,"method":"set","params":{"key":"k","value":"héllo","ttl":{"seconds":5}}}"#.utf8)
        let alphabet = Array(#"{}[]":,\ -019.eE"tfnul"#.utf8) + [0x00, 0x09, 0x0A, 0x80, 0xC3, 0xE2, 0xFF]
        var taken = 0
        for _ in 0..<20_000 {
            var line = base
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let at = Int.random(in: 0..<line.count, using: &rng)
                let byte = alphabet.randomElement(using: &rng)!
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: line[at] = byte
                case 1: line.insert(byte, at: at)
                default: if line.count > 1 { line.remove(at: at) }
                }
            }
            guard case .parsed(let ours) = scan(line) else { continue }
            taken += 1
            let problem = ScannerFuzzer.disagreement(ours, jansson: JSONValue.parse(line))
            #expect(problem == nil, "\(String(decoding: line, as: UTF8.self)): \(problem ?? "")")
        }
        #expect(taken > 1_000, "the mutations should leave many lines in the subset")
    }
}

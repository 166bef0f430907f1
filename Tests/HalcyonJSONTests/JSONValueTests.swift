import HalcyonJSON
import Testing

@Suite struct JSONValueTests {
    func parsed(_ text: String) throws -> JSONValue { try JSONValue.parse(text).get() }

    func failure(_ bytes: [UInt8]) -> JSONParseError? {
        if case .failure(let e) = JSONValue.parse(bytes) { return e }
        return nil
    }

    @Test func accessorsReadEveryKind() throws {
        let v = try parsed(#"{"s":"h\u0000i","i":-42,"r":1.5,"t":true,"f":false,"n":null,"a":[1,"x"],"o":{}}"#)
        #expect(v.kind == .object)
        #expect(v.count == 8)
        #expect(v["s"]?.string == "h\u{0}i")
        #expect(v["s"]?.stringBytes == [0x68, 0, 0x69])
        #expect(v["i"]?.int64 == -42)
        #expect(v["i"]?.double == -42)
        #expect(v["r"]?.int64 == nil)
        #expect(v["r"]?.double == 1.5)
        #expect(v["r"]?.kind == .real)
        #expect(v["t"]?.bool == true)
        #expect(v["f"]?.bool == false)
        #expect(v["n"]?.isNull == true)
        #expect(v["a"]?.array?.count == 2)
        #expect(v["a"]?[1]?.string == "x")
        #expect(v["a"]?[2] == nil)
        #expect(v["o"]?.kind == .object)
        #expect(v["missing"] == nil)
        #expect(v.keys == ["s", "i", "r", "t", "f", "n", "a", "o"])
        #expect(v["s"]?["x"] == nil)
    }

    @Test func topLevelScalarsParse() throws {
        #expect(try parsed("3").int64 == 3)
        #expect(try parsed(#" "x" "#).string == "x")
        #expect(try parsed("null").isNull)
    }

    @Test func serializedCompactKeepsOrderAndHasNoWhitespace() throws {
        let v = try parsed("{ \"b\" : [1, 2,\n 3], \"a\": \"line\\nfeed\" }")
        #expect(v.compactText == #"{"b":[1,2,3],"a":"line\nfeed"}"#)
        #expect(!v.serializedCompact().contains(0x0A))
    }

    @Test func builtValuesEqualParsedOnes() throws {
        let built = JSONValue.object(["a": .integer(1), "b": .array([.string("x\u{0}y"), .null, .bool(true), .real(0.5)])])
        #expect(built == (try parsed(#"{"b":["x\u0000y",null,true,0.5],"a":1}"#)))
        #expect(JSONValue.real(.nan).isNull)
    }

    @Test func duplicateKeysAreRejected() {
        #expect(failure(Array(#"{"a":1,"a":2}"#.utf8))?.reason == .duplicateKey)
    }

    @Test func invalidUTF8IsRejected() {
        #expect(failure([0x22, 0xC3, 0x28, 0x22])?.reason == .invalidUTF8)
        #expect(failure([0x22, 0xED, 0xA0, 0x80, 0x22])?.reason == .invalidUTF8)
    }

    @Test func deepNestingIsRejectedWithoutCrashing() {
        #expect(failure(Array(repeating: UInt8(ascii: "["), count: 100_000))?.reason == .nestingTooDeep)
        #expect(failure(Array(repeating: UInt8(ascii: "{"), count: 3) + Array(#""a":"#.utf8))?.reason == .invalidJSON)
    }

    @Test func hugeNumbersAreOutOfRange() {
        #expect(failure(Array("9223372036854775808".utf8))?.reason == .numberOutOfRange)
        #expect(failure(Array("-99999999999999999999999".utf8))?.reason == .numberOutOfRange)
        #expect(failure(Array("1e400".utf8))?.reason == .numberOutOfRange)
        #expect((try? JSONValue.parse("9223372036854775807").get())?.int64 == Int64.max)
    }

    @Test func truncatedAndGarbageInputIsInvalidJSON() {
        for text in ["", " ", "{", #"{"a":"#, #""abc"#, "[1,2", "tru", "{} x", "{'a':1}", "[1,]", "nul"] {
            #expect(failure(Array(text.utf8))?.reason == .invalidJSON, "\(text)")
        }
        // A NUL byte outside a string, and NUL in a member name.
        #expect(failure([UInt8(ascii: "1"), 0])?.reason == .invalidJSON)
        #expect(failure(Array(#"{"a":1}"#.utf8) + [0] + Array("garbage".utf8))?.reason == .invalidJSON)
        #expect(failure(Array(#"{"a\u0000b":1}"#.utf8))?.reason == .invalidJSON)
    }

    @Test func errorsCarryMessageAndPosition() {
        let e = failure(Array("[1,}".utf8))
        #expect(e?.message.isEmpty == false)
        #expect((e?.position ?? 0) > 0)
    }

    @Test func valuesAreShareableAcrossThreads() async throws {
        let v = try parsed(#"{"k":[1,2,3,{"x":"y"}]}"#)
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var ok = true
                    for _ in 0..<2000 {
                        ok = ok && v["k"]?[3]?["x"]?.string == "y" && v.compactText == #"{"k":[1,2,3,{"x":"y"}]}"#
                    }
                    return ok
                }
            }
            for await ok in group { #expect(ok) }
        }
    }
}

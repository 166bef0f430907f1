@testable import HalcyonJSON
import Testing

@Suite struct JSONWriterTests {
    func text(_ w: JSONWriter) -> String { String(decoding: w.bytes, as: UTF8.self) }

    @Test func writesCompactObjectsWithCommas() {
        var w = JSONWriter()
        w.beginObject()
        w.key("a"); w.int(1)
        w.key("b"); w.beginArray(); w.bool(true); w.bool(false); w.null(); w.string("x"); w.endArray()
        w.key("c"); w.beginObject(); w.endObject()
        w.key("d"); w.double(0.1)
        w.key("e"); w.raw(Array(#"{"z":[]}"#.utf8))
        w.endObject()
        #expect(text(w) == #"{"a":1,"b":[true,false,null,"x"],"c":{},"d":0.1,"e":{"z":[]}}"#)
        #expect(w.depth == 0)
        w.newline()
        w.beginArray(); w.endArray()
        #expect(text(w).hasSuffix("}\n[]"))
    }

    @Test func staticNamesAndValuesTakeTheSameSeparators() {
        var w = JSONWriter()
        w.beginArray(); w.string(static: "a"); w.string(static: ""); w.beginObject(); w.endObject(); w.string(static: "b")
        w.endArray()
        w.newline()
        w.beginObject()
        w.key("k"); w.string(static: "2.0")
        w.key(""); w.int(-7)
        w.key("z"); w.beginObject(); w.key("n"); w.null(); w.endObject()
        w.endObject()
        #expect(text(w) == #"["a","",{},"b"]"# + "\n" + #"{"k":"2.0","":-7,"z":{"n":null}}"#)
        #expect(w.depth == 0)
    }

    @Test func plainStringsAreWrittenAsTheEscapingWriterWritesThem() {
        let values: [[UInt8]] = [[], Array("v".utf8), Array(repeating: UInt8(ascii: "x"), count: 4096),
                                 Array("key:1234 with spaces ~ and } ] , :".utf8)]
        for value in values {
            var plain = JSONWriter()
            var escaping = JSONWriter()
            plain.beginArray(); plain.string(plainASCII: value); plain.string(plainASCII: value); plain.endArray()
            escaping.beginArray(); escaping.string(utf8Bytes: value); escaping.string(utf8Bytes: value); escaping.endArray()
            #expect(plain.bytes == escaping.bytes)
        }
    }

    @Test func escapesWhatJSONRequires() {
        var w = JSONWriter()
        w.string("q\"b\\n\n r\r t\t b\u{8} f\u{c} \u{0}\u{1f}\u{7f}\u{2028}é😀")
        #expect(text(w) == #""q\"b\\n\n r\r t\t b\b f\f \u0000\u001f"# + "\u{7f}\u{2028}é😀\"")
    }

    @Test func wordScanNeverMissesAByteThatNeedsEscaping() {
        // Every byte value at every position, among neighbours of every kind.
        for neighbour: UInt8 in [0x41, 0x00, 0x22, 0x5C, 0x1F, 0x20, 0x21, 0x80, 0xFF] {
            for b in 0...255 {
                for position in 0..<8 {
                    var word = [UInt8](repeating: neighbour, count: 8)
                    word[position] = UInt8(b)
                    let value = word.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                    let needs = word.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }
                    if needs { #expect(JSONWriter.wordNeedsEscape(value), "\(word)") }
                    if !needs && neighbour == 0x41 { #expect(!JSONWriter.wordNeedsEscape(value), "\(word)") }
                }
            }
        }
    }

    @Test func nonFiniteDoublesBecomeNull() {
        var w = JSONWriter()
        w.beginArray(); w.double(.nan); w.double(.infinity); w.double(-0.0); w.double(1e300); w.endArray()
        #expect(text(w) == "[null,null,-0.0,1e+300]")
    }

    @Test func extremeIntegers() {
        var w = JSONWriter()
        w.beginArray(); w.int(Int64.min); w.int(Int64.max); w.int(0); w.int(-7); w.endArray()
        #expect(text(w) == "[-9223372036854775808,9223372036854775807,0,-7]")
    }

    @Test func decimalsAtEveryDigitCountAndPairBoundary() {
        var values: [Int64] = [0, Int64.max, Int64.min, Int64.min + 1]
        // Each power of ten from 1 to 10^18, and its neighbours, of either sign.
        for exponent in 0...18 {
            let power = (0..<exponent).reduce(Int64(1)) { product, _ in product * 10 }
            values += [power - 1, power, power + 1, -(power - 1), -power, -(power + 1)]
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 { values.append(Int64(bitPattern: rng.next()) >> Int.random(in: 0..<63, using: &rng)) }
        for value in values {
            var w = JSONWriter()
            w.int(value)
            #expect(text(w) == String(value), "\(value)")
        }
    }

    @Test func rollbackRestoresCommaState() {
        var w = JSONWriter()
        w.beginArray()
        w.int(1)
        let mark = w.mark
        w.beginObject(); w.key("half"); w.string("written")
        w.rollback(to: mark)
        w.int(2)
        w.endArray()
        #expect(text(w) == "[1,2]")
    }

    @Test func base64IsWrittenAsAString() {
        var w = JSONWriter()
        w.beginArray(); w.base64([]); w.base64(Array("f".utf8)); w.base64(Array("foobar".utf8)); w.base64([0xFF, 0xFE]); w.endArray()
        #expect(text(w) == #"["","Zg==","Zm9vYmFy","//4="]"#)
    }

    // MARK: Property tests: the writer's output parses back with jansson to the same value.

    @Test func arbitraryStringsRoundTrip() throws {
        var rng = SplitMix64(seed: 0x5EED_0001)
        for _ in 0..<3000 {
            let s = rng.string()
            // jansson refuses NUL inside member names, so keys are generated without it.
            let k = String(rng.string(maxLength: 8).unicodeScalars.filter { $0 != "\u{0}" })
            var w = JSONWriter()
            w.beginObject(); w.key(k); w.string(s); w.endObject()
            #expect(!w.bytes.contains(0x0A))
            let back = try JSONValue.parse(w.bytes).get()
            #expect(back[k]?.string == s)
            #expect(back.count == 1)
            var w2 = JSONWriter()
            w2.string(utf8Bytes: Array(s.utf8))
            var w3 = JSONWriter()
            w3.string(s)
            #expect(w2.bytes == w3.bytes)
            #expect(try JSONValue.parse(w2.bytes).get().string == s)
        }
    }

    @Test func everyScalarRoundTrips() throws {
        // All code points of the BMP below the surrogates, in chunks, plus the astral edges.
        var start: UInt32 = 0
        while start < 0xD800 {
            let scalars = (start..<min(start + 2048, 0xD800)).compactMap(Unicode.Scalar.init)
            var view = String.UnicodeScalarView(); view.append(contentsOf: scalars)
            let s = String(view)
            var w = JSONWriter(); w.string(s)
            #expect(try JSONValue.parse(w.bytes).get().string == s)
            start += 2048
        }
        for v: UInt32 in [0xE000, 0xFFFF, 0x10000, 0x10FFFF] {
            var w = JSONWriter(); w.string(String(Unicode.Scalar(v)!))
            #expect(try JSONValue.parse(w.bytes).get().string == String(Unicode.Scalar(v)!))
        }
    }

    @Test func arbitraryBytesRoundTripThroughBase64() throws {
        var rng = SplitMix64(seed: 0x5EED_0002)
        for _ in 0..<2000 {
            let data = rng.bytes()
            var w = JSONWriter(); w.base64(data)
            let back = try JSONValue.parse(w.bytes).get()
            let encoded = try #require(back.stringBytes)
            #expect(StrictBase64.decode(encoded) == data)
        }
    }

    @Test func randomNumbersRoundTrip() throws {
        var rng = SplitMix64(seed: 0x5EED_0003)
        for _ in 0..<5000 {
            let i = Int64(bitPattern: rng.next())
            let d = Double(bitPattern: rng.next())
            let small = Double.random(in: -1e6...1e6, using: &rng)
            var w = JSONWriter()
            w.beginArray(); w.int(i); w.double(d); w.double(small); w.endArray()
            let back = try JSONValue.parse(w.bytes).get()
            #expect(back[0]?.int64 == i)
            if d.isFinite {
                #expect(back[1]?.double == d)
                #expect(back[1]?.kind == .real)
            } else {
                #expect(back[1]?.isNull == true)
            }
            #expect(back[2]?.double == small)
        }
    }

    /// A random tree, built with jansson, and the same tree written with the writer's
    /// primitives: comma and colon placement at every depth.
    @Test func randomTreesRoundTrip() throws {
        var rng = SplitMix64(seed: 0x5EED_0006)
        func tree(_ depth: Int, _ w: inout JSONWriter) -> JSONValue {
            switch Int.random(in: 0..<(depth > 4 ? 5 : 8), using: &rng) {
            case 0: w.null(); return .null
            case 1: let b = Bool.random(using: &rng); w.bool(b); return .bool(b)
            case 2: let i = Int64(bitPattern: rng.next()) >> Int.random(in: 0..<63, using: &rng); w.int(i); return .integer(i)
            case 3: let d = Double.random(in: -1e9...1e9, using: &rng); w.double(d); return .real(d)
            case 4: let s = rng.string(maxLength: 12); w.string(s); return .string(s)
            case 5, 6:
                w.beginObject()
                var members: [(String, JSONValue)] = []
                var seen = Set<String>()
                for _ in 0..<Int.random(in: 0...4, using: &rng) {
                    let k = String(rng.string(maxLength: 6).unicodeScalars.filter { $0 != "\u{0}" })
                    guard seen.insert(k).inserted else { continue }
                    w.key(k)
                    members.append((k, tree(depth + 1, &w)))
                }
                w.endObject()
                return .object(members)
            default:
                w.beginArray()
                var elements: [JSONValue] = []
                for _ in 0..<Int.random(in: 0...4, using: &rng) { elements.append(tree(depth + 1, &w)) }
                w.endArray()
                return .array(elements)
            }
        }
        for _ in 0..<2000 {
            var w = JSONWriter()
            let expected = tree(0, &w)
            #expect(w.depth == 0)
            let back = try JSONValue.parse(w.bytes).get()
            #expect(back == expected, "\(String(decoding: w.bytes, as: UTF8.self))")
        }
    }
}

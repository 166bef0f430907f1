import HalcyonJSON
import Testing

@Suite struct JSONViewTests {
    @Test func viewsReadWhatValuesRead() throws {
        let v = try JSONValue.parse(#"{"s":"h\u0000i","i":-42,"r":1.5,"t":true,"n":null,"a":[1,"x"],"o":{"k":2}}"#).get()
        withExtendedLifetime(v) {
            let view = v.view
            #expect(view.kind == .object && view.isObject && view.count == 7)
            #expect(view["s"]?.string == "h\u{0}i")
            #expect(view["s"]?.stringByteCount == 3)
            #expect(view["s"]?.withStringBytes { Array($0) } == [0x68, 0, 0x69])
            #expect(view["i"]?.int64 == -42 && view["i"]?.double == -42)
            #expect(view["r"]?.int64 == nil && view["r"]?.double == 1.5)
            #expect(view["t"]?.bool == true)
            #expect(view["n"]?.isNull == true)
            #expect(view["a"]?[1]?.string == "x" && view["a"]?[2] == nil && view["a"]?[-1] == nil)
            #expect(view["o"]?["k"]?.int64 == 2)
            #expect(view["missing"] == nil && view["s"]?["x"] == nil)
            #expect(view["o"]?.firstMember?.key == "k")
            #expect(view["a"]?.serializedCompact() == Array(#"[1,"x"]"#.utf8))
        }
    }

    @Test func stringEqualsComparesBytesExactly() throws {
        let v = try JSONValue.parse(#"{"a":"2.0","b":"2.0\u0000","c":2}"#).get()
        withExtendedLifetime(v) {
            #expect(v.view["a"]?.stringEquals("2.0") == true)
            #expect(v.view["b"]?.stringEquals("2.0") == false)
            #expect(v.view["c"]?.stringEquals("2") == false)
        }
    }

    @Test func membersInDocumentOrderWithNamesInPlace() throws {
        // jansson refuses NUL in member names, so names are plain C strings with a length.
        let v = try JSONValue.parse(#"{"z":1,"ab":2,"m":3}"#).get()
        var names: [[UInt8]] = []
        withExtendedLifetime(v) {
            v.view.forEachMember { name, _ in names.append(Array(name)); return true }
            let key: [UInt8] = [0x61, 0x62, 0x63]
            #expect(key.withUnsafeBytes { v.view.member(UnsafeRawBufferPointer(rebasing: $0[0..<2]))?.int64 } == 2)
            #expect(key.withUnsafeBytes { v.view.member($0) } == nil)
        }
        #expect(names == [[0x7A], [0x61, 0x62], [0x6D]])
        var seen = 0
        withExtendedLifetime(v) { v.view.forEachMember { _, _ in seen += 1; return false } }
        #expect(seen == 1)
    }

    @Test func aNodeKeepsItsTreeAlive() throws {
        var node: JSONNode?
        do {
            let root = try JSONValue.parse(#"{"params":{"key":"k"}}"#).get()
            node = withExtendedLifetime(root) { root.view["params"].map { JSONNode($0, in: root) } }
        }
        // The parse result is gone from this scope; the node still owns the tree.
        #expect(node?.view["key"]?.string == "k")
        #expect(node?.value["key"]?.string == "k")
    }
}

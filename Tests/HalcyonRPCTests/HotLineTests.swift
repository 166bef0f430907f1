// The hot-line reader: which lines it takes, what it reads from them, and that on every
// line it takes jansson reads the same request (the fuzz target's check, run here on
// hand-picked lines and on every prefix of every input of the fuzz corpus).

import Foundation
import HalcyonFuzzing
@testable import HalcyonRPC
import Testing

@Suite("Hot lines")
struct HotLineTests {
    private func hot(_ line: String) -> (method: HotRequest.Method, id: Int64, key: String, value: String)? {
        let bytes = Array(line.utf8)
        return bytes.withUnsafeBytes { raw in
            HotLine.read(raw).map {
                ($0.method, $0.id, String(decoding: raw[$0.key], as: UTF8.self), String(decoding: raw[$0.value], as: UTF8.self))
            }
        }
    }

    private func problem(_ line: String) -> String? {
        Array(line.utf8).withUnsafeBytes { RequestFuzzer.hotLineProblem($0) }
    }

    /// The eight-bytes-a-step scan for a string's end stops where a byte-by-byte scan
    /// does: each byte value that ends it (the quote, the backslash, every one outside
    /// 0x20...0x7E) at every position of a 40-byte run of plain bytes and from every start,
    /// behind another stopping byte too (the first one counts), and a run with none.
    @Test func plainEndStopsWhereAByteByByteScanDoes() {
        func reference(_ bytes: [UInt8], from: Int) -> Int {
            var at = from
            while at < bytes.count {
                let b = bytes[at]
                if b < 0x20 || b > 0x7E || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return at }
                at += 1
            }
            return at
        }
        var stoppers: [UInt8] = Array(0..<0x20)
        stoppers += [0x22, 0x5C]
        stoppers += Array(0x7F...0xFF)
        var base: [UInt8] = []
        for i in 0..<40 {
            let byte = UInt8(0x20 + (i * 7) % 0x5F)
            base.append(byte == 0x22 || byte == 0x5C ? 0x41 : byte)
        }
        #expect(base.allSatisfy { $0 >= 0x20 && $0 <= 0x7E && $0 != 0x22 && $0 != 0x5C })
        var mismatches: [String] = []
        for from in 0...base.count {
            let got = base.withUnsafeBytes { HotLine.plainEnd($0, from: from) }
            if got != reference(base, from: from) { mismatches.append("none, from \(from): \(got)") }
        }
        for stopper in stoppers {
            for position in 0..<base.count {
                var line = base
                line[position] = stopper
                // A second stopping byte of another kind after it: the first one still counts.
                if position + 3 < line.count { line[position + 3] = stopper == 0x22 ? 0x01 : 0x22 }
                for from in 0...line.count {
                    let got = line.withUnsafeBytes { HotLine.plainEnd($0, from: from) }
                    let want = reference(line, from: from)
                    if got != want { mismatches.append("byte \(stopper) at \(position), from \(from): \(got), not \(want)") }
                }
            }
        }
        base.removeAll()
        #expect(base.withUnsafeBytes { HotLine.plainEnd($0, from: 0) } == 0)
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    @Test(arguments: [
        (#"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k"}}"#, Int64(1), "k"),
        (#"{"method":"cache.get","params":{"key":"user:42"},"id":0,"jsonrpc":"2.0"}"#, 0, "user:42"),
        (" {\t\"jsonrpc\" : \"2.0\" , \"id\" : -17 ,\"method\":\"cache.get\", \"params\" : { \"key\" : \"a b\" } } \r", -17, "a b"),
        (#"{"jsonrpc":"2.0","id":999999999999999999,"method":"cache.get","params":{"key":"~!@#$%^&*()"}}"#,
         999_999_999_999_999_999, "~!@#$%^&*()"),
    ])
    func takesTheHotGet(line: String, id: Int64, key: String) throws {
        let read = try #require(hot(line))
        #expect(read.method == .get)
        #expect(read.id == id)
        #expect(read.key == key)
        #expect(read.value == "")
        #expect(problem(line) == nil)
    }

    @Test(arguments: [
        (#"{"jsonrpc":"2.0","id":2,"method":"cache.set","params":{"key":"k","value":"v"}}"#, Int64(2), "k", "v"),
        (#"{"params":{"value":"","key":"user:1"},"method":"cache.set","id":0,"jsonrpc":"2.0"}"#, 0, "user:1", ""),
        (" { \"jsonrpc\" : \"2.0\", \"method\" : \"cache.set\" , \"id\":-3, \"params\" : { \"key\" : \"a\" , \"value\" : \"b c\" } }",
         -3, "a", "b c"),
    ])
    func takesTheHotSet(line: String, id: Int64, key: String, value: String) throws {
        let read = try #require(hot(line))
        #expect(read.method == .set)
        #expect(read.id == id)
        #expect(read.key == key)
        #expect(read.value == value)
        #expect(problem(line) == nil)
    }

    /// Valid requests outside the shape, and lines that are not valid at all: the parser's.
    @Test(arguments: [
        #"{"jsonrpc":"2.0","id":"1","method":"cache.get","params":{"key":"k"}}"#,  // string id
        #"{"jsonrpc":"2.0","id":1.0,"method":"cache.get","params":{"key":"k"}}"#,  // real id
        #"{"jsonrpc":"2.0","id":1e2,"method":"cache.get","params":{"key":"k"}}"#,
        #"{"jsonrpc":"2.0","id":01,"method":"cache.get","params":{"key":"k"}}"#,  // not JSON
        #"{"jsonrpc":"2.0","id":-0,"method":"cache.get","params":{"key":"k"}}"#,
        #"{"jsonrpc":"2.0","id":1234567890123456789,"method":"cache.get","params":{"key":"k"}}"#,  // 19 digits
        #"{"jsonrpc":"2.0","method":"cache.get","params":{"key":"k"}}"#,  // a notification
        #"{"jsonrpc":"2.0","id":null,"method":"cache.get","params":{"key":"k"}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"k"}}"#,  // a set without a value
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k","value":"v"}}"#,  // a get with one
        #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"k","value":"v","toDisk":false}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"k","value":1}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"k","value":"v","value":"w"}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"value":"v"}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.remove","params":{"key":"k"}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k","encoding":"base64"}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":1}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get"}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k\u00e9"}}"#,  // an escape
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k\"q"}}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"cache.get\",\"params\":{\"key\":\"caf\u{E9}\"}}",  // not ASCII
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"cache.get\",\"params\":{\"key\":\"a\tb\"}}",  // a control character
        #"{"jsonrpc":"2.0","id":1,"id":2,"method":"cache.get","params":{"key":"k"}}"#,  // a repeated member
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k"},"extra":1}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k"}} x"#,  // trailing bytes
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k"}"#,  // cut short
        #"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k"},}"#,
        #"[{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k"}}]"#,  // a batch
        #"{"jsonrpc":"1.0","id":1,"method":"cache.get","params":{"key":"k"}}"#,
        "",
    ])
    func leavesEverythingElseToTheParser(line: String) {
        #expect(hot(line) == nil)
    }

    /// Every input of the fuzz corpus (Fuzz/corpus), and each of its prefixes: where the reader
    /// takes one, jansson reads the same request.
    @Test func agreesWithJanssonOnTheCorpus() throws {
        var lines = [
            #"{"jsonrpc":"2.0","id":12,"method":"cache.get","params":{"key":"key:12"}}"#,
            #"{"jsonrpc":"2.0","id":13,"method":"cache.set","params":{"key":"key:13","value":"v"}}"#,
            " { \"params\" : { \"key\" : \"x\" } , \"jsonrpc\" : \"2.0\" , \"method\" : \"cache.get\" , \"id\" : 5 } ",
        ]
        let corpus = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/corpus")
        let files = try FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)
        #expect(!files.isEmpty)
        for file in files { lines.append(String(decoding: try Data(contentsOf: file), as: UTF8.self)) }
        var taken = 0
        for line in lines {
            let bytes = Array(line.utf8)
            for end in 0...bytes.count {
                let prefix = Array(bytes[..<end])
                if let problem = prefix.withUnsafeBytes({ RequestFuzzer.hotLineProblem($0) }) {
                    Issue.record("\(problem)")
                }
                if prefix.withUnsafeBytes({ HotLine.read($0) }) != nil { taken += 1 }
            }
        }
        #expect(taken >= 3)
    }
}

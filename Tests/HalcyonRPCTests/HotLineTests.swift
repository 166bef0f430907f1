// The hot-line reader: which lines it takes, what it reads from them, and that on every
// line it takes jansson reads the same request (the fuzz target's check, run here on
// hand-picked lines and on every prefix of every input of the fuzz corpus).

import Foundation
import HalcyonFuzzing
import HalcyonRPC
import Testing

@Suite("Hot lines")
struct HotLineTests {
    private func hot(_ line: String) -> (id: Int64, key: String)? {
        let bytes = Array(line.utf8)
        return bytes.withUnsafeBytes { raw in
            HotLine.get(raw).map { ($0.id, String(decoding: raw[$0.keyStart..<($0.keyStart + $0.keyCount)], as: UTF8.self)) }
        }
    }

    private func problem(_ line: String) -> String? {
        Array(line.utf8).withUnsafeBytes { RequestFuzzer.hotLineProblem($0) }
    }

    @Test(arguments: [
        (#"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k"}}"#, Int64(1), "k"),
        (#"{"method":"cache.get","params":{"key":"user:42"},"id":0,"jsonrpc":"2.0"}"#, 0, "user:42"),
        (" {\t\"jsonrpc\" : \"2.0\" , \"id\" : -17 ,\"method\":\"cache.get\", \"params\" : { \"key\" : \"a b\" } } \r", -17, "a b"),
        (#"{"jsonrpc":"2.0","id":999999999999999999,"method":"cache.get","params":{"key":"~!@#$%^&*()"}}"#,
         999_999_999_999_999_999, "~!@#$%^&*()"),
    ])
    func takesTheHotShape(line: String, id: Int64, key: String) throws {
        let read = try #require(hot(line))
        #expect(read.id == id)
        #expect(read.key == key)
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
        #"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"k"}}"#,
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
                if prefix.withUnsafeBytes({ HotLine.get($0) }) != nil { taken += 1 }
            }
        }
        #expect(taken >= 2)
    }
}

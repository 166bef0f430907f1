// The fuzz corpus (Fuzz/corpus: the requests of Docs/PROTOCOL.md, plus inputs the fuzzer
// found interesting) replayed through the same checks the fuzzer applies.

import Foundation
import HalcyonFuzzing
import Testing

@Suite(.timeLimit(.minutes(1)))
struct FuzzCorpusTests {
    @Test func corpusRepliesAreWellFormed() throws {
        // Tests/HalcyonRPCTests/FuzzCorpusTests.swift -> the package root.
        let corpus = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/corpus")
        let files = try FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)
        #expect(files.count >= 20, "the corpus at \(corpus.path) is missing")
        let fuzzer = RequestFuzzer()
        defer { fuzzer.removeFolder() }
        for file in files.sorted(by: { $0.path < $1.path }) {
            let data = try Data(contentsOf: file)
            let problem = data.withUnsafeBytes { fuzzer.check($0) }
            #expect(problem == nil, "\(file.lastPathComponent): \(problem ?? "")")
        }
    }

    @Test func checkCatchesAMalformedReply() {
        #expect(RequestFuzzer.problem(in: Array(#"{"jsonrpc":"2.0","id":1}"#.utf8)) != nil)
        #expect(RequestFuzzer.problem(in: Array(#"{"jsonrpc":"2.0","id":1,"result":{}}"#.utf8)) == nil)
    }
}

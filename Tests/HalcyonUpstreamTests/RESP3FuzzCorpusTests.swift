// The RESP3 fuzz corpus (Fuzz/resp3-corpus: one sample of each type and reply shape, plus
// inputs the fuzzer found interesting) replayed through the fuzzer's own checks.

import Foundation
import HalcyonUpstreamFuzzing
import Testing

@Suite(.timeLimit(.minutes(1)))
struct RESP3FuzzCorpusTests {
    @Test func corpusPassesTheFuzzChecks() throws {
        let corpus = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/resp3-corpus")
        let files = try FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)
        #expect(files.count >= 30, "the corpus at \(corpus.path) is missing")
        let fuzzer = RESP3Fuzzer()
        for file in files.sorted(by: { $0.path < $1.path }) {
            let data = try Data(contentsOf: file)
            let problem = data.withUnsafeBytes { fuzzer.check($0) }
            #expect(problem == nil, "\(file.lastPathComponent): \(problem ?? "")")
        }
    }
}

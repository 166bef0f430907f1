// The scanner's differential fuzz corpus (Fuzz/scanner-corpus: hot request lines and the
// near-misses the scanner must leave to jansson) replayed through the fuzzer's check.

import Foundation
import HalcyonScannerFuzzing
import HalcyonJSON
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ScannerFuzzCorpusTests {
    @Test func corpusAgreesWithJansson() throws {
        // Tests/HalcyonJSONTests/ScannerFuzzCorpusTests.swift -> the package root.
        let corpus = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/scanner-corpus")
        let files = try FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)
        #expect(files.count >= 40, "the corpus at \(corpus.path) is missing")
        let fuzzer = ScannerFuzzer()
        for file in files.sorted(by: { $0.path < $1.path }) {
            let data = try Data(contentsOf: file)
            let problem = data.withUnsafeBytes { fuzzer.check($0) }
            #expect(problem == nil, "\(file.lastPathComponent): \(problem ?? "")")
        }
        // Both paths are exercised: hot lines taken, near-misses deferred.
        #expect(fuzzer.scanned >= 10)
        #expect(fuzzer.deferred >= 20)
    }

    @Test func checkCatchesADisagreement() throws {
        func scanned(_ text: String) throws -> FlatJSON {
            guard case .parsed(let document) = Array(text.utf8).withUnsafeBytes({ JSONScanner.scan($0) }) else {
                throw CancellationError()
            }
            return document
        }
        let one = try scanned(#"{"id":1}"#)
        #expect(ScannerFuzzer.disagreement(one, jansson: JSONValue.parse(#"{"id":1.0}"#)) != nil)
        #expect(ScannerFuzzer.disagreement(try scanned(#"{"a":1,"b":2}"#),
                                           jansson: JSONValue.parse(#"{"b":2,"a":1}"#)) != nil)
        #expect(ScannerFuzzer.disagreement(one, jansson: JSONValue.parse(#"{"id":1"#)) != nil)
        #expect(ScannerFuzzer.disagreement(one, jansson: JSONValue.parse(#"{"id":1}"#)) == nil)
    }
}

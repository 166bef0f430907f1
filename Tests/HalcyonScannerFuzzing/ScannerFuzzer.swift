// The differential check between the hot-path scanner and jansson: for any input, the
// scanner either defers or builds exactly the tree `json_loadb` builds, member order
// included. Shared by the libFuzzer entry point (halcyon-scanner-fuzz) and the corpus
// replay test.

import HalcyonJSON
import Synchronization

/// Checks fuzz inputs against both parsers and counts how many the scanner took.
///
/// Threading: thread-safe; the counters are atomics and the check keeps no other state.
public final class ScannerFuzzer: Sendable {
    private let scannedCount = Atomic<Int>(0)
    private let deferredCount = Atomic<Int>(0)

    public init() {}

    /// Inputs the scanner parsed itself.
    public var scanned: Int { scannedCount.load(ordering: .relaxed) }
    /// Inputs the scanner left to jansson.
    public var deferred: Int { deferredCount.load(ordering: .relaxed) }

    /// - Returns: nil when the scanner deferred or agreed with jansson, else the disagreement.
    public func check(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard case .parsed(let ours) = JSONScanner.scan(bytes) else {
            deferredCount.add(1, ordering: .relaxed)
            return nil
        }
        scannedCount.add(1, ordering: .relaxed)
        return Self.disagreement(ours, jansson: JSONValue.parse(bytes))
    }

    /// What differs between the scanner's tree and jansson's outcome for the same text.
    public static func disagreement(_ ours: JSONValue, jansson: Result<JSONValue, JSONParseError>) -> String? {
        switch jansson {
        case .failure(let error):
            return "the scanner accepted \(ours.compactText), jansson refused it: \(error.message)"
        case .success(let theirs):
            // json_equal compares types and values (1 and 1.0 differ); the serialisation
            // compares member order as well.
            guard ours == theirs, ours.serializedCompact() == theirs.serializedCompact() else {
                return "the scanner built \(ours.compactText), jansson \(theirs.compactText)"
            }
            return nil
        }
    }
}

// The differential check between the hot-path scanner and jansson: for any input, the
// scanner either defers or gives a document that reads, accessor by accessor, as the tree
// `json_loadb` builds, member order and lookups by name included. Shared by the libFuzzer entry point (halcyon-scanner-fuzz) and the corpus
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

    /// What differs between the scanner's document and jansson's outcome for the same text.
    public static func disagreement(_ ours: FlatJSON, jansson: Result<JSONValue, JSONParseError>) -> String? {
        let built = ours.tree
        switch jansson {
        case .failure(let error):
            return "the scanner accepted \(built.compactText), jansson refused it: \(error.message)"
        case .success(let theirs):
            // json_equal compares types and values (1 and 1.0 differ); the serialisation
            // compares member order as well.
            guard built == theirs, built.serializedCompact() == theirs.serializedCompact() else {
                return "the scanner built \(built.compactText), jansson \(theirs.compactText)"
            }
            // The tree above is built through the same accessors; reading both side by side
            // also checks lookups by name and what a reader of a missing member sees.
            return withExtendedLifetime((ours, theirs)) {
                difference(ours.root, theirs.view, at: "$").map { "\($0) in \(theirs.compactText)" }
            }
        }
    }

    /// The first accessor on which `flat` and `tree` differ, with its path; nil when none does.
    static func difference(_ flat: JSONView, _ tree: JSONView, at path: String) -> String? {
        guard flat.kind == tree.kind else { return "\(path): kind \(flat.kind) against \(tree.kind)" }
        guard flat.isObject == tree.isObject, flat.isString == tree.isString, flat.isNull == tree.isNull,
              flat.isArray == tree.isArray else { return "\(path): a kind test differs" }
        guard flat.count == tree.count else { return "\(path): count \(flat.count) against \(tree.count)" }
        guard flat.int64 == tree.int64, flat.double == tree.double, flat.bool == tree.bool else {
            return "\(path): the scalar differs"
        }
        guard flat.stringByteCount == tree.stringByteCount,
              flat.withStringBytes({ [UInt8]($0) }) == tree.withStringBytes({ [UInt8]($0) }) else {
            return "\(path): the string differs"
        }
        guard flat.serializedCompact() == tree.serializedCompact() else { return "\(path): serialisation differs" }
        var names: [[UInt8]] = []
        var problem: String?
        tree.forEachMember { name, _ in names.append([UInt8](name)); return true }
        var index = 0
        flat.forEachMember { name, _ in
            guard index < names.count, [UInt8](name) == names[index] else {
                problem = "\(path): member \(index) is named differently"
                return false
            }
            index += 1
            return true
        }
        if let problem { return problem }
        guard index == names.count else { return "\(path): \(index) members against \(names.count)" }
        for name in names {
            let text = String(decoding: name, as: UTF8.self)
            guard let ours = name.withUnsafeBytes({ flat.member($0) }), let theirs = tree[text],
                  let byString = flat[text] else {
                return "\(path): member '\(text)' is not found by name"
            }
            guard byString.kind == ours.kind, byString.serializedCompact() == ours.serializedCompact() else {
                return "\(path): looking '\(text)' up by String and by bytes differ"
            }
            if let inner = difference(ours, theirs, at: "\(path).\(text)") { return inner }
        }
        // A name no member has is absent in both.
        let absent = "\u{1}absent" + String(names.count)
        guard flat[absent] == nil, tree[absent] == nil else { return "\(path): an absent member is found" }
        return nil
    }
}

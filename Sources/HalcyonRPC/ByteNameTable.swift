// Names looked up by the bytes of a request, without making a `String`: the method table's
// names and each method's param names.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fixed list of names, found by their UTF-8 bytes. A name is compared in place with
/// the few names of its own length only, so a lookup costs no hash and no allocation
/// (the request path looks up a method and each member of its params once per request).
///
/// Threading: immutable; any thread.
struct ByteNameTable: Sendable {
    /// The names' bytes by byte length, each with its position in the list given.
    private let byLength: [[(bytes: [UInt8], index: Int)]]

    init(_ names: [String]) {
        var table: [[(bytes: [UInt8], index: Int)]] = []
        for (index, name) in names.enumerated() {
            let bytes = Array(name.utf8)
            while table.count <= bytes.count { table.append([]) }
            table[bytes.count].append((bytes, index))
        }
        byLength = table
    }

    /// The position, in the list given, of the name `bytes` spell exactly; nil for none.
    func index(of bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count < byLength.count else { return nil }
        let candidates = byLength[bytes.count]
        // Empty bytes have no address to compare: they spell the empty name, if it is listed.
        guard bytes.count > 0, let base = bytes.baseAddress else { return candidates.first?.index }
        for candidate in candidates {
            let same = candidate.bytes.withUnsafeBytes { memcmp($0.baseAddress!, base, bytes.count) == 0 }
            if same { return candidate.index }
        }
        return nil
    }
}

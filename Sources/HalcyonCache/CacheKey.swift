// What a key is: its UTF-8 bytes, compared, hashed, ordered and prefix-matched byte for
// byte. Every table of every layer is keyed by this type, so no layer can merge two keys
// that another keeps apart.

import Foundation

/// A cache key: a byte string, as PROTOCOL §4 defines a key. Also a key prefix, and a
/// cache file's name wherever names are compared (with plain file names a name is its key).
///
/// Two keys are one key exactly when their UTF-8 bytes are equal. Swift's `String` is the
/// wrong key for a table: its `==`, hash and `<` follow Unicode canonical equivalence, so
/// `"caf\u{E9}"` and `"cafe\u{301}"`, `"\u{212B}"` and `"\u{C5}"`, or precomposed and
/// conjoining Hangul are one `String` and two keys to the disk tier (a SHA-256 of the
/// bytes), the journal and Redis. `String.hasPrefix` compares characters, not bytes, so
/// `"cafe\u{301}"` does not start with `"cafe"` as a `String` and does as a key. No key
/// is ever normalized.
///
/// ```swift
/// let composed: CacheKey = "caf\u{E9}"
/// let decomposed: CacheKey = "cafe\u{301}"
/// composed == decomposed                       // false: the bytes differ
/// decomposed.hasPrefix("cafe")                 // true: a byte prefix
/// ```
///
/// The bytes live in a native `String` used only as a byte container: a native string on
/// Linux holds its UTF-8 contiguously, up to 15 bytes inline with no allocation, which is
/// most keys; a key made from a request's JSON string or a journal record is one copy of
/// the bytes, and printing it or writing it into JSON needs no conversion. Nothing here
/// uses `String`'s own comparison or hashing. Every byte sequence a key is made of is
/// valid UTF-8 (the wire and the journal hold nothing else); `init(utf8:)` repairs
/// invalid input as `String(decoding:as:)` does.
///
/// Threading: a value; any thread.
public struct CacheKey: Sendable, Hashable, Comparable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The bytes, in a native string. Read through `utf8` and `string` only.
    @usableFromInline let storage: String

    /// The key whose bytes are `text`'s UTF-8, as they are (not normalized).
    @inlinable public init(_ text: String) {
        var text = text
        text.makeContiguousUTF8()
        storage = text
    }

    /// The key whose bytes are `bytes` (repaired as `String(decoding:as:)` repairs, if not UTF-8).
    @inlinable public init(utf8 bytes: UnsafeRawBufferPointer) {
        storage = String(decoding: bytes, as: UTF8.self)
    }

    /// The key whose bytes are `bytes` (repaired as `String(decoding:as:)` repairs, if not UTF-8).
    @inlinable public init<Bytes: Collection>(utf8 bytes: Bytes) where Bytes.Element == UInt8 {
        storage = String(decoding: bytes, as: UTF8.self)
    }

    @inlinable public init(stringLiteral text: String) {
        self.init(text)
    }

    /// `"user:\(id)"`: the key of the interpolated text's UTF-8.
    @inlinable public init(stringInterpolation: DefaultStringInterpolation) {
        self.init(String(stringInterpolation: stringInterpolation))
    }

    /// The bytes.
    @inlinable public var utf8: String.UTF8View { storage.utf8 }

    /// The number of bytes.
    @inlinable public var count: Int { storage.utf8.count }

    /// True for the empty byte string (a prefix that every key has).
    @inlinable public var isEmpty: Bool { storage.utf8.isEmpty }

    /// The key as text, to print or to write into JSON. Never compare or hash it.
    @inlinable public var string: String { storage }

    public var description: String { storage }

    /// Calls `body` with the bytes in place.
    @inlinable public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let result = try storage.utf8.withContiguousStorageIfAvailable({ try body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        var copy = storage
        return try copy.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
    }

    /// Keys up to `shortKeyBytes` long, most of them, are compared byte by byte through
    /// `utf8`: reaching both keys' bytes in place (`withBytes` within `withBytes`) counted
    /// references on every compare, and a table lookup compares its key at least once.
    /// Longer keys are compared with `memcmp`, where the counts are small beside the compare.
    @usableFromInline static let shortKeyBytes = 32

    @inlinable public static func == (lhs: CacheKey, rhs: CacheKey) -> Bool {
        // Two identical representations hold the same bytes: a key of up to 15 bytes is
        // held inline, so a table's hit compares two words and no bytes. Representations
        // that differ may still hold equal bytes, which the byte compare below decides.
        if MemoryLayout<String>.size == 16,
           unsafeBitCast(lhs.storage, to: (UInt64, UInt64).self) == unsafeBitCast(rhs.storage, to: (UInt64, UInt64).self) {
            return true
        }
        let count = lhs.count
        guard count == rhs.count else { return false }
        if count <= shortKeyBytes { return lhs.storage.utf8.elementsEqual(rhs.storage.utf8) }
        return lhs.withBytes { a in rhs.withBytes { b in memcmp(a.baseAddress!, b.baseAddress!, count) == 0 } }
    }

    @inlinable public func hash(into hasher: inout Hasher) {
        withBytes { hasher.combine(bytes: $0) }
    }

    /// Byte-wise lexicographic order (which is the order of the code points, unnormalized).
    @inlinable public static func < (lhs: CacheKey, rhs: CacheKey) -> Bool {
        lhs.withBytes { a in
            rhs.withBytes { b in
                let common = Swift.min(a.count, b.count)
                let order = common == 0 ? 0 : memcmp(a.baseAddress!, b.baseAddress!, common)
                return order != 0 ? order < 0 : a.count < b.count
            }
        }
    }

    /// True when this key's bytes begin with all of `prefix`'s bytes.
    @inlinable public func hasPrefix(_ prefix: CacheKey) -> Bool {
        hasPrefix(prefix, from: 0)
    }

    /// True when this key's bytes from `offset` (at most `count`) on begin with all of
    /// `prefix`'s bytes.
    @inlinable public func hasPrefix(_ prefix: CacheKey, from offset: Int) -> Bool {
        let length = prefix.count
        guard length <= count - offset else { return false }
        guard length > 0 else { return true }
        return withBytes { a in prefix.withBytes { b in memcmp(a.baseAddress! + offset, b.baseAddress!, length) == 0 } }
    }

    /// The key of this key's bytes followed by `suffix`'s.
    @inlinable public static func + (lhs: CacheKey, rhs: CacheKey) -> CacheKey {
        CacheKey(lhs.storage + rhs.storage)
    }
}

// What a key's namespace is: the bytes before its first U+001F, when they make a valid
// name. The one place that tells it, for the protocol layer (which builds stored keys
// with `cacheKey(_:in:)`) and for the storage engine (which keeps per-namespace accounts
// and quotas, `Quotas`). The storage engine knows no rules file: to it a namespace is a
// property of a key's bytes.

import Foundation

/// One keyspace of a daemon run with `--access`: the keys of its clients are stored as
/// `name` + U+001F + the key as sent.
///
/// Unambiguous: a name is letters, digits, `-`, `_` and `.` only (`isValidName`), so the
/// first U+001F of a stored key ends the namespace and no two (namespace, key) pairs make
/// one stored key; a key of the wire may hold U+001F itself, which only ever follows the
/// separator. U+001F is not a safe plain file name, so the daemon refuses `--access`
/// together with `--no-hashed-file-names`: stored keys are always hashed into file names.
///
/// Threading: a value; any thread.
public struct Namespace: Sendable, Hashable, CustomStringConvertible {
    /// The namespace's name, as the rules file and `server.info` spell it.
    public let name: String
    /// The bytes every stored key of the namespace begins with: the name and the separator.
    public let prefix: CacheKey

    /// The byte between a namespace's name and a key (U+001F, the ASCII unit separator).
    public static let separator: UInt8 = 0x1F

    /// The longest namespace name, in bytes.
    public static let maxNameBytes = 64

    /// The namespace called `name`; nil when `name` is not a valid name.
    public init?(_ name: String) {
        guard Self.isValidName(name) else { return nil }
        self.name = name
        prefix = CacheKey(utf8: Array(name.utf8) + [Self.separator])
    }

    /// True for a name of 1 to `maxNameBytes` bytes of ASCII letters, digits, `-`, `_`, `.`.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= maxNameBytes else { return false }
        return bytes.allSatisfy(isNameByte)
    }

    @inlinable public static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "A") ... UInt8(ascii: "Z"),
             UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
            return true
        default:
            return false
        }
    }

    /// The stored key of `wire` (a key or a key prefix as a client sent it) in
    /// `namespace`; `wire` itself when there is no namespace. Every key and prefix of the
    /// protocol layer reaches the storage engine through this one function.
    @inlinable public static func cacheKey(_ wire: CacheKey, in namespace: Namespace?) -> CacheKey {
        guard let namespace else { return wire }
        return namespace.prefix + wire
    }

    /// A stored key of this namespace as its clients know it (without the prefix). The
    /// caller listed it under `prefix`, so it begins with it.
    public func wireKey(_ stored: CacheKey) -> CacheKey {
        CacheKey(utf8: stored.utf8.dropFirst(prefix.count))
    }

    public var description: String { name }
}

extension CacheKey {
    /// The namespace this stored key belongs to: the valid name before its first U+001F;
    /// nil for a key with none (tenancy off, or a key an admin stored in the whole keyspace).
    public var namespace: Namespace? {
        guard let length = namespacePrefixLength else { return nil }
        return Namespace(String(decoding: utf8.prefix(length - 1), as: UTF8.self))
    }

    /// The length of `namespace.prefix` (name and separator) at the start of this key, or
    /// nil when it begins with no namespace. Reads at most `Namespace.maxNameBytes + 1`
    /// bytes and allocates nothing.
    @inlinable public var namespacePrefixLength: Int? {
        withBytes { bytes -> Int? in
            let limit = Swift.min(bytes.count, Namespace.maxNameBytes + 1)
            var index = 0
            while index < limit {
                let byte = bytes[index]
                if byte == Namespace.separator { return index == 0 ? nil : index + 1 }
                guard Namespace.isNameByte(byte) else { return nil }
                index += 1
            }
            return nil
        }
    }

    /// The first `length` bytes (a namespace prefix, from `namespacePrefixLength`).
    @inlinable public func leading(_ length: Int) -> CacheKey {
        withBytes { CacheKey(utf8: UnsafeRawBufferPointer(rebasing: $0.prefix(length))) }
    }
}

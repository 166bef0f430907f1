// Tenancy in the protocol layer: a namespace is a keyspace of its own, made by putting the
// namespace's name and a separator byte in front of every key of the wire, and the rights
// a connection holds. The daemon resolves both once per connection (`ConnectionAccess`);
// the dispatcher checks rights from the method table and maps every key through
// `KeyNamespace.cacheKey` (Docs/PROTOCOL.md §4, "Namespaces").

import HalcyonCache

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
public struct KeyNamespace: Sendable, Equatable, CustomStringConvertible {
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
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "A") ... UInt8(ascii: "Z"),
                 UInt8(ascii: "0") ... UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                return true
            default:
                return false
            }
        }
    }

    /// The stored key of `wire` (a key or a key prefix as a client sent it) in
    /// `namespace`; `wire` itself when there is no namespace. Every key and prefix of the
    /// protocol layer reaches the storage engine through this one function.
    @inlinable public static func cacheKey(_ wire: CacheKey, in namespace: KeyNamespace?) -> CacheKey {
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

/// What a connection may do: `read`, `write`, `admin` (a rules line's RIGHTS).
public struct AccessRights: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Read keys of its namespace (the `read` methods of the table).
    public static let read = AccessRights(rawValue: 1 << 0)
    /// Change keys of its namespace (the `write` methods of the table).
    public static let write = AccessRights(rawValue: 1 << 1)
    /// The whole-cache methods (stats, metrics, maintenance) and the `namespace` param.
    public static let admin = AccessRights(rawValue: 1 << 2)

    /// Each right with its name, in the order the wire lists them.
    public static let named: [(right: AccessRights, name: String)] = [(.read, "read"), (.write, "write"), (.admin, "admin")]

    /// The names of the rights held, in `named` order.
    public var names: [String] { Self.named.filter { contains($0.right) }.map(\.name) }
}

/// Who a connection of a daemon run with `--access` is: its namespace and rights, resolved
/// once when it is accepted, from the rule its peer credentials matched. A daemon without
/// `--access` gives its connections none (`ConnectionSession.access` nil) and behaves as
/// it always did.
///
/// Threading: immutable; any thread.
public struct ConnectionAccess: Sendable, Equatable {
    /// The keyspace the connection's key methods act in; nil for the whole keyspace, a
    /// daemon's without `--access` (an admin rule with the namespace `*`).
    public let namespace: KeyNamespace?
    public let rights: AccessRights

    public init(namespace: KeyNamespace?, rights: AccessRights) {
        self.namespace = namespace
        self.rights = rights
    }

    /// Refuses a method whose table flags need a right the connection lacks: `admin` for
    /// an `admin` or `debug` line (a debug method can hold the whole cache's queue), else
    /// `write` for a `write` line, `read` for a `read` line.
    func permit(_ flags: MethodFlags) throws(RPCError) {
        if flags.contains(.admin) || flags.contains(.debug) {
            if !rights.contains(.admin) { throw .notPermitted(right: "admin") }
        } else if flags.contains(.write) {
            if !rights.contains(.write) { throw .notPermitted(right: "write") }
        } else if flags.contains(.read) {
            if !rights.contains(.read) { throw .notPermitted(right: "read") }
        }
    }

    /// The namespace a request of a `keyspace` line acts in: the connection's, or the one
    /// its `namespace` param names (admins only).
    func namespace(for params: Params) throws(RPCError) -> KeyNamespace? {
        guard let named = try params.string("namespace") else { return namespace }
        guard rights.contains(.admin) else { throw .notPermitted(right: "admin") }
        guard let other = KeyNamespace(named) else {
            throw .invalidParams(reason: .invalidNamespace, param: "namespace",
                                 message: "'namespace' must be 1 to \(KeyNamespace.maxNameBytes) letters, digits, '-', '_' or '.'")
        }
        return other
    }
}

// Tenancy in the protocol layer: a namespace is a keyspace of its own, made by putting the
// namespace's name and a separator byte in front of every key of the wire, and the rights
// a connection holds. The daemon resolves both once per connection (`ConnectionAccess`);
// the dispatcher checks rights from the method table and maps every key through
// `KeyNamespace.cacheKey` (Docs/PROTOCOL.md §4, "Namespaces").

import HalcyonCache

/// A namespace as the protocol layer names it; the type and its encoding live with the
/// storage engine, which tells a stored key's namespace from its bytes (`CacheKey.namespace`).
public typealias KeyNamespace = Namespace

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

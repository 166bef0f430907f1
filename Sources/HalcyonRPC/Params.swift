// Typed, strict access to a request's params object. Every getter throws a -32602
// with a stable reason and `data.param`, so a client learns exactly what was wrong.

import Foundation
import HalcyonCache
import HalcyonJSON
import HalcyonSupport

/// A request's params object, checked against the names its method takes.
///
/// Rules shared by every getter: an absent member and a member set to JSON `null`
/// are the same (the getter returns nil, or its default); a present member of the
/// wrong JSON type is `wrongType`, never silently ignored. Integers must be JSON
/// integers (`5`, not `5.0`); doubles accept both.
///
/// Lookups read the parsed tree in place (`JSONView`): no object per member, and a member
/// name is never copied into a `String` to be checked.
///
/// Threading: immutable; any thread.
public struct Params: Sendable {
    /// The params object with the owner of its tree; nil when the request had none.
    public let node: JSONNode?

    /// The params object, valid while this `Params` lives; nil when the request had none.
    @inlinable public var object: JSONView? { node?.view }

    /// The dispatcher's rules the getters apply (`Params.Rules`): one object, so a copy of
    /// the params counts one reference for them. Default: every key, no size limits.
    public var rules = Rules.none

    /// Which keys `key(_:)` accepts beyond their length: the cache's own rule, so a key the
    /// disk tier cannot name a file with (`--no-hashed-file-names`) is refused before
    /// anything runs.
    public var keyRule: DiskStorage.KeyRule { rules.keyRule }

    /// The tiers' size limits a stored entry is held to (`checkEntrySize`).
    public var entryLimits: EntrySizeLimits { rules.entryLimits }

    /// The namespace whose keyspace `key(_:)`, `keyPrefix(_:)` and the multi-key methods'
    /// keys are in (`KeyNamespace.cacheKey`): the dispatcher sets the connection's under
    /// `--access`. Default: none, the keys as sent.
    public var namespace: KeyNamespace?

    /// Bit `n % 64` is set when some member's name is `n` UTF-8 bytes long (every bit when
    /// the names were not walked). A method reads many optional members that are mostly
    /// absent (a get reads seven names of a one-member object): a name whose length no
    /// member has is known absent without jansson hashing it.
    private let memberNameLengths: UInt64

    /// Wraps `params`, rejecting any member whose name is not in `allowed`
    /// (`unknownParam`), so a typo does not silently fall back to a default.
    /// `alsoAllowed` is one more name accepted beside `allowed` (the `namespace` param of
    /// key methods under `--access`); `rules` are the dispatcher's.
    public init(
        node params: JSONNode?, allowed: ParamNames, alsoAllowed: ParamNames? = nil,
        rules: Rules = .none
    ) throws(RPCError) {
        let lengths = try Self.memberNameLengths(of: params, allowed: allowed, alsoAllowed: alsoAllowed)
        self.init(checked: params, memberNameLengths: lengths, rules: rules)
    }

    /// Params whose member names `memberNameLengths(of:allowed:alsoAllowed:)` checked.
    /// Not throwing: a throwing initialiser builds its value aside and copies it out, a
    /// counted reference for each object it holds (the dispatcher's `prepare` makes one
    /// per request).
    init(checked params: JSONNode?, memberNameLengths: UInt64, rules: Rules, namespace: KeyNamespace? = nil) {
        self.node = params
        self.memberNameLengths = memberNameLengths
        self.rules = rules
        self.namespace = namespace
    }

    /// The `memberNameLengths` of `params`, after checking that it is an object
    /// (`positionalParams`) whose every member is named in `allowed` or `alsoAllowed`
    /// (`unknownParam`); 0 for none.
    static func memberNameLengths(
        of params: JSONNode?, allowed: ParamNames, alsoAllowed: ParamNames?
    ) throws(RPCError) -> UInt64 {
        guard let params else { return 0 }
        let view = params.view
        guard view.isObject else { throw .positionalParams }
        var unknown: UnsafeRawBufferPointer?
        var lengths: UInt64 = 0
        withExtendedLifetime(params) {
            view.forEachMember { name, _ in
                guard allowed.contains(name) || alsoAllowed?.contains(name) == true else { unknown = name; return false }
                lengths |= 1 &<< UInt64(name.count & 63)
                return true
            }
        }
        // Only the refusal pays for a String.
        if let unknown {
            let name = withExtendedLifetime(params) { String(decoding: unknown, as: UTF8.self) }
            throw .unknownParam(name)
        }
        return lengths
    }

    /// Wraps `params`, rejecting any member whose name is not in `allowed` (tests, tools).
    public init(_ params: JSONValue?, allowed: Set<String>) throws(RPCError) {
        try self.init(node: params.map(JSONNode.init), allowed: ParamNames(allowed.sorted()))
    }

    /// Wraps `params` without checking member names.
    public init(unchecked params: JSONValue?) {
        node = params.map(JSONNode.init)
        memberNameLengths = ~0
    }

    /// False when no member can be named `name` (see `memberNameLengths`).
    @inline(__always) func mayHold(_ name: String) -> Bool {
        memberNameLengths & (1 &<< UInt64(name.utf8.count & 63)) != 0
    }

    /// The member `name`; nil when absent or null. Valid while this `Params` lives.
    public func value(_ name: String) -> JSONView? {
        guard mayHold(name), let member = object?[name], !member.isNull else { return nil }
        return member
    }

    /// The member `name`, which must be present and not null (`missingParam`).
    public func require(_ name: String) throws(RPCError) -> JSONView {
        guard let member = value(name) else { throw .missingParam(name) }
        return member
    }

    // MARK: Scalars

    /// A required cache key: a non-empty string (`emptyKey`) of at most
    /// `Params.maxKeyBytes` UTF-8 bytes (`keyTooLong`) that `keyRule` accepts (`invalidKey`).
    /// The key is the string's bytes as sent, never normalized (`CacheKey`).
    public func key(_ name: String = "key") throws(RPCError) -> CacheKey {
        let member = try require(name)
        guard let length = member.stringByteCount else { throw .wrongType(name, expected: "string") }
        try Params.checkKeyLength(length, param: name)
        let key = member.withStringBytes { CacheKey(utf8: $0) } ?? ""
        guard keyRule.accepts(key) else { throw .invalidKey(param: name) }
        return KeyNamespace.cacheKey(key, in: namespace)
    }

    /// An optional key prefix in `namespace` (`""` when absent): the namespace's own
    /// prefix alone lists or removes the whole namespace.
    public func keyPrefix(_ name: String = "prefix") throws(RPCError) -> CacheKey? {
        guard let text = try string(name) else { return nil }
        return KeyNamespace.cacheKey(CacheKey(text), in: namespace)
    }

    /// `emptyKey` and `keyTooLong`, for a key of `length` UTF-8 bytes in member `param`.
    static func checkKeyLength(_ length: Int, param: String) throws(RPCError) {
        if length == 0 { throw .invalidParams(reason: .emptyKey, param: param, message: "'\(param)' must not be empty") }
        if length > Params.maxKeyBytes {
            var error = RPCError.invalidParams(reason: .keyTooLong, param: param,
                                               message: "'\(param)' is longer than \(Params.maxKeyBytes) UTF-8 bytes")
            error.data.append(.init("limit", .int(Int64(Params.maxKeyBytes))))
            throw error
        }
    }

    /// The longest key accepted, in UTF-8 bytes (Docs/PROTOCOL.md §4).
    public static let maxKeyBytes = 4096

    /// Refuses an entry no tier could keep, or larger than its namespace's memory quota when
    /// memory is all it goes to (`valueTooLarge`, naming `param`).
    public func checkEntrySize(key: CacheKey, valueBytes: Int, toDisk: Bool, param: String = "value") throws(RPCError) {
        if let (tier, limit, quota) = entryLimits.exceeded(key: key, valueBytes: valueBytes, toDisk: toDisk) {
            throw .valueTooLarge(param: param, tier: tier, limit: limit, quota: quota)
        }
    }

    /// An optional string.
    public func string(_ name: String) throws(RPCError) -> String? {
        guard let member = value(name) else { return nil }
        guard let text = member.string else { throw .wrongType(name, expected: "string") }
        return text
    }

    /// An optional boolean, or `default` when absent.
    public func bool(_ name: String, default defaultValue: Bool) throws(RPCError) -> Bool {
        try bool(name) ?? defaultValue
    }

    /// An optional boolean.
    public func bool(_ name: String) throws(RPCError) -> Bool? {
        guard let member = value(name) else { return nil }
        guard let flag = member.bool else { throw .wrongType(name, expected: "boolean") }
        return flag
    }

    /// An optional number (integer or real).
    public func double(_ name: String) throws(RPCError) -> Double? {
        guard let member = value(name) else { return nil }
        guard let number = member.double else { throw .wrongType(name, expected: "number") }
        return number
    }

    /// An optional integer; reals, even integral ones, are `wrongType`.
    public func int(_ name: String) throws(RPCError) -> Int? {
        guard let member = value(name) else { return nil }
        guard let number = member.int64 else { throw .wrongType(name, expected: "integer") }
        return Int(number)
    }

    /// An optional instant given as Unix seconds (fractions allowed).
    public func date(_ name: String) throws(RPCError) -> Date? {
        guard let seconds = try double(name) else { return nil }
        guard seconds >= 0, seconds <= Params.latestDate else {
            throw .invalidParams(reason: .outOfRange, param: name,
                                 message: "'\(name)' must be Unix seconds within 0...253402300799 (years 1970 to 9999)")
        }
        return Date(timeIntervalSince1970: seconds)
    }

    /// A required request id (for `$/cancelRequest`): a string, number or null.
    /// Here `null` is a value, not "absent": it names the request whose id was null.
    public func id(_ name: String = "id") throws(RPCError) -> RPCID {
        guard mayHold(name), let member = object?[name] else { throw .missingParam(name) }
        guard let id = RPCID(member) else { throw .wrongType(name, expected: "string, number or null") }
        return id
    }

    /// The bytes to store for the required member `name` sent in `encoding`
    /// (see `ValueEncoding.decode`): `missingParam`, `invalidValue`, `invalidBase64`.
    /// Unlike other members, `null` here is a value: the JSON `null` for `"json"`, and
    /// `invalidValue` for the string encodings.
    public func valueBytes(_ name: String = "value", encoding: ValueEncoding) throws(RPCError) -> [UInt8] {
        guard mayHold(name), let member = object?[name] else { throw .missingParam(name) }
        return try encoding.decode(member)
    }

    /// An optional value encoding (`invalidEncoding` for an unknown name).
    public func encoding(_ name: String = "encoding") throws(RPCError) -> ValueEncoding? {
        guard let text = try string(name) else { return nil }
        guard let encoding = ValueEncoding(rawValue: text) else {
            throw .invalidParams(reason: .invalidEncoding, param: name,
                                 message: "'\(name)' must be \"utf8\", \"base64\" or \"json\"")
        }
        return encoding
    }

    /// An optional callback-queue policy (`invalidCallbackQueue`).
    public func callbackQueuePolicy(_ name: String = "callbackQueue") throws(RPCError) -> CallbackQueuePolicy? {
        guard let member = value(name) else { return nil }
        return try CallbackQueuePolicy(member.owned, param: name)
    }
}

extension Params {
    /// The rules a dispatcher reads every request's params by, fixed at start.
    ///
    /// Threading: immutable; any thread.
    public final class Rules: Sendable {
        /// The keys the cache can name files with.
        public let keyRule: DiskStorage.KeyRule
        /// The tiers' size limits.
        public let entryLimits: EntrySizeLimits

        public init(keyRule: DiskStorage.KeyRule, entryLimits: EntrySizeLimits) {
            self.keyRule = keyRule
            self.entryLimits = entryLimits
        }

        /// Every key, no size limits.
        public static let none = Immortal.keep(Rules(keyRule: .anyKey, entryLimits: .none))
    }
}

/// The member names a method's params may hold, compared as bytes so that checking a
/// request's members copies none of them into a `String`.
///
/// Threading: immutable; any thread. A class: every request's params are checked against
/// its method's names, and a struct would count a reference to each of its arrays per
/// request; the method table's names are immortal (`MethodTable`), so that count writes
/// nothing.
public final class ParamNames: Sendable, ExpressibleByArrayLiteral {
    /// The names, in the order given.
    public let names: [String]
    private let table: ByteNameTable

    public init(_ names: [String]) {
        self.names = names
        table = ByteNameTable(names)
    }

    public convenience init(arrayLiteral names: String...) {
        self.init(names)
    }

    /// True when `name` is one of the names.
    public func contains(_ name: String) -> Bool { names.contains(name) }

    /// True when `bytes` spell one of the names exactly.
    public func contains(_ bytes: UnsafeRawBufferPointer) -> Bool { table.index(of: bytes) != nil }
}

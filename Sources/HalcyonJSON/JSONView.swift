// Borrowed, allocation-free access to a parsed tree: what the request path reads members
// through. A `JSONValue` is a class (one heap object per node handed out); a `JSONView`
// is a pointer in a struct, so looking up `params.key` costs a hash lookup in jansson's
// table and nothing else.

import CJansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A borrowed look at one node of a jansson tree that some `JSONValue` owns.
///
/// ```swift
/// let request = try JSONValue.parse(line).get()
/// withExtendedLifetime(request) {
///     let key = request.view["params"]?["key"]?.string   // no wrapper object per lookup
/// }
/// ```
///
/// Invariant: a view is valid only while an owner of its tree (the `JSONValue` it came
/// from, or one holding an ancestor) is alive; it holds no reference itself. Keep the
/// owner alive for as long as you use the view (`withExtendedLifetime`, or store both
/// side by side as `RPCRequest` does), and call `owned` to keep a node beyond that.
///
/// Threading: not `Sendable`; a view stays on the thread that holds its owner. The tree
/// itself is immutable (see `JSONValue`), so reading it needs no lock.
public struct JSONView {
    /// The node; borrowed from the tree's owner.
    @usableFromInline let raw: UnsafeMutablePointer<json_t>

    /// Wraps a node the caller keeps alive.
    @usableFromInline init(borrowing raw: UnsafeMutablePointer<json_t>) {
        self.raw = raw
    }

    /// A new owner of this node (one incref): use it to keep a member past its tree's owner.
    public var owned: JSONValue { JSONValue(borrowing: raw) }

    /// The JSON type of this node.
    public var kind: JSONValue.Kind { JSONValue.kindOf(raw) }

    @inlinable public var isObject: Bool { hc_json_is_object(raw) != 0 }
    @inlinable public var isArray: Bool { hc_json_is_array(raw) != 0 }
    @inlinable public var isString: Bool { hc_json_is_string(raw) != 0 }
    /// True for JSON `null`.
    @inlinable public var isNull: Bool { hc_json_is_null(raw) != 0 }

    /// The member `key` of an object; nil when absent or when this is not an object.
    @inlinable public subscript(key: String) -> JSONView? {
        guard hc_json_is_object(raw) != 0 else { return nil }
        // withCString, not the implicit String-to-pointer conversion, which builds a
        // heap copy (`utf8CString`) on every call; a small or native string is passed
        // in place.
        guard let child = key.withCString({ json_object_get(raw, $0) }) else { return nil }
        return JSONView(borrowing: child)
    }

    /// The member whose name is `key`'s bytes (no NUL terminator needed); nil when absent.
    @inlinable public func member(_ key: UnsafeRawBufferPointer) -> JSONView? {
        guard hc_json_is_object(raw) != 0, let base = key.baseAddress,
              let child = json_object_getn(raw, base.assumingMemoryBound(to: CChar.self), key.count) else { return nil }
        return JSONView(borrowing: child)
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    @inlinable public subscript(index: Int) -> JSONView? {
        guard index >= 0, hc_json_is_array(raw) != 0, let child = json_array_get(raw, index) else { return nil }
        return JSONView(borrowing: child)
    }

    /// The number of members of an object or elements of an array; 0 otherwise.
    @inlinable public var count: Int {
        if hc_json_is_object(raw) != 0 { return json_object_size(raw) }
        if hc_json_is_array(raw) != 0 { return json_array_size(raw) }
        return 0
    }

    /// A string's text (a new `String`: use `withStringBytes` or `stringEquals` where the
    /// bytes serve). JSON strings may hold U+0000, which is kept.
    public var string: String? {
        withStringBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with a string's UTF-8 bytes in place; nil when not a string.
    @inlinable public func withStringBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        guard hc_json_is_string(raw) != 0, let text = json_string_value(raw) else { return nil }
        return try body(UnsafeRawBufferPointer(start: text, count: json_string_length(raw)))
    }

    /// The length in UTF-8 bytes of a string; nil when not a string.
    @inlinable public var stringByteCount: Int? {
        guard hc_json_is_string(raw) != 0 else { return nil }
        return json_string_length(raw)
    }

    /// True when this is a string whose bytes are exactly `text`'s, compared in place.
    public func stringEquals(_ text: StaticString) -> Bool {
        guard hc_json_is_string(raw) != 0, let value = json_string_value(raw) else { return false }
        let length = json_string_length(raw)
        return length == text.utf8CodeUnitCount && memcmp(value, text.utf8Start, length) == 0
    }

    /// An integer's value; nil for reals (even integral ones) and other kinds.
    @inlinable public var int64: Int64? {
        guard hc_json_is_integer(raw) != 0 else { return nil }
        return json_integer_value(raw)
    }

    /// A number's value, integer or real.
    @inlinable public var double: Double? {
        guard hc_json_is_number(raw) != 0 else { return nil }
        return json_number_value(raw)
    }

    /// A boolean's value.
    @inlinable public var bool: Bool? {
        if hc_json_is_true(raw) != 0 { return true }
        if hc_json_is_false(raw) != 0 { return false }
        return nil
    }

    /// Calls `body` with each member's name (its UTF-8 bytes, in place) and value, in
    /// document order, until `body` returns false. Nothing when this is not an object.
    @inlinable public func forEachMember(_ body: (UnsafeRawBufferPointer, JSONView) throws -> Bool) rethrows {
        guard hc_json_is_object(raw) != 0 else { return }
        var iter = json_object_iter(raw)
        while let it = iter {
            if let name = json_object_iter_key(it), let child = json_object_iter_value(it) {
                let bytes = UnsafeRawBufferPointer(start: name, count: json_object_iter_key_len(it))
                guard try body(bytes, JSONView(borrowing: child)) else { return }
            }
            iter = json_object_iter_next(raw, it)
        }
    }

    /// The compact serialisation (no whitespace, members in document order); see
    /// `JSONValue.serializedCompact`.
    public func serializedCompact() -> [UInt8] {
        let flags = Int(JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER)
        let needed = json_dumpb(raw, nil, 0, flags)
        guard needed > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: needed) { buffer, initialized in
            initialized = buffer.baseAddress.map { base in
                base.withMemoryRebound(to: CChar.self, capacity: needed) { json_dumpb(raw, $0, needed, flags) }
            } ?? 0
        }
    }

    /// The first member of an object (name as a new `String`), for one-member forms such as
    /// `{"seconds": 5}`; nil when this is not an object or is empty.
    public var firstMember: (key: String, value: JSONView)? {
        var found: (key: String, value: JSONView)?
        forEachMember { name, value in
            found = (String(decoding: name, as: UTF8.self), value)
            return false
        }
        return found
    }
}

/// A node of a tree together with the owner that keeps the tree alive: a `JSONView` that
/// may be stored and sent, at the cost of one reference (no allocation).
///
/// Threading: `Sendable` for the reason `JSONValue` is: the tree is immutable and its
/// reference count atomic.
// @unchecked Sendable: `raw` points into `owner`'s immutable tree, which `owner` keeps alive.
public struct JSONNode: @unchecked Sendable {
    /// Keeps the tree alive; never read through.
    public let owner: JSONValue
    @usableFromInline let raw: UnsafeMutablePointer<json_t>

    /// The node `view` borrows from `owner`'s tree; the caller vouches that it does.
    public init(_ view: JSONView, in owner: JSONValue) {
        self.owner = owner
        self.raw = view.raw
    }

    /// A whole value as a node.
    public init(_ value: JSONValue) {
        self.owner = value
        self.raw = value.raw
    }

    /// The node as a view; valid while this `JSONNode` (or another owner) is alive.
    @inlinable public var view: JSONView { JSONView(borrowing: raw) }

    /// The node as a value of its own (one incref, one object).
    public var value: JSONValue { raw == owner.raw ? owner : JSONValue(borrowing: raw) }
}

extension JSONValue {
    /// A borrowed view of this value, valid while `self` is alive (see `JSONView`).
    @inlinable public var view: JSONView { JSONView(borrowing: raw) }

    /// The kind of any node (shared by `JSONValue` and `JSONView`).
    static func kindOf(_ raw: UnsafeMutablePointer<json_t>) -> Kind {
        switch json_type(UInt32(hc_json_typeof(raw))) {
        case JSON_OBJECT: return .object
        case JSON_ARRAY: return .array
        case JSON_STRING: return .string
        case JSON_INTEGER: return .integer
        case JSON_REAL: return .real
        case JSON_TRUE, JSON_FALSE: return .bool
        default: return .null
        }
    }
}

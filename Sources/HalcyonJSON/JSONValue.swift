// An immutable JSON value owned through jansson's reference count. Everything the
// daemon reads from a request line passes through this type.

import CJansson

/// One JSON value parsed (or built) by libjansson.
///
/// The class owns one reference to a `json_t` and gives it back in `deinit`. A value
/// is never mutated after it is created: this module exposes no mutating call, and
/// children are handed out as new owners of their own reference.
///
/// Threading: safe to use and share from any thread (immutable, atomic refcount). That
/// is why `@unchecked Sendable` holds: jansson 2.14 is built here with `JSON_HAVE_ATOMIC_BUILTINS 1`
/// (`jansson_config.h`), so `json_incref`/`json_decref` are `__atomic` operations, and
/// since jansson 2.11 `json_dump*` no longer marks values while encoding, so reads
/// and serialisations of one immutable tree from several threads do not race.
// @unchecked Sendable: immutable after init; jansson's refcount is atomic (no lock needed).
public final class JSONValue: @unchecked Sendable {
    /// The jansson node. Read-only after init; `deinit` releases our reference.
    @usableFromInline let raw: UnsafeMutablePointer<json_t>

    /// Takes over one reference (the caller's) to `raw`.
    @usableFromInline init(owning raw: UnsafeMutablePointer<json_t>) {
        self.raw = raw
    }

    /// Takes a new reference to a node borrowed from a parent.
    @usableFromInline convenience init(borrowing raw: UnsafeMutablePointer<json_t>) {
        self.init(owning: json_incref(raw))
    }

    deinit {
        json_decref(raw)
    }

    /// The JSON type of a value. Integers and reals stay apart, as jansson keeps them.
    public enum Kind: Sendable, Equatable {
        case object, array, string, integer, real, bool, null
    }

    /// The JSON type of this value.
    public var kind: Kind { JSONValue.kindOf(raw) }

    /// The member `key` of an object; nil when absent or when this is not an object.
    public subscript(key: String) -> JSONValue? {
        guard hc_json_is_object(raw) != 0, let child = key.withCString({ json_object_get(raw, $0) }) else { return nil }
        return JSONValue(borrowing: child)
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        guard index >= 0, hc_json_is_array(raw) != 0, let child = json_array_get(raw, index) else { return nil }
        return JSONValue(borrowing: child)
    }

    /// A string's text. JSON strings may hold U+0000, which is kept.
    public var string: String? {
        guard hc_json_is_string(raw) != 0, let text = json_string_value(raw) else { return nil }
        let length = json_string_length(raw)
        return text.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    /// A string's UTF-8 bytes (jansson only holds valid UTF-8), NULs included.
    public var stringBytes: [UInt8]? {
        guard hc_json_is_string(raw) != 0, let text = json_string_value(raw) else { return nil }
        let length = json_string_length(raw)
        return [UInt8](UnsafeRawBufferPointer(start: text, count: length))
    }

    /// Calls `body` with a string's UTF-8 bytes without copying them; nil when not a string.
    public func withStringBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        guard hc_json_is_string(raw) != 0, let text = json_string_value(raw) else { return nil }
        return try body(UnsafeRawBufferPointer(start: text, count: json_string_length(raw)))
    }

    /// An integer's value; nil for reals (even integral ones) and other kinds.
    public var int64: Int64? {
        guard hc_json_is_integer(raw) != 0 else { return nil }
        return json_integer_value(raw)
    }

    /// A number's value, integer or real.
    public var double: Double? {
        guard hc_json_is_number(raw) != 0 else { return nil }
        return json_number_value(raw)
    }

    /// A boolean's value.
    public var bool: Bool? {
        if hc_json_is_true(raw) != 0 { return true }
        if hc_json_is_false(raw) != 0 { return false }
        return nil
    }

    /// True for JSON `null`.
    public var isNull: Bool { hc_json_is_null(raw) != 0 }

    /// The number of members of an object or elements of an array; 0 otherwise.
    public var count: Int {
        if hc_json_is_object(raw) != 0 { return json_object_size(raw) }
        if hc_json_is_array(raw) != 0 { return json_array_size(raw) }
        return 0
    }

    /// An array's elements; nil when this is not an array.
    public var array: [JSONValue]? {
        guard hc_json_is_array(raw) != 0 else { return nil }
        let n = json_array_size(raw)
        var result: [JSONValue] = []
        result.reserveCapacity(n)
        for i in 0..<n {
            if let child = json_array_get(raw, i) { result.append(JSONValue(borrowing: child)) }
        }
        return result
    }

    /// An object's members in document order; empty when this is not an object.
    public var members: [(key: String, value: JSONValue)] {
        guard hc_json_is_object(raw) != 0 else { return [] }
        var result: [(key: String, value: JSONValue)] = []
        result.reserveCapacity(json_object_size(raw))
        var iter = json_object_iter(raw)
        while let it = iter {
            if let keyPointer = json_object_iter_key(it), let child = json_object_iter_value(it) {
                let length = json_object_iter_key_len(it)
                let key = keyPointer.withMemoryRebound(to: UInt8.self, capacity: length) {
                    String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
                }
                result.append((key, JSONValue(borrowing: child)))
            }
            iter = json_object_iter_next(raw, it)
        }
        return result
    }

    /// An object's member names in document order; empty when this is not an object.
    public var keys: [String] { members.map(\.key) }

    /// The compact serialisation (no whitespace, members in document order). This is the
    /// form a `"json"`-encoded value is stored in; it never holds a raw newline.
    public func serializedCompact() -> [UInt8] {
        withExtendedLifetime(self) { view.serializedCompact() }
    }

    /// `serializedCompact()` as a String, for logs and tests.
    public var compactText: String { String(decoding: serializedCompact(), as: UTF8.self) }
}

extension JSONValue: Equatable {
    /// Deep equality as jansson defines it: same kinds, same members in any order; an
    /// integer never equals a real.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        json_equal(lhs.raw, rhs.raw) != 0
    }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { compactText }
}

// Borrowed, allocation-free access to a parsed value: what the request path reads members
// through. A `JSONValue` is a class (one heap object per node handed out); a `JSONView`
// is a pointer in a struct. It reads either of the two forms a request line is parsed
// into: a jansson tree (`JSONValue`), or the scanner's flat table (`FlatJSON`), where
// looking up `params.key` compares a few names in place and hashes nothing.

import CJansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A borrowed look at one node of a parsed value that some owner keeps alive: a
/// `JSONValue` (a jansson tree) or a `FlatJSON` (the scanner's table).
///
/// ```swift
/// let request = try JSONValue.parse(line).get()
/// withExtendedLifetime(request) {
///     let key = request.view["params"]?["key"]?.string   // no wrapper object per lookup
/// }
/// ```
///
/// Both forms answer every accessor alike: the scanner's differential fuzz target checks
/// that a flat document reads as the tree jansson builds from the same text.
///
/// Invariant: a view is valid only while an owner of its value (the `JSONValue` or
/// `FlatJSON` it came from, or one holding an ancestor) is alive; it holds no reference
/// itself. Keep the owner alive for as long as you use the view (`withExtendedLifetime`,
/// or store both side by side as `JSONNode` does), and call `owned` to keep a node beyond that.
///
/// Threading: not `Sendable`; a view stays on the thread that holds its owner. Both forms
/// are immutable, so reading them needs no lock.
public struct JSONView {
    /// Which form the node lives in.
    @usableFromInline enum Storage {
        case tree(UnsafeMutablePointer<json_t>)
        case flat(FlatNodeRef)
    }

    @usableFromInline let storage: Storage

    /// Wraps a jansson node the caller keeps alive.
    @usableFromInline init(borrowing raw: UnsafeMutablePointer<json_t>) {
        storage = .tree(raw)
    }

    /// Wraps a node of a flat document the caller keeps alive.
    @usableFromInline init(flat: FlatNodeRef) {
        storage = .flat(flat)
    }

    /// A new owner of this node: one incref of a tree node; a flat node is built into the
    /// jansson tree its text parses to.
    public var owned: JSONValue {
        switch storage {
        case .tree(let raw): return JSONValue(borrowing: raw)
        case .flat(let flat):
            // Building fails only when jansson cannot allocate.
            guard let built = flat.makeTree() else { fatalError("jansson could not allocate a tree") }
            return JSONValue(owning: built)
        }
    }

    /// The JSON type of this node.
    public var kind: JSONValue.Kind {
        switch storage {
        case .tree(let raw): return JSONValue.kindOf(raw)
        case .flat(let flat):
            switch flat.node.kind {
            case .object: return .object
            case .string: return .string
            case .integer: return .integer
            case .true, .false: return .bool
            case .null: return .null
            }
        }
    }

    @inlinable public var isObject: Bool {
        switch storage {
        case .tree(let raw): return hc_json_is_object(raw) != 0
        case .flat(let flat): return flat.node.kind == .object
        }
    }

    /// The flat form has no arrays: the scanner leaves them to jansson.
    @inlinable public var isArray: Bool {
        switch storage {
        case .tree(let raw): return hc_json_is_array(raw) != 0
        case .flat: return false
        }
    }

    @inlinable public var isString: Bool {
        switch storage {
        case .tree(let raw): return hc_json_is_string(raw) != 0
        case .flat(let flat): return flat.node.kind == .string
        }
    }

    /// True for JSON `null`.
    @inlinable public var isNull: Bool {
        switch storage {
        case .tree(let raw): return hc_json_is_null(raw) != 0
        case .flat(let flat): return flat.node.kind == .null
        }
    }

    /// The member `key` of an object; nil when absent or when this is not an object.
    @inlinable public subscript(key: String) -> JSONView? {
        switch storage {
        case .tree(let raw):
            guard hc_json_is_object(raw) != 0 else { return nil }
            // withCString, not the implicit String-to-pointer conversion, which builds a
            // heap copy (`utf8CString`) on every call; a small or native string is passed
            // in place.
            guard let child = key.withCString({ json_object_get(raw, $0) }) else { return nil }
            return JSONView(borrowing: child)
        case .flat:
            var key = key
            return key.withUTF8 { member(UnsafeRawBufferPointer($0)) }
        }
    }

    /// The member whose name is `key`'s bytes (no NUL terminator needed); nil when absent.
    @inlinable public func member(_ key: UnsafeRawBufferPointer) -> JSONView? {
        switch storage {
        case .tree(let raw):
            guard hc_json_is_object(raw) != 0, let base = key.baseAddress,
                  let child = json_object_getn(raw, base.assumingMemoryBound(to: CChar.self), key.count) else { return nil }
            return JSONView(borrowing: child)
        case .flat(let flat):
            return flat.member(key).map(JSONView.init(flat:))
        }
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    @inlinable public subscript(index: Int) -> JSONView? {
        guard index >= 0, case .tree(let raw) = storage, hc_json_is_array(raw) != 0,
              let child = json_array_get(raw, index) else { return nil }
        return JSONView(borrowing: child)
    }

    /// The number of members of an object or elements of an array; 0 otherwise.
    @inlinable public var count: Int {
        switch storage {
        case .tree(let raw):
            if hc_json_is_object(raw) != 0 { return json_object_size(raw) }
            if hc_json_is_array(raw) != 0 { return json_array_size(raw) }
            return 0
        case .flat(let flat):
            return flat.node.kind == .object ? Int(flat.node.members) : 0
        }
    }

    /// A string's text (a new `String`: use `withStringBytes` or `stringEquals` where the
    /// bytes serve). JSON strings may hold U+0000, which is kept.
    public var string: String? {
        withStringBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with a string's UTF-8 bytes in place; nil when not a string.
    @inlinable public func withStringBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R? {
        switch storage {
        case .tree(let raw):
            guard hc_json_is_string(raw) != 0, let text = json_string_value(raw) else { return nil }
            return try body(UnsafeRawBufferPointer(start: text, count: json_string_length(raw)))
        case .flat(let flat):
            guard flat.node.kind == .string else { return nil }
            return try body(flat.contents)
        }
    }

    /// The length in UTF-8 bytes of a string; nil when not a string.
    @inlinable public var stringByteCount: Int? {
        switch storage {
        case .tree(let raw):
            guard hc_json_is_string(raw) != 0 else { return nil }
            return json_string_length(raw)
        case .flat(let flat):
            guard flat.node.kind == .string else { return nil }
            return Int(flat.node.count)
        }
    }

    /// True when this is a string whose bytes are exactly `text`'s, compared in place.
    public func stringEquals(_ text: StaticString) -> Bool {
        withStringBytes { bytes in
            bytes.count == text.utf8CodeUnitCount
                && (bytes.count == 0 || memcmp(bytes.baseAddress!, text.utf8Start, bytes.count) == 0)
        } ?? false
    }

    /// An integer's value; nil for reals (even integral ones) and other kinds.
    @inlinable public var int64: Int64? {
        switch storage {
        case .tree(let raw):
            guard hc_json_is_integer(raw) != 0 else { return nil }
            return json_integer_value(raw)
        case .flat(let flat):
            guard flat.node.kind == .integer else { return nil }
            return flat.node.integer
        }
    }

    /// A number's value, integer or real (the flat form holds only integers; jansson
    /// converts an integer to a double the same way).
    @inlinable public var double: Double? {
        switch storage {
        case .tree(let raw):
            guard hc_json_is_number(raw) != 0 else { return nil }
            return json_number_value(raw)
        case .flat(let flat):
            guard flat.node.kind == .integer else { return nil }
            return Double(flat.node.integer)
        }
    }

    /// A boolean's value.
    @inlinable public var bool: Bool? {
        switch storage {
        case .tree(let raw):
            if hc_json_is_true(raw) != 0 { return true }
            if hc_json_is_false(raw) != 0 { return false }
            return nil
        case .flat(let flat):
            switch flat.node.kind {
            case .true: return true
            case .false: return false
            default: return nil
            }
        }
    }

    /// Calls `body` with each member's name (its UTF-8 bytes, in place) and value, in
    /// document order, until `body` returns false. Nothing when this is not an object.
    @inlinable public func forEachMember(_ body: (UnsafeRawBufferPointer, JSONView) throws -> Bool) rethrows {
        switch storage {
        case .tree(let raw):
            guard hc_json_is_object(raw) != 0 else { return }
            var iter = json_object_iter(raw)
            while let it = iter {
                if let name = json_object_iter_key(it), let child = json_object_iter_value(it) {
                    let bytes = UnsafeRawBufferPointer(start: name, count: json_object_iter_key_len(it))
                    guard try body(bytes, JSONView(borrowing: child)) else { return }
                }
                iter = json_object_iter_next(raw, it)
            }
        case .flat(let flat):
            try flat.forEachMember { member in try body(member.name, JSONView(flat: member)) }
        }
    }

    /// The compact serialisation (no whitespace, members in document order); see
    /// `JSONValue.serializedCompact`.
    public func serializedCompact() -> [UInt8] {
        switch storage {
        case .tree(let raw): return JSONView.serializedCompact(raw)
        case .flat:
            let tree = owned
            return withExtendedLifetime(tree) { JSONView.serializedCompact(tree.raw) }
        }
    }

    private static func serializedCompact(_ raw: UnsafeMutablePointer<json_t>) -> [UInt8] {
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

/// A node together with the owner that keeps it alive: a `JSONView` that may be stored and
/// sent, at the cost of one reference (no allocation).
///
/// Threading: `Sendable` because both owners are: their values are immutable and their
/// reference counts atomic.
// @unchecked Sendable: `storage` points into `owner`'s immutable value, which `owner` keeps alive.
public struct JSONNode: @unchecked Sendable {
    /// Keeps the value alive; never read through.
    public let owner: AnyObject & Sendable
    @usableFromInline let storage: JSONView.Storage

    /// The node `view` borrows from `owner`; the caller vouches that it does.
    public init(_ view: JSONView, in owner: AnyObject & Sendable) {
        self.owner = owner
        self.storage = view.storage
    }

    /// A whole value as a node.
    public init(_ value: JSONValue) {
        self.owner = value
        self.storage = .tree(value.raw)
    }

    /// The node as a view; valid while this `JSONNode` (or another owner) is alive.
    @inlinable public var view: JSONView {
        switch storage {
        case .tree(let raw): return JSONView(borrowing: raw)
        case .flat(let flat): return JSONView(flat: flat)
        }
    }

    /// The node as a value of its own (one incref and one object, or a tree built from a
    /// flat node).
    public var value: JSONValue {
        if case .tree(let raw) = storage, let tree = owner as? JSONValue, tree.raw == raw { return tree }
        return withExtendedLifetime(owner) { view.owned }
    }
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

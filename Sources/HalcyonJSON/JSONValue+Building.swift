// Building JSON values in Swift (tests, the CLI's `call` command, fixed replies).

import CJansson

extension JSONValue {
    /// JSON `null`.
    public static var null: JSONValue { JSONValue(owning: json_null()) }

    /// A boolean.
    public static func bool(_ value: Bool) -> JSONValue { JSONValue(owning: hc_json_boolean(value ? 1 : 0)) }

    /// An integer.
    public static func integer(_ value: Int64) -> JSONValue { JSONValue(owning: json_integer(value)) }

    /// A real; jansson refuses NaN and infinities, which become `null`.
    public static func real(_ value: Double) -> JSONValue {
        guard let node = json_real(value) else { return .null }
        return JSONValue(owning: node)
    }

    /// A string from any Swift String (NULs kept).
    public static func string(_ value: String) -> JSONValue {
        // withCString points at the whole UTF-8 storage; embedded NULs are kept because
        // the length is passed explicitly.
        let node = value.withCString { json_stringn_nocheck($0, value.utf8.count) }
        return JSONValue(owning: node!)
    }

    /// An array of values.
    public static func array(_ elements: [JSONValue]) -> JSONValue {
        let node = json_array()!
        for element in elements { json_array_append(node, element.raw) }
        return JSONValue(owning: node)
    }

    /// An object with members in the given order; a later duplicate name replaces an earlier one.
    public static func object(_ members: KeyValuePairs<String, JSONValue>) -> JSONValue {
        object(members.map { ($0.key, $0.value) })
    }

    /// An object with members in the given order; a later duplicate name replaces an earlier one.
    public static func object(_ members: [(String, JSONValue)]) -> JSONValue {
        let node = json_object()!
        for (key, value) in members {
            _ = key.withCString { json_object_setn(node, $0, key.utf8.count, value.raw) }
        }
        return JSONValue(owning: node)
    }
}

// Writes reply objects and lines straight into a JSONWriter.

import HalcyonJSON

/// Writes JSON-RPC 2.0 reply objects.
///
/// A reply written at depth 0 of the writer is a whole line and ends with `\n`; one
/// written inside `beginBatch`/`endBatch` is a batch element and gets no newline.
///
/// Threading: stateless; the writer passed in belongs to the caller's thread.
public enum RPCResponseWriter {
    /// Writes `{"jsonrpc":"2.0","id":…,"result":…}`; `result` writes exactly one value.
    ///
    /// If `result` throws, everything it wrote is rolled back and the error reply for
    /// the same id is written instead (e.g. `-32004 cannotEncode` discovered while
    /// writing the value), so the output is always well-formed.
    ///
    /// - Returns: the error that replaced the result, if any.
    @discardableResult
    public static func success(id: RPCID, into writer: inout JSONWriter,
                               result: (inout JSONWriter) throws(RPCError) -> Void) -> RPCError? {
        let mark = writer.mark
        let isLine = writer.depth == 0
        if case .number(let number) = id {
            // The common envelope in one append: the writer's calls would make six.
            writer.beginObject(upTo: 64) { line in
                line.put(#"{"jsonrpc":"2.0","id":"#)
                line.putDecimal(number)
                line.put(#","result":"#)
            }
        } else {
            writer.beginObject()
            writer.key("jsonrpc"); writer.string(static: "2.0")
            writer.key("id"); id.write(to: &writer)
            writer.key("result")
        }
        do {
            try result(&writer)
        } catch {
            writer.rollback(to: mark)
            self.error(id: id, error, into: &writer)
            return error
        }
        writer.endObject()
        if isLine { writer.newline() }
        return nil
    }

    /// Writes `{"jsonrpc":"2.0","id":…,"error":{…}}`; a nil id is written as `null`.
    public static func error(id: RPCID?, _ error: RPCError, into writer: inout JSONWriter) {
        let isLine = writer.depth == 0
        writer.beginObject()
        writer.key("jsonrpc"); writer.string(static: "2.0")
        writer.key("id"); (id ?? .null).write(to: &writer)
        writer.key("error"); error.write(to: &writer)
        writer.endObject()
        if isLine { writer.newline() }
    }

    /// Opens a batch reply line: `[`.
    public static func beginBatch(into writer: inout JSONWriter) {
        writer.beginArray()
    }

    /// Closes a batch reply line: `]\n`.
    public static func endBatch(into writer: inout JSONWriter) {
        writer.endArray()
        if writer.depth == 0 { writer.newline() }
    }

    /// Joins element replies written separately (each a reply object without newline,
    /// e.g. written on different threads) into one batch line `[a,b,…]\n`. Writes
    /// nothing when `elements` is empty: a batch of notifications gets no line.
    public static func batch(_ elements: [[UInt8]], into writer: inout JSONWriter) {
        guard !elements.isEmpty else { return }
        beginBatch(into: &writer)
        for element in elements { writer.raw(element) }
        endBatch(into: &writer)
    }

    /// The bytes of one batch element reply (no newline), for `batch(_:into:)`.
    public static func element(_ body: (inout JSONWriter) -> Void) -> [UInt8] {
        var writer = JSONWriter(capacity: 128)
        writer.beginArray()
        let start = writer.bytes.count
        body(&writer)
        return Array(writer.bytes[start...])
    }
}

import HalcyonCache
import HalcyonJSON
@testable import HalcyonRPC
import Testing

/// Helpers shared by the RPC test files.
enum Wire {
    static func parse(_ line: String, maxBatch: Int = 1000) -> RPCIncoming {
        RPCMessageParser.parse(line: line, maxBatch: maxBatch)
    }

    static func request(_ line: String) throws -> RPCRequest {
        guard case .single(.request(let r)) = parse(line) else {
            Issue.record("not a request: \(line)")
            throw RPCError.internalError(message: "test")
        }
        return r
    }

    static func invalid(_ line: String) -> (RPCID?, RPCError)? {
        guard case .single(.invalid(let id, let e)) = parse(line) else { return nil }
        return (id, e)
    }

    static func failure(_ line: String, maxBatch: Int = 1000) -> RPCError? {
        guard case .failure(let e) = parse(line, maxBatch: maxBatch) else { return nil }
        return e
    }

    static func json(_ writer: JSONWriter) throws -> JSONValue {
        try JSONValue.parse(writer.bytes).get()
    }
}

@Suite struct EnvelopeTests {
    @Test func requestWithEveryIdKind() throws {
        let r = try Wire.request(#"{"jsonrpc":"2.0","method":"cache.get","params":{"key":"a"},"id":7}"#)
        #expect(r.id == .number(7))
        #expect(r.method == "cache.get")
        #expect(r.params?["key"]?.string == "a")
        #expect(try Wire.request(#"{"jsonrpc":"2.0","method":"m","id":"x"}"#).id == .string("x"))
        #expect(try Wire.request(#"{"jsonrpc":"2.0","method":"m","id":null}"#).id == .null)
        #expect(try Wire.request(#"{"jsonrpc":"2.0","method":"m","id":1.5}"#).id == .fractional(1.5))
        #expect(try Wire.request(#"{"jsonrpc":"2.0","method":"m","id":1}"#).params == nil)
    }

    @Test func notificationHasNoId() throws {
        let r = try Wire.request(#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":3}}"#)
        #expect(r.isNotification)
        #expect(r.id == nil)
    }

    @Test func trailingCarriageReturnIsIgnored() throws {
        #expect(try Wire.request("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}\r").id == .number(1))
    }

    @Test func invalidJSONIsParseErrorWithNullId() {
        for (line, reason) in [("{", "invalidJSON"), (#"{"a":1,"a":2}"#, "duplicateKey"),
                               (String(repeating: "[", count: 100_000), "nestingTooDeep"),
                               (#"{"jsonrpc":"2.0","method":"m","id":99999999999999999999}"#, "numberOutOfRange"),
                               ("", "invalidJSON"), (#"{"jsonrpc":"2.0","method":"m""#, "invalidJSON")] {
            let e = Wire.failure(line)
            #expect(e?.code == -32700, "\(line.prefix(40))")
            #expect(e?.reason == reason, "\(line.prefix(40))")
        }
        let bad = RPCMessageParser.parse(line: [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D], maxBatch: 10)
        guard case .failure(let e) = bad else { Issue.record("expected failure"); return }
        #expect(e.code == -32700 && e.reason == "invalidUTF8")
    }

    @Test func nulInsideStringsIsFine() throws {
        let r = try Wire.request(#"{"jsonrpc":"2.0","method":"m","params":{"key":"a\u0000b"},"id":1}"#)
        #expect(r.params?["key"]?.stringBytes == [0x61, 0, 0x62])
    }

    @Test func nonObjectsAreInvalidRequests() {
        for line in ["1", #""x""#, "null", "true"] {
            let (id, e) = Wire.invalid(line) ?? (nil, .internalError(message: "none"))
            #expect(id == .null)
            #expect(e.code == -32600 && e.reason == "notAnObject")
        }
    }

    @Test func wrongOrMissingVersion() {
        for line in [#"{"method":"m","id":1}"#, #"{"jsonrpc":"1.0","method":"m","id":1}"#, #"{"jsonrpc":2.0,"method":"m","id":1}"#] {
            let result = Wire.invalid(line)
            #expect(result?.0 == .number(1))
            #expect(result?.1.reason == "invalidVersion")
        }
        // Without an id it is still answered, with id null.
        #expect(Wire.invalid(#"{"jsonrpc":"1.0","method":"m"}"#)?.0 == .null)
    }

    @Test func badMethod() {
        #expect(Wire.invalid(#"{"jsonrpc":"2.0","id":1}"#)?.1.reason == "missingMethod")
        let e = Wire.invalid(#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#)
        #expect(e?.0 == .null)
        #expect(e?.1.reason == "methodNotString")
    }

    @Test func badIdTypes() {
        for id in ["{}", "[]", "true", "false", #"{"a":1}"#] {
            let e = Wire.invalid(#"{"jsonrpc":"2.0","method":"m","id":"# + id + "}")
            #expect(e?.0 == .null)
            #expect(e?.1.code == -32600 && e?.1.reason == "invalidID")
        }
    }

    @Test func positionalParamsKeepTheIdAndSilenceNotifications() {
        let e = Wire.invalid(#"{"jsonrpc":"2.0","method":"m","params":[1,2],"id":"q"}"#)
        #expect(e?.0 == .string("q"))
        #expect(e?.1.code == -32602 && e?.1.reason == "positionalParams")
        let n = Wire.invalid(#"{"jsonrpc":"2.0","method":"m","params":[1]}"#)
        #expect(n != nil && n?.0 == nil)
    }

    @Test func scalarParamsAreInvalidRequests() {
        for p in ["1", #""x""#, "null", "true"] {
            let e = Wire.invalid(#"{"jsonrpc":"2.0","method":"m","id":2,"params":"# + p + "}")
            #expect(e?.0 == .number(2))
            #expect(e?.1.code == -32600 && e?.1.reason == "invalidParamsType")
        }
    }

    @Test func unknownEnvelopeMembersAreRejected() {
        let e = Wire.invalid(#"{"jsonrpc":"2.0","method":"m","id":2,"param":{"key":"a"}}"#)
        #expect(e?.0 == .number(2))
        #expect(e?.1.reason == "unknownMember")
        #expect(e?.1[data: "member"] == .string("param"))
    }

    @Test func batchesKeepOrderAndMixValidAndInvalid() {
        let line = #"[{"jsonrpc":"2.0","method":"a","id":1},1,{"jsonrpc":"2.0","method":"b"},{"foo":"boo"},"#
            + #"{"jsonrpc":"2.0","method":"c","params":[],"id":5}]"#
        guard case .batch(let elements) = Wire.parse(line) else { Issue.record("not a batch"); return }
        #expect(elements.count == 5)
        if case .request(let r) = elements[0] { #expect(r.method == "a") } else { Issue.record("0") }
        if case .invalid(let id, let e) = elements[1] { #expect(id == .null && e.reason == "notAnObject") } else { Issue.record("1") }
        if case .request(let r) = elements[2] { #expect(r.isNotification) } else { Issue.record("2") }
        if case .invalid(let id, let e) = elements[3] { #expect(id == .null && e.reason == "invalidVersion") } else { Issue.record("3") }
        if case .invalid(let id, let e) = elements[4] { #expect(id == .number(5) && e.code == -32602) } else { Issue.record("4") }
    }

    @Test func nestedBatchElementIsNotAnObject() {
        guard case .batch(let elements) = Wire.parse("[[]]") else { Issue.record("not a batch"); return }
        if case .invalid(_, let e) = elements[0] { #expect(e.reason == "notAnObject") } else { Issue.record("0") }
    }

    @Test func emptyAndOversizedBatches() {
        #expect(Wire.failure("[]")?.reason == "emptyBatch")
        #expect(Wire.failure("[]")?.code == -32600)
        let three = "[" + Array(repeating: #"{"jsonrpc":"2.0","method":"m"}"#, count: 3).joined(separator: ",") + "]"
        let e = Wire.failure(three, maxBatch: 2)
        #expect(e?.code == -32600 && e?.reason == "batchTooLarge")
        #expect(e?[data: "limit"] == .int(2))
        if case .batch(let elements) = Wire.parse(three, maxBatch: 3) { #expect(elements.count == 3) } else { Issue.record("3") }
    }

    // MARK: Replies

    @Test func successReplyIsOneLine() throws {
        var w = JSONWriter()
        RPCResponseWriter.success(id: .string("k"), into: &w) { (w: inout JSONWriter) throws(RPCError) in
            w.beginObject(); w.key("pong"); w.bool(true); w.endObject()
        }
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"jsonrpc":"2.0","id":"k","result":{"pong":true}}"# + "\n")
    }

    @Test func errorReplyCarriesReasonAndData() throws {
        var w = JSONWriter()
        RPCResponseWriter.error(id: nil, .lineTooLong(limit: 64), into: &w)
        #expect(w.bytes.last == 0x0A)
        let v = try Wire.json(w)
        #expect(v["id"]?.isNull == true)
        #expect(v["error"]?["code"]?.int64 == -32600)
        #expect(v["error"]?["data"]?["reason"]?.string == "lineTooLong")
        #expect(v["error"]?["data"]?["limit"]?.int64 == 64)
        #expect(v["error"]?["message"]?.string?.isEmpty == false)
    }

    @Test func throwingResultRollsBackToAnErrorReply() throws {
        var w = JSONWriter()
        RPCResponseWriter.beginBatch(into: &w)
        RPCResponseWriter.success(id: .number(1), into: &w) { (w: inout JSONWriter) throws(RPCError) in w.int(1) }
        let replaced = RPCResponseWriter.success(id: .number(2), into: &w) { (w: inout JSONWriter) throws(RPCError) in
            w.beginObject(); w.key("found"); w.bool(true); w.key("value")
            throw .cannotEncode(encoding: .utf8, stored: .base64)
        }
        RPCResponseWriter.error(id: .number(3), .cancelled(started: true), into: &w)
        RPCResponseWriter.endBatch(into: &w)
        #expect(replaced?.code == -32004)
        #expect(w.bytes.last == 0x0A && w.bytes.filter { $0 == 0x0A }.count == 1)
        let v = try Wire.json(w)
        #expect(v.count == 3)
        #expect(v[0]?["result"]?.int64 == 1)
        #expect(v[1]?["id"]?.int64 == 2)
        #expect(v[1]?["error"]?["data"]?["reason"]?.string == "cannotEncode")
        #expect(v[1]?["error"]?["data"]?["encoding"]?.string == "utf8")
        #expect(v[1]?["result"] == nil)
        #expect(v[2]?["error"]?["data"]?["started"]?.bool == true)
        #expect(v[2]?["error"]?["code"]?.int64 == -32800)
    }

    @Test func batchOfSeparatelyWrittenElements() throws {
        let a = RPCResponseWriter.element { RPCResponseWriter.error(id: .null, .invalidRequest(reason: .notAnObject), into: &$0) }
        let b = RPCResponseWriter.element { w in
            RPCResponseWriter.success(id: .fractional(2.5), into: &w) { (w: inout JSONWriter) throws(RPCError) in w.null() }
        }
        #expect(!a.contains(0x0A) && !b.contains(0x0A))
        var w = JSONWriter()
        RPCResponseWriter.batch([], into: &w)
        #expect(w.bytes.isEmpty)
        RPCResponseWriter.batch([a, b], into: &w)
        let v = try Wire.json(w)
        #expect(v.count == 2)
        #expect(v[1]?["id"]?.double == 2.5)
        #expect(v[1]?["result"]?.isNull == true)
    }

    @Test func idsRoundTripThroughReplies() throws {
        for id: RPCID in [.string("a\"\n\u{0}"), .number(Int64.min), .fractional(-0.25), .null] {
            var w = JSONWriter()
            RPCResponseWriter.success(id: id, into: &w) { (w: inout JSONWriter) throws(RPCError) in w.int(0) }
            let v = try Wire.json(w)
            #expect(RPCID(try #require(v["id"])) == id)
        }
    }

    @Test func cacheErrorsMapToCodes() {
        let notReady = RPCError(CacheError.diskStorageIsNotReady(path: "/x", errno: 13))
        #expect(notReady.code == -32001 && notReady.reason == "diskStorageIsNotReady")
        #expect(notReady[data: "errnoName"] == .string("EACCES"))
        // The message names the errno too: a log or a CLI line shows only the message.
        #expect(notReady.message == "Disk storage is not ready: /x: EACCES")
        for e in [CacheError.cannotCreateCacheFile(path: "/x", errno: 28), .cannotSetCacheFileAttribute(path: "/x", errno: 28),
                  .cannotRemoveCacheFile(path: "/x", errno: 28)] {
            let r = RPCError(e)
            #expect(r.code == -32002 && r.reason == e.reason)
            #expect(r[data: "errno"] == .int(28) && r[data: "errnoName"] == .string("ENOSPC"))
        }
        let read = RPCError(CacheError.cannotLoadDataFromDisk(path: "/x", errno: 5))
        #expect(read.code == -32003 && read.reason == "cannotLoadDataFromDisk" && read[data: "errnoName"] == .string("EIO"))
        let key = RPCError(CacheError.invalidKey(key: ".."))
        #expect(key.code == -32602 && key.reason == "invalidKey")
        let cancelled = RPCError(CacheError.cancelled(started: false))
        #expect(cancelled == .cancelled(started: false))
        #expect(cancelled.code == -32800 && cancelled.reason == "requestCancelled")
        #expect(RPCError.errnoName(9999) == "E9999")
    }

    @Test func transportAndLimitErrors() {
        #expect(RPCError.methodNotFound(method: "x").code == -32601)
        #expect(RPCError.debugMethodsDisabled(method: "debug.sleep").reason == "debugMethodsDisabled")
        #expect(RPCError.overloaded(reason: .tooManyInFlight, limit: 4).code == -32005)
        #expect(RPCError.overloaded(reason: .tooManyConnections).reason == "tooManyConnections")
        #expect(RPCError.shuttingDown.reason == "shuttingDown")
        #expect(RPCError.internalError(message: "bug").code == -32603)
    }
}

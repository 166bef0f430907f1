// Every error the daemon can answer with: a JSON-RPC code, a message for humans and a
// stable `data.reason` for programs, plus the few extra `data` members a reason needs.

import HalcyonCache
import HalcyonJSON

/// One JSON-RPC error reply's content.
///
/// Construct it only through the static constructors below (one per reason), so that
/// codes and reasons stay consistent and Docs/PROTOCOL.md can list them all. `reason`
/// strings are wire names: never rename one.
///
/// Threading: a value type; any thread.
public struct RPCError: Error, Sendable, Equatable {
    /// The JSON-RPC error code.
    public var code: Int32
    /// Human-readable text; not for programs to match on.
    public var message: String
    /// The stable camelCase word written as `data.reason`.
    public var reason: String
    /// More `data` members, written after `reason` in this order.
    public var data: [DataMember]

    /// One extra member of the error's `data` object.
    public struct DataMember: Sendable, Equatable {
        public var name: String
        public var value: DataValue
        public init(_ name: String, _ value: DataValue) {
            self.name = name
            self.value = value
        }
    }

    /// The value of an extra `data` member.
    public enum DataValue: Sendable, Equatable {
        case string(String)
        case int(Int64)
        case bool(Bool)
    }

    public init(code: Int32, message: String, reason: String, data: [DataMember] = []) {
        self.code = code
        self.message = message
        self.reason = reason
        self.data = data
    }

    /// The value of the extra `data` member `name`, if any.
    public subscript(data name: String) -> DataValue? {
        data.first { $0.name == name }?.value
    }

    /// Writes `{"code":…,"message":…,"data":{"reason":…,…}}`.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("code"); writer.int(Int64(code))
        writer.key("message"); writer.string(message)
        writer.key("data")
        writer.beginObject()
        writer.key("reason"); writer.string(reason)
        for member in data {
            writer.key(member.name)
            switch member.value {
            case .string(let s): writer.string(s)
            case .int(let i): writer.int(i)
            case .bool(let b): writer.bool(b)
            }
        }
        writer.endObject()
        writer.endObject()
    }
}

// MARK: - Codes

extension RPCError {
    /// The JSON-RPC codes the daemon uses (Docs/PROTOCOL.md §3).
    public enum Code {
        public static let parseError: Int32 = -32700
        public static let invalidRequest: Int32 = -32600
        public static let methodNotFound: Int32 = -32601
        public static let invalidParams: Int32 = -32602
        public static let internalError: Int32 = -32603
        public static let requestCancelled: Int32 = -32800
        public static let storageNotReady: Int32 = -32001
        public static let cannotWrite: Int32 = -32002
        public static let cannotRead: Int32 = -32003
        public static let cannotEncode: Int32 = -32004
        public static let overloaded: Int32 = -32005
        public static let upstreamUnavailable: Int32 = -32006
    }
}

// MARK: - Envelope and transport errors

extension RPCError {
    /// -32700: the line is not JSON. `reason` is the parser's (`invalidJSON`,
    /// `invalidUTF8`, `nestingTooDeep`, `numberOutOfRange`, `duplicateKey`).
    public static func parseError(_ error: JSONParseError) -> RPCError {
        RPCError(code: Code.parseError, message: "Parse error: \(error.message)", reason: error.reason.rawValue,
                 data: [DataMember("position", .int(Int64(error.position)))])
    }

    /// -32700 with a parser reason and no position.
    public static func parseError(reason: JSONParseError.Reason, message: String = "Parse error") -> RPCError {
        RPCError(code: Code.parseError, message: message, reason: reason.rawValue)
    }

    /// The `data.reason` words of `-32600` replies about the request object itself.
    public enum InvalidRequestReason: String, Sendable, CaseIterable {
        /// The value (or batch element) is not a JSON object.
        case notAnObject
        /// `jsonrpc` is missing or is not exactly `"2.0"`.
        case invalidVersion
        /// `method` is missing.
        case missingMethod
        /// `method` is not a string.
        case methodNotString
        /// `id` is an object, array or boolean.
        case invalidID
        /// `params` is neither an object nor an array.
        case invalidParamsType
        /// The request object has a member JSON-RPC does not define (a typo such as `param`).
        case unknownMember
        /// The batch `[]` holds no element.
        case emptyBatch
    }

    /// -32600: a valid JSON value that is not a request.
    public static func invalidRequest(reason: InvalidRequestReason, message: String? = nil) -> RPCError {
        RPCError(code: Code.invalidRequest, message: message ?? "Invalid Request", reason: reason.rawValue)
    }

    /// -32600 `lineTooLong`: a line longer than `--max-line-bytes` was discarded.
    public static func lineTooLong(limit: Int) -> RPCError {
        RPCError(code: Code.invalidRequest, message: "Invalid Request: line longer than \(limit) bytes",
                 reason: "lineTooLong", data: [DataMember("limit", .int(Int64(limit)))])
    }

    /// -32600 `batchTooLarge`: a batch with more than `--max-batch` elements; none of it ran.
    public static func batchTooLarge(limit: Int) -> RPCError {
        RPCError(code: Code.invalidRequest, message: "Invalid Request: batch larger than \(limit) elements",
                 reason: "batchTooLarge", data: [DataMember("limit", .int(Int64(limit)))])
    }

    /// -32601 `methodNotFound`, naming the method.
    public static func methodNotFound(method: String) -> RPCError {
        RPCError(code: Code.methodNotFound, message: "Method not found: \(method)", reason: "methodNotFound",
                 data: [DataMember("method", .string(method))])
    }

    /// -32601 `debugMethodsDisabled`: a `debug.*` method while the daemon runs without
    /// `--enable-debug-methods`.
    public static func debugMethodsDisabled(method: String) -> RPCError {
        RPCError(code: Code.methodNotFound,
                 message: "Method not found: \(method) needs halcyond --enable-debug-methods",
                 reason: "debugMethodsDisabled", data: [DataMember("method", .string(method))])
    }

    /// -32603 `internalError`: a bug, never bad input.
    public static func internalError(message: String) -> RPCError {
        RPCError(code: Code.internalError, message: "Internal error: \(message)", reason: "internalError")
    }

    /// -32800 `requestCancelled`; `started` says whether the work ran (its effects stand).
    public static func cancelled(started: Bool) -> RPCError {
        RPCError(code: Code.requestCancelled, message: started ? "Request cancelled after it ran" : "Request cancelled",
                 reason: "requestCancelled", data: [DataMember("started", .bool(started))])
    }

    /// The `data.reason` words of `-32005`.
    public enum OverloadReason: String, Sendable, CaseIterable {
        /// `--max-connections` reached; the connection is closed after this reply.
        case tooManyConnections
        /// `--max-in-flight` reached on this connection.
        case tooManyInFlight
        /// `cache.lease`: the key already has as many waiting callers as allowed.
        case tooManyLeaseWaitersForKey
        /// `cache.lease`: the daemon already has as many waiting callers as allowed.
        case tooManyLeaseWaiters
        /// The unfinished request lines of all connections together reached
        /// `--max-input-buffer`; this line was dropped, the connection stays usable.
        case inputBufferFull
        /// The daemon ran out of file descriptors; this connection was accepted only to
        /// say so and is closed after this reply.
        case outOfDescriptors
    }

    /// -32005: a configured limit was hit.
    public static func overloaded(reason: OverloadReason, limit: Int? = nil) -> RPCError {
        let text: String
        switch reason {
        case .tooManyConnections: text = "too many connections"
        case .tooManyInFlight: text = "too many requests in flight"
        case .tooManyLeaseWaitersForKey: text = "too many callers waiting for this key's lease"
        case .tooManyLeaseWaiters: text = "too many callers waiting for leases"
        case .inputBufferFull: text = "too much unfinished input across connections"
        case .outOfDescriptors: text = "out of file descriptors"
        }
        return RPCError(code: Code.overloaded, message: "Overloaded: \(text)", reason: reason.rawValue,
                        data: limit.map { [DataMember("limit", .int(Int64($0)))] } ?? [])
    }

    /// -32005 `peerNotAllowed`: the peer check refused the connecting process, which gets
    /// this line (id null) before the daemon closes the connection, so a client can say
    /// why instead of reporting a closed connection. -32005 like the other refusals of a
    /// whole connection (`tooManyConnections`, `outOfDescriptors`).
    public static func peerNotAllowed(uid: UInt32, gid: UInt32) -> RPCError {
        RPCError(code: Code.overloaded,
                 message: "Not allowed: uid \(uid) may not use this daemon (it admits its own user, root, "
                     + "--allow-uid and --allow-gid)",
                 reason: "peerNotAllowed",
                 data: [DataMember("uid", .int(Int64(uid))), DataMember("gid", .int(Int64(gid)))])
    }

    /// -32005 `peerNotAllowed` on a daemon run with `--access`: no line of the rules file
    /// matches the connecting process.
    public static func peerNotAllowedByRules(uid: UInt32, gid: UInt32) -> RPCError {
        RPCError(code: Code.overloaded,
                 message: "Not allowed: no rule of the daemon's access file admits uid \(uid)",
                 reason: "peerNotAllowed",
                 data: [DataMember("uid", .int(Int64(uid))), DataMember("gid", .int(Int64(gid)))])
    }

    /// -32005 `notPermitted`: the connection's rule (`--access`) does not grant the right
    /// the method needs (`data.right`: `read`, `write` or `admin`). Nothing ran.
    public static func notPermitted(right: String) -> RPCError {
        RPCError(code: Code.overloaded, message: "Not permitted: this connection lacks the '\(right)' right",
                 reason: "notPermitted", data: [DataMember("right", .string(right))])
    }

    /// -32005 `shuttingDown`: the daemon is draining and did not finish this request in
    /// time (or got it after shutdown began). Whether it ran is unknown to the client.
    public static var shuttingDown: RPCError {
        RPCError(code: Code.overloaded, message: "The daemon is shutting down", reason: "shuttingDown")
    }

    /// -32004 `cannotEncode`: the stored bytes cannot be shown in `encoding`.
    public static func cannotEncode(encoding: ValueEncoding, stored: ValueEncoding) -> RPCError {
        let why: String
        switch encoding {
        case .utf8: why = "the stored bytes are not valid UTF-8"
        case .json: why = "the stored bytes are not a JSON text"
        case .base64: why = "base64 can show any bytes"
        }
        return RPCError(code: Code.cannotEncode, message: "Cannot encode value as \(encoding.rawValue): \(why)",
                        reason: "cannotEncode",
                        data: [DataMember("encoding", .string(encoding.rawValue)),
                               DataMember("storedEncoding", .string(stored.rawValue))])
    }
}

// MARK: - Storage errors

extension RPCError {
    /// The reply for a storage error: one exhaustive switch, so a new `CacheError` case
    /// does not compile until it has a code. `reason` is the `CacheError`'s own.
    public init(_ error: CacheError) {
        switch error {
        case .diskStorageIsNotReady(let path, let errno):
            self.init(code: Code.storageNotReady,
                      message: "Disk storage is not ready: \(path): \(RPCError.errnoName(errno))",
                      reason: error.reason, data: RPCError.errnoData(errno))
        case .cannotCreateCacheFile(let path, let errno):
            self.init(code: Code.cannotWrite, message: "Cannot create cache file \(path): \(RPCError.errnoName(errno))",
                      reason: error.reason, data: RPCError.errnoData(errno))
        case .cannotSetCacheFileAttribute(let path, let errno):
            self.init(code: Code.cannotWrite, message: "Cannot set attributes of \(path): \(RPCError.errnoName(errno))",
                      reason: error.reason, data: RPCError.errnoData(errno))
        case .cannotRemoveCacheFile(let path, let errno):
            self.init(code: Code.cannotWrite, message: "Cannot remove \(path): \(RPCError.errnoName(errno))",
                      reason: error.reason, data: RPCError.errnoData(errno))
        case .cannotWriteJournal(let path, let errno):
            self.init(code: Code.cannotWrite, message: "Cannot write journal \(path): \(RPCError.errnoName(errno))",
                      reason: error.reason, data: RPCError.errnoData(errno))
        case .cannotLoadDataFromDisk(let path, let errno):
            self.init(code: Code.cannotRead, message: "Cannot read \(path): \(RPCError.errnoName(errno))",
                      reason: error.reason, data: RPCError.errnoData(errno))
        case .invalidKey:
            self = .invalidKey(param: "key")
        case .diskBacklog(let journalBytes, let unwrittenBytes):
            self.init(code: Code.overloaded, message: "Disk backlog: the journal or the unwritten entries are at their bound",
                      reason: error.reason,
                      data: [DataMember("journalBytes", .int(Int64(journalBytes))),
                             DataMember("unwrittenBytes", .int(Int64(unwrittenBytes)))])
        case .cancelled(let started):
            self = .cancelled(started: started)
        case .upstreamUnavailable(let detail):
            self.init(code: Code.upstreamUnavailable, message: "Upstream unavailable: \(detail)", reason: error.reason)
        case .upstreamAuthenticationFailed(let detail):
            self.init(code: Code.upstreamUnavailable, message: "Upstream refused the credentials: \(detail)", reason: error.reason)
        case .upstreamRefused(let detail):
            self.init(code: Code.upstreamUnavailable, message: "Upstream refused: \(detail)", reason: error.reason)
        case .tooManyLeaseWaiters(let limit):
            self = .overloaded(reason: .tooManyLeaseWaiters, limit: limit)
        case .tooManyLeaseWaitersForKey(let limit):
            self = .overloaded(reason: .tooManyLeaseWaitersForKey, limit: limit)
        }
    }

    static func errnoData(_ errno: Int32) -> [DataMember] {
        [DataMember("errno", .int(Int64(errno))), DataMember("errnoName", .string(errnoName(errno)))]
    }
}

// MARK: - Params errors

extension RPCError {
    /// The `data.reason` words of `-32602` replies.
    public enum InvalidParamsReason: String, Sendable, CaseIterable {
        /// `params` is an array; every method takes named params.
        case positionalParams
        /// A required member is absent (or null).
        case missingParam
        /// A member has the wrong JSON type (`data.expected` names the right one).
        case wrongType
        /// A member the method does not take (typos are not silently ignored).
        case unknownParam
        /// The key cannot name a file (only with `--no-hashed-file-names`).
        case invalidKey
        /// The key is longer than 4096 UTF-8 bytes.
        case keyTooLong
        /// The key is the empty string.
        case emptyKey
        /// Not one of the expiration forms, or a non-positive span.
        case invalidExpiration
        /// Not one of the extending forms.
        case invalidExtending
        /// Not `"utf8"`, `"base64"` or `"json"`.
        case invalidEncoding
        /// `value` does not fit its `encoding` (not a string for utf8/base64).
        case invalidValue
        /// `value` is not strict standard base64.
        case invalidBase64
        /// Not one of the callback-queue forms.
        case invalidCallbackQueue
        /// Not one of `veryLow`, `low`, `normal`, `high`, `veryHigh`.
        case invalidPriority
        /// A number out of the range the member allows (e.g. a negative duration).
        case outOfRange
        /// `cache.incr`: the stored value is not a JSON integer.
        case notAnInteger
        /// `cache.incr`: the result does not fit a signed 64-bit integer.
        case integerOverflow
        /// `cache.keys`: the cursor did not come from a previous `cache.keys` reply.
        case invalidCursor
        /// `cache.getMany` / `cache.setMany`: more elements than `--max-batch`.
        case tooManyKeys
        /// `cache.removePrefix`: the prefix is empty (use `cache.clear`).
        case emptyPrefix
        /// `cache.clear` with `shared: true` on a daemon without an upstream.
        case noUpstream
        /// `namespace` is not a namespace name (letters, digits, `-`, `_`, `.`; at most 64).
        case invalidNamespace
        /// `cache.clear` inside a namespace with `memory` or `disk` false: a namespace is
        /// cleared from every tier at once.
        case wholeNamespaceOnly
        /// The entry is larger than the whole size limit of the tier it would live in
        /// (`data.tier`, `data.limit`): it would be acknowledged and then evicted at once.
        case valueTooLarge
    }

    /// -32602 with a reason, the member it is about (`data.param`), and a message.
    public static func invalidParams(reason: InvalidParamsReason, param: String? = nil, message: String) -> RPCError {
        var data: [DataMember] = []
        if let param { data.append(DataMember("param", .string(param))) }
        return RPCError(code: Code.invalidParams, message: "Invalid params: \(message)", reason: reason.rawValue, data: data)
    }

    /// -32602 `invalidKey`: the key in `param` cannot name a file (`--no-hashed-file-names`).
    public static func invalidKey(param: String) -> RPCError {
        invalidParams(reason: .invalidKey, param: param, message: "the key cannot name a file")
    }

    /// -32602 `valueTooLarge`: the value in `param` could never stay in `tier`, whose
    /// whole size limit is `limit` bytes (a disk entry counts its file: header, key and value),
    /// or with `quota`, whose share for the key's namespace is `limit` bytes (`data.quota` true).
    public static func valueTooLarge(param: String, tier: EntrySizeLimits.Tier, limit: UInt64, quota: Bool = false) -> RPCError {
        let counted = tier == .disk ? "header, key and value" : "value"
        let bound = quota ? "namespace's \(tier.rawValue) quota" : "tier's whole size limit"
        var error = invalidParams(
            reason: .valueTooLarge, param: param,
            message: "'\(param)' is too large for the \(tier.rawValue) tier: its \(counted) exceed the \(bound) "
                + "of \(limit) bytes")
        error.data.append(DataMember("tier", .string(tier.rawValue)))
        error.data.append(DataMember("limit", .int(Int64(clamping: limit))))
        if quota { error.data.append(DataMember("quota", .bool(true))) }
        return error
    }

    /// -32602 `missingParam`.
    public static func missingParam(_ name: String) -> RPCError {
        invalidParams(reason: .missingParam, param: name, message: "missing '\(name)'")
    }

    /// -32602 `wrongType`; `expected` is a JSON type name such as "string".
    public static func wrongType(_ name: String, expected: String) -> RPCError {
        var error = invalidParams(reason: .wrongType, param: name, message: "'\(name)' must be \(expected)")
        error.data.append(DataMember("expected", .string(expected)))
        return error
    }

    /// -32602 `unknownParam`.
    public static func unknownParam(_ name: String) -> RPCError {
        invalidParams(reason: .unknownParam, param: name, message: "unknown member '\(name)'")
    }

    /// -32602 `positionalParams`.
    public static var positionalParams: RPCError {
        invalidParams(reason: .positionalParams, message: "params must be an object; positional params are not supported")
    }
}

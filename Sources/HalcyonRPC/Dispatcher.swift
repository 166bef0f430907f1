// Method dispatch: prepares a request once against its method's spec (Methods/MethodTable.swift),
// checking what the spec states (the method exists and is enabled, the params it names,
// the per-request options) before any handler runs, as Redis's processCommand checks a
// command's arity and flags before calling it; then runs the spec's handler with the
// prepared call, which the transport may first have offered to the direct write and the
// memory answer.

import Foundation
import HalcyonCache
import HalcyonSupport
import HalcyonJSON

/// One reply element: a JSON-RPC response, either already serialised (errors, replies
/// computed at once) or a result still to be encoded (`deferred`), which the transport
/// encodes on the thread that writes it, straight into its outbound buffer: work queued on
/// the ioQueue hands its result value over, and no reply bytes are made there.
public struct RPCReply: Sendable {
    /// A success's result, written into a reply by the thread that writes the reply.
    public typealias ResultWriter = @Sendable (inout JSONWriter) throws(RPCError) -> Void
    /// A success's whole reply line, composed when it has its method's common shape
    /// (`RPCResponseWriter.foundGetLine`): writes the line for `id` and returns true, or
    /// writes nothing and returns false, and the `ResultWriter` writes it.
    public typealias LineWriter = @Sendable (_ id: RPCID, _ writer: inout JSONWriter) -> Bool

    private enum Body: Sendable {
        /// The response object's bytes, without newline.
        case encoded([UInt8])
        case deferred(ResultWriter, line: LineWriter?)
    }

    /// The id of the request it answers (nil only for whole-line errors, written as `null`).
    public var id: RPCID?
    private var body: Body
    /// The error this reply carries; nil for a result. The transport withdraws a success
    /// whose request was cancelled meanwhile (writing `-32800` instead) and counts storage
    /// errors for its warnings. A deferred result that turns out not to be encodable
    /// (`-32004`) is only known once written (`writeLine`).
    public var error: RPCError?

    /// True for a result, false for an error.
    public var isSuccess: Bool { error == nil }

    public init(id: RPCID?, bytes: [UInt8], error: RPCError?) {
        self.id = id
        self.body = .encoded(bytes)
        self.error = error
    }

    /// A success whose result `write` produces when the reply is written.
    /// With `line`, a reply written between lines is first offered to it.
    public static func deferred(id: RPCID?, line: LineWriter? = nil, _ write: @escaping ResultWriter) -> RPCReply {
        var reply = RPCReply(id: id, bytes: [], error: nil)
        reply.body = .deferred(write, line: line)
        return reply
    }

    /// The response object's bytes, without newline (a deferred result is encoded now,
    /// on the calling thread).
    public var bytes: [UInt8] { element().bytes }

    /// The response object's bytes, without newline, for a batch; with the error that
    /// replaced a deferred result whose value could not be encoded (as `writeLine`).
    public func element() -> (bytes: [UInt8], failure: RPCError?) {
        switch body {
        case .encoded(let bytes):
            return (bytes, nil)
        case .deferred:
            var writer = JSONWriter()
            let failure = writeLine(into: &writer)
            var bytes = writer.bytes
            if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
            return (bytes, failure)
        }
    }

    /// Appends the reply as one line (with its `\n`) to `writer`, which must be between
    /// lines. Returns the error that replaced a deferred result, if its value could not be
    /// encoded.
    public func writeLine(into writer: inout JSONWriter) -> RPCError? {
        switch body {
        case .encoded(let bytes):
            writer.raw(bytes)
            writer.newline()
            return nil
        case .deferred(let write, let line):
            if let line, let id, writer.depth == 0, line(id, &writer) { return nil }
            return RPCResponseWriter.success(id: id ?? .null, into: &writer, result: write)
        }
    }

    /// An error reply.
    public static func error(id: RPCID?, _ error: RPCError) -> RPCReply {
        var writer = JSONWriter()
        RPCResponseWriter.error(id: id, error, into: &writer)
        return RPCReply(id: id, element: writer.bytes, error: error)
    }

    /// The response writer ends a top-level object with its line's `\n`; a reply element
    /// is kept without it, since the transport frames lines and batches itself.
    public init(id: RPCID?, element: [UInt8], error: RPCError?) {
        var bytes = element
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        self.init(id: id, bytes: bytes, error: error)
    }

    /// A success reply whose result `write` produces now; if `write` throws, the reply is
    /// that error instead (for instance `-32004` when a value cannot be shown in an encoding).
    public static func success(
        id: RPCID?, _ write: (inout JSONWriter) throws(RPCError) -> Void
    ) -> RPCReply {
        var writer = JSONWriter()
        let failure = RPCResponseWriter.success(id: id ?? .null, into: &writer, result: write)
        return RPCReply(id: id, element: writer.bytes, error: failure)
    }
}

/// The transport's own counters, as `cache.stats` reports them.
public struct LiveCounters: Sendable, Equatable {
    /// Connections open now.
    public var connections = 0
    /// Requests read and not yet answered, all connections.
    public var inFlight = 0
    /// Connections refused: by the peer check, over `--max-connections`, or for want of
    /// file descriptors.
    public var refusedPeers = 0
    /// Clients disconnected because their unsent replies passed `--max-output-buffer`.
    public var outputBufferOverflows = 0
    /// Request lines parsed off the event loops because they were long.
    public var linesParsedOffLoop = 0
    /// Request lines refused unread: longer than `--max-line-bytes` (`lineTooLong`).
    public var lineTooLongRefusals = 0
    /// Request lines refused because all connections' unfinished lines filled
    /// `--max-input-buffer` (`inputBufferFull`).
    public var inputBufferFullRefusals = 0

    public init() {}
}

/// Facts about the running daemon that `server.info` and `cache.stats` report, provided by
/// the transport, which owns them.
public struct ServerFacts: Sendable {
    public var version: String
    public var socketPath: String
    public var startedAt: Date
    public var limits: [(String, Int64)]
    public var diskExpiration: StorageExpiration
    public var memoryExpiration: StorageExpiration
    public var debugMethodsEnabled: Bool
    /// Live counters of the transport: open connections, requests in flight, refusals.
    public var liveCounters: @Sendable () -> LiveCounters
    /// The daemon's metrics in the Prometheus text format, for `server.metrics`; set by the
    /// transport, which owns the metrics registry. Default: no series.
    public var metricsText: @Sendable () -> String = { "" }
    /// The cache's name (`--name`), for `server.info`'s `cacheName`. Default `"default"`.
    public var cacheName = "default"
    /// The upstream's last sample, for `server.info` and `cache.stats`; nil (default)
    /// when the daemon has no upstream.
    public var upstream: @Sendable () -> UpstreamFacts? = { nil }

    public init(
        version: String, socketPath: String, startedAt: Date, limits: [(String, Int64)],
        diskExpiration: StorageExpiration, memoryExpiration: StorageExpiration,
        debugMethodsEnabled: Bool,
        liveCounters: @escaping @Sendable () -> LiveCounters
    ) {
        self.version = version
        self.socketPath = socketPath
        self.startedAt = startedAt
        self.limits = limits
        self.diskExpiration = diskExpiration
        self.memoryExpiration = memoryExpiration
        self.debugMethodsEnabled = debugMethodsEnabled
        self.liveCounters = liveCounters
    }
}

/// A request made ready for its handler, once (`Dispatcher.prepare`): its params read
/// and checked against its method's spec, its options laid over the connection's, or the
/// error the table refuses it with. The transport passes it `inout` from one path to the
/// next (the direct write, the memory answer, `Dispatcher.handle`), so no path parses the
/// params again and none copies them; a memory answer that declines records what it
/// found out in `memory`.
///
/// Threading: made, passed on and handled on the requesting connection's event loop
/// thread (it holds the connection's session).
public struct PreparedCall {
    /// The id to answer; nil for a notification.
    let id: RPCID?
    let session: ConnectionSession
    /// The table's word on the request.
    let verdict: Verdict
    /// The params, read (empty for a refusal).
    let params: Params
    /// The request's options laid over the connection's.
    let options: HybridCache.Options
    /// What the method's memory answer found out before it declined.
    var memory: Dispatcher.MemoryFinding

    enum Verdict {
        /// Ready for the spec's call handler.
        case accepted(MethodSpec)
        /// The table refuses the request: its reply is this error, and no handler runs.
        case refused(RPCError)
    }

    init(id: RPCID?, session: ConnectionSession, spec: MethodSpec, params: consuming Params, options: HybridCache.Options) {
        self.id = id
        self.session = session
        self.verdict = .accepted(spec)
        self.params = params
        self.options = options
        self.memory = .nothing
    }

    init(id: RPCID?, session: ConnectionSession, refusal: RPCError) {
        self.id = id
        self.session = session
        self.verdict = .refused(refusal)
        self.params = Params(unchecked: nil)
        self.options = HybridCache.Options()
        self.memory = .nothing
    }
}

/// Everything a handler needs for one request.
///
/// Threading: built and used by the dispatcher on the connection's event loop thread
/// (it holds the connection's session); only its `responder` leaves that thread.
struct MethodCall {
    let params: Params
    let session: ConnectionSession
    let options: HybridCache.Options
    let responder: Responder
    /// What the method's memory answer found out before it declined (`PreparedCall.memory`).
    let memory: Dispatcher.MemoryFinding

    var id: RPCID? { responder.id }
    var callbackQueue: CallbackQueue { responder.callbackQueue }
}

/// The part of a request that travels with its work: how to answer it.
///
/// Threading: `Sendable`; `respond` may be called from any thread, exactly once per request.
struct Responder: Sendable {
    let id: RPCID?
    let callbackQueue: CallbackQueue
    let priority: Operation.QueuePriority
    let respond: @Sendable (RPCReply) -> Void

    /// Delivers a finished storage result: success as a value that `write` encodes on the
    /// thread that writes the reply (not here: this may be the ioQueue), failure mapped once
    /// through `RPCError.init(_: CacheError)`.
    /// With `line`, the reply line is first offered to it (`RPCReply.LineWriter`).
    func finish<T: Sendable>(
        _ result: Result<T, CacheError>,
        line: (@Sendable (T, RPCID, inout JSONWriter) -> Bool)? = nil,
        _ write: @escaping @Sendable (T, inout JSONWriter) throws(RPCError) -> Void
    ) {
        switch result {
        case .success(let value):
            var composed: RPCReply.LineWriter?
            if let line { composed = { (id: RPCID, w: inout JSONWriter) -> Bool in line(value, id, &w) } }
            respond(.deferred(id: id, line: composed) { (w: inout JSONWriter) throws(RPCError) in try write(value, &w) })
        case .failure(let error):
            respond(.error(id: id, RPCError(error)))
        }
    }

    /// Delivers a reply computed at once, through the connection's callback queue like any
    /// other, so the delivery policy holds for every reply.
    func deliverNow(_ reply: RPCReply) {
        let respond = self.respond
        callbackQueue.execute(priority: priority) { respond(reply) }
    }
}

/// Routes each request to its handler and the handler to the hybrid cache.
///
/// Threading: `handle` must be called on the requesting connection's event loop thread
/// (it reads and may change that connection's `ConnectionSession`). Replies reach
/// `respond` on the thread the connection's `CallbackQueue` picks: the event loop thread
/// for a memory hit under `untouch`, the ioQueue for queued work under `untouch` (the
/// event loop thread again for a disk read that an idle ioQueue ran there:
/// `IOScheduler.runReadDirectIfIdle`), the main queue, or the connection's private queue.
/// The dispatcher itself holds no mutable state.
public final class Dispatcher: Sendable {
    public let cache: HybridCache
    public let facts: ServerFacts
    /// The memory tier's clock, which a connection reads once per socket read for the
    /// memory hits of that read (`HybridCache.Options.arrivedBy`).
    public let memoryClock: any CacheClock
    /// The keys the cache can name files with and the tiers' size limits, fixed at start
    /// (`Params.rules`). Immortal (`Immortal`): every request's params count a reference
    /// to it from both loops. The daemon makes one dispatcher; a test that makes more
    /// keeps each one's rules until it exits.
    let paramRules: Params.Rules
    public init(cache: HybridCache, facts: ServerFacts) {
        self.cache = cache
        self.memoryClock = cache.config.memory.clock
        self.paramRules = Immortal.keep(Params.Rules(keyRule: cache.diskStorage.keyRule, entryLimits: cache.entrySizeLimits))
        self.facts = facts
        // The table is built and checked here, at start, not at the first request.
        _ = MethodSpec.byName
    }

    /// The transport calls this once when a connection has closed: its leases end (each
    /// passes to the next waiting caller) and its waiting lease calls are dropped; its
    /// leases on shared keys are given back upstream, waking every host's waiters.
    public func connectionClosed(_ session: ConnectionSession) {
        cache.releaseLeases(owner: session.id)
    }

    /// `--max-batch`, the bound on `cache.getMany` keys and `cache.setMany` entries.
    var maxBatch: Int {
        Int(facts.limits.first(where: { $0.0 == "maxBatch" })?.1 ?? 1000)
    }

    /// The name of every method in the table, in table order (for per-method series that
    /// are made once, up front).
    public static var methodNames: [String] { methodTable.map(\.name) }

    /// Handles one request: `prepare`, then `handle(_:respond:)`. Returns the storage task
    /// for queued work, so the transport can cancel it; nil when the request was answered
    /// (or refused) at once.
    ///
    /// A notification (no `id`) runs like a request; the transport drops its reply.
    @discardableResult
    public func handle(
        _ request: RPCRequest, session: ConnectionSession, respond: @escaping @Sendable (RPCReply) -> Void
    ) -> CacheTask? {
        handle(prepare(request, session: session), respond: respond)
    }

    /// Runs a prepared request's handler, or answers its refusal, through the session's
    /// callback queue. Returns the storage task for queued work; nil when the request was
    /// answered (or refused) at once.
    @discardableResult
    public func handle(_ call: consuming PreparedCall, respond: @escaping @Sendable (RPCReply) -> Void) -> CacheTask? {
        let callbackQueue = call.session.callbackQueue
        var priority = Operation.QueuePriority.normal
        do throws(RPCError) {
            let spec: MethodSpec
            switch call.verdict {
            case .refused(let error): throw error
            case .accepted(let accepted): spec = accepted
            }
            // `prepare` refuses every spec but a call's.
            guard case .call(let handler) = spec.handler else { throw .methodNotFound(method: spec.name) }
            priority = call.options.priority
            let responder = Responder(id: call.id, callbackQueue: callbackQueue, priority: priority, respond: respond)
            return try handler(
                self, MethodCall(params: call.params, session: call.session, options: call.options, responder: responder,
                                 memory: call.memory))
        } catch {
            let id = call.id
            callbackQueue.execute(priority: priority) { respond(.error(id: id, error)) }
            return nil
        }
    }

    /// Makes `request` ready for its handler, once: the table's checks in this order (the
    /// method exists and is not carried out by the transport, it is enabled here, the
    /// connection has the right it needs under `--access`, its params name nothing it does
    /// not take, its options are valid), the params read (in the connection's keyspace),
    /// and the request's options laid over the connection's. A failed check is kept in the
    /// result, which `handle` answers with it.
    ///
    /// Threading: on the requesting connection's event loop thread (it reads the session).
    public func prepare(_ request: RPCRequest, session: ConnectionSession) -> PreparedCall {
        do throws(RPCError) {
            guard let spec = request.spec else { throw .methodNotFound(method: request.method) }
            try check(spec, request)
            // The transport carries these out itself (`transportAction(for:)`).
            guard case .call = spec.handler else { throw .methodNotFound(method: request.method) }
            // Tenancy (`--access`): the right the line needs, then the keyspace its keys are in.
            let access = session.access
            try access?.permit(spec.flags)
            let keyspace = access != nil && spec.flags.contains(.keyspace)
            // Made once, with everything it needs, as a constant handed on at its last use,
            // rather than made and then amended: a `Params` is copied through its value
            // witnesses, a counted reference for each object it holds.
            let node = request.paramsNode
            let lengths = try Params.memberNameLengths(
                of: node, allowed: spec.params, alsoAllowed: keyspace ? Self.namespaceParam : nil)
            var namespace: KeyNamespace?
            if keyspace, let access {
                namespace = try access.namespace(for: Params(checked: node, memberNameLengths: lengths, rules: paramRules))
            }
            let params = Params(checked: node, memberNameLengths: lengths, rules: paramRules, namespace: namespace)
            var options = Self.sessionOptions(session)
            if spec.takesOptions {
                let requestOptions = try params.options()
                if let sync = requestOptions.loadDiskFileSynchronously { options.loadDiskFileSynchronously = sync }
                if let p = requestOptions.priority { options.priority = p }
            }
            return PreparedCall(id: request.id, session: session, spec: spec, params: consume params, options: options)
        } catch {
            return PreparedCall(id: request.id, session: session, refusal: error)
        }
    }

    /// The options every request of `session` starts from: its connection's settings.
    static func sessionOptions(_ session: ConnectionSession) -> HybridCache.Options {
        var options = HybridCache.Options()
        options.loadDiskFileSynchronously = session.loadDiskFileSynchronously
        options.extendingExpiration = session.extendingExpiration
        return options
    }

    /// The param an admin names another namespace with, on `keyspace` lines under `--access`.
    static let namespaceParam: ParamNames = ["namespace"]

    private func check(_ spec: MethodSpec, _ request: RPCRequest) throws(RPCError) {
        if spec.flags.contains(.debug), !facts.debugMethodsEnabled {
            throw .debugMethodsDisabled(method: request.method)
        }
    }
}

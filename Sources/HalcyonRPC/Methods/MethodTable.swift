// The method table: every JSON-RPC method the daemon knows, one line each (name, the
// params it accepts, its flags, its handler), as Redis declares each command once with
// its arity, flags and handler. The dispatcher checks what a line states before the
// handler runs; the transport asks a line's flags. Adding a method is a line here and
// a handler beside its kind (ReadMethods, WriteMethods, InfoMethods, AtomicMethods,
// MultiKeyMethods, KeyListMethods, LeaseMethods).
//
// Flags: `read` reads the cache and changes nothing (a sliding expiration aside); `write`
// changes it and runs in the cache's order across connections; `fast` can be answered
// without waiting for that order (the synchronous path); `transport` is carried out by the
// transport itself (`$/cancelRequest`: never held, never reaches a handler); `debug` exists
// only with `--enable-debug-methods`. Under `--access`: `admin` needs the admin right,
// `write` the write right, `read` the read right; `keyspace` lines act in the caller's
// namespace.
//
// Before any handler runs, `Dispatcher.prepare` checks what the line states, in a fixed
// order (the first failure is the one reported): the method exists and is enabled, its
// params name nothing the line does not list (-32602 `unknownParam`), its `options` are
// valid. `Dispatcher.memoryAnswers` names, for some `fast` lines, a second function that
// answers from memory at once (`cache.get`, `cache.isCached`, `cache.describe`,
// `server.ping`). `MethodRoute.byName` joins them once, checked when the dispatcher starts
// (no name twice; a memory answer only for a `fast`, non-debug line); a request resolves
// its route once, when it is parsed, and every later step reads it (flags, memory answer,
// direct write, handler, and the method's latency series, made up front so recording a
// request takes no lock).

import HalcyonCache

/// What a method is, for the dispatcher and the transport to act on before its handler runs.
public struct MethodFlags: OptionSet, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Reads the cache and changes nothing (a sliding expiration aside).
    public static let read = MethodFlags(rawValue: 1 << 0)
    /// Changes the cache: runs on the ioQueue, in arrival order across connections.
    public static let write = MethodFlags(rawValue: 1 << 1)
    /// Can be answered without waiting for the ioQueue (from memory, or from facts the
    /// daemon holds): where a synchronous reply path may switch.
    public static let fast = MethodFlags(rawValue: 1 << 2)
    /// Handled by the transport itself (it acts on the connection's requests in flight);
    /// never reaches a handler through `Dispatcher.handle`.
    public static let transport = MethodFlags(rawValue: 1 << 3)
    /// Exists only when the daemon runs with debug methods enabled.
    public static let debug = MethodFlags(rawValue: 1 << 4)
    /// Acts on the whole cache (stats, metrics, maintenance): under `--access` it needs
    /// the `admin` right.
    public static let admin = MethodFlags(rawValue: 1 << 5)
    /// Acts on keys: under `--access` its keys are the caller's namespace's, and an admin
    /// may name another with a `namespace` param (`Dispatcher.prepare`).
    public static let keyspace = MethodFlags(rawValue: 1 << 6)
}

/// A method's line in the table.
///
/// Threading: immutable; any thread. A class: the dispatcher looks a line up for every
/// request, and a struct of strings, sets and closures cost a retain per member per copy.
final class MethodSpec: Sendable {
    /// Runs a request: returns its storage task when the work was queued.
    typealias CallHandler = @Sendable (Dispatcher, MethodCall) throws(RPCError) -> CacheTask?
    /// Decodes a `transport` method's params into what the transport is to do.
    typealias TransportHandler = @Sendable (Params) throws(RPCError) -> TransportAction

    enum Handler: Sendable {
        case call(CallHandler)
        case transport(TransportHandler)
    }

    let name: String
    /// Member names `params` may hold; anything else is `-32602 unknownParam`.
    let params: ParamNames
    let flags: MethodFlags
    let handler: Handler
    /// Whether `params` may hold `options`, which the dispatcher reads before the handler.
    let takesOptions: Bool

    init(_ name: String, _ params: ParamNames, _ flags: MethodFlags, _ handler: @escaping CallHandler) {
        precondition(!flags.contains(.transport), "\(name): a transport method takes a TransportHandler")
        self.name = name
        self.params = params
        self.flags = flags
        self.handler = .call(handler)
        self.takesOptions = params.contains("options")
    }

    init(_ name: String, _ params: ParamNames, _ flags: MethodFlags, _ handler: @escaping TransportHandler) {
        precondition(flags.contains(.transport), "\(name): a TransportHandler needs the transport flag")
        self.name = name
        self.params = params
        self.flags = flags
        self.handler = .transport(handler)
        self.takesOptions = false
    }
}

extension Dispatcher {
    /// Every method, one line each.
    static let methodTable: [MethodSpec] = [
        // name                   params                                                                                                      flags               handler
        .init("cache.get",        ["key", "encoding", "extendingExpiration", "forcedExtension", "fromMemoryOnly", "referenceDate", "options"], [.read, .fast, .keyspace], ReadMethods.get),
        .init("cache.isCached",   MethodCall.lookupParams,                                                                                    [.read, .fast, .keyspace], ReadMethods.isCached),
        .init("cache.describe",   MethodCall.lookupParams,                                                                                    [.read, .fast, .keyspace], ReadMethods.describe),
        .init("cache.set",        MethodCall.storeParams,                                                                                     [.write, .keyspace], WriteMethods.set),
        .init("cache.touch",      ["key", "expiration", "memoryExpiration", "forcedExtension", "options"],                                    [.write, .keyspace], WriteMethods.touch),
        .init("cache.remove",     ["key", "fromMemory", "fromDisk", "forcedExtension", "options"],                                            [.write, .keyspace], WriteMethods.remove),
        .init("cache.clear",      ["memory", "disk", "shared", "options"],                                                                    [.write, .keyspace], WriteMethods.clear),
        .init("cache.removeExpired", ["memory", "disk", "referenceDate", "options"],                                                          [.write, .admin],   WriteMethods.removeExpired),
        .init("cache.trim",       ["options"],                                                                                                [.write, .admin],   WriteMethods.trim),
        .init("cache.totalSize",  ["options"],                                                                                                [.read, .admin],    InfoMethods.totalSize),
        .init("cache.add",        MethodCall.storeParams,                                                                                     [.write, .keyspace], AtomicMethods.add),
        .init("cache.cas",        MethodCall.casParams,                                                                                       [.write, .keyspace], AtomicMethods.cas),
        .init("cache.incr",       ["key", "by", "initial", "create", "expiration", "memoryExpiration", "toDisk", "options"],                  [.write, .keyspace], AtomicMethods.incr),
        .init("cache.getMany",    ["keys", "encoding", "extendingExpiration", "fromMemoryOnly", "options"],                                   [.read, .keyspace], MultiKeyMethods.getMany),
        .init("cache.setMany",    ["entries", "toDisk", "options"],                                                                           [.write, .keyspace], MultiKeyMethods.setMany),
        .init("cache.removeMany", ["keys", "fromMemory", "fromDisk", "options"],                                                              [.write, .keyspace], MultiKeyMethods.removeMany),
        .init("cache.keys",       ["prefix", "cursor", "limit", "options"],                                                                   [.read, .keyspace], KeyListMethods.keys),
        .init("cache.removePrefix", ["prefix", "options"],                                                                                    [.write, .keyspace], KeyListMethods.removePrefix),
        .init("cache.lease",      ["key", "ttl", "wait", "encoding", "options"],                                                              [.read, .keyspace], LeaseMethods.lease),
        .init("cache.releaseLease", ["key", "lease", "options"],                                                                              [.fast, .read, .keyspace], LeaseMethods.releaseLease),
        .init("cache.leaseStatus", ["key", "options"],                                                                                        [.fast, .read, .keyspace], LeaseMethods.leaseStatus),
        .init("cache.stats",      ["options"],                                                                                                [.read, .fast, .admin], InfoMethods.stats),
        .init("server.ping",      [],                                                                                                         [.fast],            InfoMethods.serverPing),
        .init("server.info",      [],                                                                                                         [.fast],            InfoMethods.serverInfo),
        .init("server.metrics",   [],                                                                                                         [.fast, .admin],    MetricsMethods.metrics),
        .init("connection.configure", ["callbackQueue", "loadDiskFileSynchronously", "extendingExpiration"],                                                        [.fast],            InfoMethods.connectionConfigure),
        .init("$/cancelRequest",  ["id"],                                                                                                     [.transport, .fast], TransportMethods.cancelRequest),
        .init("debug.sleep",      ["seconds", "on", "options"],                                                                               [.debug],           InfoMethods.debugSleep),
    ]
}

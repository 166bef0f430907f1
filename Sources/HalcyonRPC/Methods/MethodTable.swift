// The method table: every JSON-RPC method the daemon knows, one spec each (name, the
// params it accepts, its flags, its handler, and beside the handler its memory answer or
// direct write, if it has one), as Redis declares each command once with its arity, flags
// and handler. The dispatcher checks what a spec states before the handler runs; the
// transport asks a spec's flags and routes.
//
// Adding a method is one `table.add` line below, and its handler (and any memory answer
// or direct write) beside its kind: ReadMethods, WriteMethods, InfoMethods, AtomicMethods,
// MultiKeyMethods, KeyListMethods, LeaseMethods, MetricsMethods, TransportMethods. A new
// flag is a constant of `MethodFlags`, set on the lines it concerns.
//
// Flags: `read` reads the cache and changes nothing (a sliding expiration aside); `write`
// changes it and runs in the cache's order across connections; `fast` can be answered
// without waiting for that order (the synchronous path); `transport` is carried out by the
// transport itself (`$/cancelRequest`: never held, never reaches a handler); `debug` exists
// only with `--enable-debug-methods`. Under `--access`: `admin` needs the admin right,
// `write` the write right, `read` the read right; `keyspace` lines act in the caller's
// namespace.
//
// Routes beside the handler: `memoryAnswer` answers at once from memory on the reading
// thread (only on a `fast` method that is not a debug method); `directWrite` turns the
// request into a write the transport commits with the others of its read burst (only on a
// `write` method). `MethodSpec`'s initialisers check both and `MethodTable` refuses a name
// twice, when the table is built at the dispatcher's start.
//
// Before any handler runs, `Dispatcher.prepare` checks what the spec states, in a fixed
// order (the first failure is the one reported): the method exists and is enabled, its
// params name nothing the spec does not list (-32602 `unknownParam`), its `options` are
// valid. A request resolves its spec once, when it is parsed, and is prepared once; every
// later step reads the prepared call.

import HalcyonCache
import HalcyonSupport

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

extension Dispatcher {
    /// Every method, one spec each, numbered in this order (`Dispatcher.methodNames`).
    static let methodTable: [MethodSpec] = {
        var table = MethodTable()
        //        name                  params                                                                     flags                       handler                         memory answer / direct write
        table.add("cache.get",          ReadMethods.GetQuery.params,                                               [.read, .fast, .keyspace],  ReadMethods.get,                memoryAnswer: ReadMethods.getFromMemory)
        table.add("cache.isCached",     MethodCall.lookupParams,                                                   [.read, .fast, .keyspace],  ReadMethods.isCached,           memoryAnswer: ReadMethods.isCachedFromMemory)
        table.add("cache.describe",     MethodCall.lookupParams,                                                   [.read, .fast, .keyspace],  ReadMethods.describe,           memoryAnswer: ReadMethods.describeFromMemory)
        table.add("cache.set",          MethodCall.storeParams,                                                    [.write, .keyspace],        WriteMethods.set,               directWrite: WriteMethods.directSet)
        table.add("cache.touch",        ["key", "expiration", "memoryExpiration", "forcedExtension", "options"],   [.write, .keyspace],        WriteMethods.touch)
        table.add("cache.remove",       ["key", "fromMemory", "fromDisk", "forcedExtension", "options"],           [.write, .keyspace],        WriteMethods.remove)
        table.add("cache.clear",        ["memory", "disk", "shared", "options"],                                   [.write, .keyspace],        WriteMethods.clear)
        table.add("cache.removeExpired",["memory", "disk", "referenceDate", "options"],                            [.write, .admin],           WriteMethods.removeExpired)
        table.add("cache.trim",         ["options"],                                                               [.write, .admin],           WriteMethods.trim)
        table.add("cache.totalSize",    ["options"],                                                               [.read, .admin],            InfoMethods.totalSize)
        table.add("cache.add",          MethodCall.storeParams,                                                    [.write, .keyspace],        AtomicMethods.add,              directWrite: AtomicMethods.directAdd)
        table.add("cache.cas",          MethodCall.casParams,                                                      [.write, .keyspace],        AtomicMethods.cas,              directWrite: AtomicMethods.directCas)
        table.add("cache.incr",         AtomicMethods.IncrParams.params,                                           [.write, .keyspace],        AtomicMethods.incr,             directWrite: AtomicMethods.directIncr)
        table.add("cache.getMany",      ["keys", "encoding", "extendingExpiration", "fromMemoryOnly", "options"],  [.read, .keyspace],         MultiKeyMethods.getMany)
        table.add("cache.setMany",      ["entries", "toDisk", "options"],                                          [.write, .keyspace],        MultiKeyMethods.setMany)
        table.add("cache.removeMany",   ["keys", "fromMemory", "fromDisk", "options"],                             [.write, .keyspace],        MultiKeyMethods.removeMany)
        table.add("cache.keys",         ["prefix", "cursor", "limit", "options"],                                  [.read, .keyspace],         KeyListMethods.keys)
        table.add("cache.removePrefix", ["prefix", "options"],                                                     [.write, .keyspace],        KeyListMethods.removePrefix)
        table.add("cache.lease",        ["key", "ttl", "wait", "encoding", "options"],                             [.read, .keyspace],         LeaseMethods.lease)
        table.add("cache.releaseLease", ["key", "lease", "options"],                                               [.read, .fast, .keyspace],  LeaseMethods.releaseLease)
        table.add("cache.leaseStatus",  ["key", "options"],                                                        [.read, .fast, .keyspace],  LeaseMethods.leaseStatus)
        table.add("cache.stats",        ["options"],                                                               [.read, .fast],             InfoMethods.stats)
        table.add("server.ping",        [],                                                                        [.fast],                    InfoMethods.serverPing,         memoryAnswer: InfoMethods.serverPingNow)
        table.add("server.info",        [],                                                                        [.fast],                    InfoMethods.serverInfo)
        table.add("server.metrics",     [],                                                                        [.fast, .admin],            MetricsMethods.metrics)
        table.add("connection.configure",["callbackQueue", "loadDiskFileSynchronously", "extendingExpiration"],     [.fast],                    InfoMethods.connectionConfigure)
        table.add("$/cancelRequest",    ["id"],                                                                    [.transport, .fast],        TransportMethods.cancelRequest)
        table.add("debug.sleep",        ["seconds", "on", "options"],                                              [.debug],                   InfoMethods.debugSleep)
        return table.specs
    }()
}

/// The table being declared: numbers each spec by its position and refuses a name twice.
///
/// Threading: a local value of the table's initialiser.
struct MethodTable {
    private(set) var specs: [MethodSpec] = []
    private var names: Set<String> = []

    /// Adds a method run by `handler` (see `MethodSpec.init`).
    mutating func add(
        _ name: String, _ params: ParamNames, _ flags: MethodFlags, _ handler: @escaping MethodSpec.CallHandler,
        memoryAnswer: MethodSpec.MemoryAnswer? = nil, directWrite: MethodSpec.DirectWriteBuilder? = nil
    ) {
        append(MethodSpec(index: specs.count, name, params, flags, handler,
                          memoryAnswer: memoryAnswer, directWrite: directWrite))
    }

    /// Adds a method the transport carries out itself.
    mutating func add(
        _ name: String, _ params: ParamNames, _ flags: MethodFlags, _ handler: @escaping MethodSpec.TransportHandler
    ) {
        append(MethodSpec(index: specs.count, name, params, flags, handler))
    }

    private mutating func append(_ spec: MethodSpec) {
        precondition(names.insert(spec.name).inserted, "method table: \(spec.name) twice")
        // Both loops count references to a request's spec and its param names: immortal,
        // those counts write nothing (`Immortal`).
        Immortal.keep(spec.params)
        specs.append(Immortal.keep(spec))
    }
}

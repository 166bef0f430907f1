// What one method is, in one value: its name, the params it takes, its flags, its handler,
// and beside the handler its optional memory answer and direct write. The table of these
// (MethodTable.swift) is numbered and checked once, when the dispatcher starts; a request
// resolves its spec once, when it is parsed, and every later step reads it (the
// transport's checks, the memory answer, the direct write, the handler, and the method's
// latency series).

import HalcyonCache
import HalcyonJSON

/// A method's spec: everything the daemon does for that method, found from one place.
///
/// A spec cannot be made that breaks the table's rules: its initialiser requires a `fast`
/// method that is not a debug method for a memory answer, a `write` method for a direct
/// write, and the `transport` flag exactly for a transport handler; `MethodTable.add`
/// refuses a name twice. All of it runs when the table is built, at start.
///
/// Threading: immutable; any thread. A class: a request holds its method's spec, and a
/// struct of strings, sets and closures would cost a retain per member per copy.
public final class MethodSpec: Sendable {
    /// Runs a request: returns its storage task when the work was queued.
    typealias CallHandler = @Sendable (Dispatcher, MethodCall) throws(RPCError) -> CacheTask?
    /// Decodes a `transport` method's params into what the transport is to do.
    typealias TransportHandler = @Sendable (Params) throws(RPCError) -> TransportAction

    enum Handler: Sendable {
        case call(CallHandler)
        case transport(TransportHandler)
    }

    /// A method's answer from memory (`Dispatcher.answerFromMemory`): writes the whole
    /// reply for `id` into the writer, or writes nothing and says what it found out. Throws
    /// (before any effect) for params the handler will refuse, so the refusal has one source.
    typealias MemoryAnswer = @Sendable (
        Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID, inout JSONWriter
    ) throws(RPCError) -> Dispatcher.MemoryAnswerResult

    /// A method's direct write (`Dispatcher.directWrite`), from its checked params and the
    /// call's options. Throws what the handler would refuse the request with.
    typealias DirectWriteBuilder = @Sendable (_ params: Params, _ options: HybridCache.Options)
        throws(RPCError) -> HybridCache.DirectWrite

    /// A memory answer, held in a struct rather than as an optional function: a function
    /// stored straight into a generic container (an optional, an array, a dictionary value)
    /// is kept at the generic calling convention, and each container it passed through adds
    /// a reabstraction thunk to every call; inside a struct it keeps its own.
    struct MemoryAnswerRoute: Sendable {
        let answer: MemoryAnswer
    }

    /// A direct write, in a struct for the reason `MemoryAnswerRoute` gives.
    struct DirectWriteRoute: Sendable {
        let build: DirectWriteBuilder
    }

    public let name: String
    /// Member names `params` may hold; anything else is `-32602 unknownParam`.
    let params: ParamNames
    public let flags: MethodFlags
    let handler: Handler
    /// The synchronous answer from memory, if the method has one (a `fast`, non-debug method).
    let memoryAnswer: MemoryAnswerRoute?
    /// The direct write, if the method has one (a `write` method).
    let directWrite: DirectWriteRoute?
    /// Whether `params` may hold `options`, which the dispatcher reads before the handler.
    let takesOptions: Bool
    /// The method's position in the table (`Dispatcher.methodNames`).
    public let index: Int

    /// A method run by `handler`; with a memory answer and/or a direct write beside it.
    convenience init(
        index: Int, _ name: String, _ params: ParamNames, _ flags: MethodFlags, _ handler: @escaping CallHandler,
        memoryAnswer: MemoryAnswer? = nil, directWrite: DirectWriteBuilder? = nil
    ) {
        self.init(index: index, name, params, flags, .call(handler),
                  memoryAnswer: memoryAnswer.map(MemoryAnswerRoute.init), directWrite: directWrite.map(DirectWriteRoute.init))
    }

    /// A method the transport carries out itself, from what `handler` decodes.
    convenience init(
        index: Int, _ name: String, _ params: ParamNames, _ flags: MethodFlags, _ handler: @escaping TransportHandler
    ) {
        self.init(index: index, name, params, flags, .transport(handler), memoryAnswer: nil, directWrite: nil)
    }

    /// Checks what the flags and the routes require of each other; the table is built once,
    /// at start, so a spec that breaks a rule stops the daemon there.
    private init(
        index: Int, _ name: String, _ params: ParamNames, _ flags: MethodFlags, _ handler: Handler,
        memoryAnswer: MemoryAnswerRoute?, directWrite: DirectWriteRoute?
    ) {
        let isCall: Bool
        switch handler {
        case .call:
            isCall = true
            precondition(!flags.contains(.transport), "\(name): a transport method takes a TransportHandler")
        case .transport:
            isCall = false
            precondition(flags.contains(.transport), "\(name): a TransportHandler needs the transport flag")
        }
        if memoryAnswer != nil {
            precondition(flags.contains(.fast) && !flags.contains(.debug),
                         "\(name): a memory answer needs a fast method that is not a debug method")
        }
        if directWrite != nil {
            precondition(flags.contains(.write), "\(name): a direct write needs a write method")
        }
        self.index = index
        self.name = name
        self.params = params
        self.flags = flags
        self.handler = handler
        self.memoryAnswer = memoryAnswer
        self.directWrite = directWrite
        // A transport method's params never reach `Dispatcher.prepare`.
        self.takesOptions = isCall && params.contains("options")
    }
}

extension MethodSpec {
    /// Every method by name, for callers holding a `String`.
    static let byName: [String: MethodSpec] = Dictionary(
        uniqueKeysWithValues: Dispatcher.methodTable.map { ($0.name, $0) })

    /// The position of `name` in `Dispatcher.methodNames`; nil for a name the table lacks.
    public static func index(of name: String) -> Int? { byName[name]?.index }

    private static let names = ByteNameTable(Dispatcher.methodTable.map(\.name))

    /// The spec whose name is `name`'s bytes, or nil: what `byName` answers, found by
    /// comparing the few names of the same length in place rather than hashing a `String`
    /// (the request path looks a method up once per request).
    public static func named(_ name: UnsafeRawBufferPointer) -> MethodSpec? {
        names.index(of: name).map { Dispatcher.methodTable[$0] }
    }
}

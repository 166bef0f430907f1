// One fuzz input through the request parser and the dispatcher, as the transport would
// hand it a request line (prepared once, offered to memory, then handled), with the
// checks that make a run fail: every reply is one JSON object with `"jsonrpc":"2.0"` and
// either `result` or `error`, and comes within a time limit. Shared by the libFuzzer
// entry point and the corpus replay test.

import Dispatch
import Foundation
import HalcyonCache
import HalcyonJSON
import HalcyonRPC
import HalcyonSupport

/// Runs fuzz inputs against one real cache in a private temporary folder.
///
/// Threading: `check` may be called from one thread at a time (libFuzzer calls it from
/// one); the cache and dispatcher are thread-safe themselves.
public final class RequestFuzzer: Sendable {
    public let folder: URL
    private let cache: HybridCache
    private let dispatcher: Dispatcher
    /// How long one request may take before the input counts as a hang.
    public static let replyTimeout = DispatchTimeInterval.seconds(10)

    public init() {
        folder = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("halcyon-fuzz-\(getpid())-\(UUID().uuidString.prefix(8))")
        var memory = MemoryStorage.Config()
        memory.totalCostLimit = 8 << 20
        var disk = DiskStorage.Config(name: "fuzz", sizeLimit: 64 << 20, directory: folder)
        disk.expiration = .days(1)
        cache = HybridCache(config: .init(memory: memory, disk: disk))
        let facts = ServerFacts(
            version: "fuzz", socketPath: "/nowhere", startedAt: Date(), limits: [],
            diskExpiration: .days(1), memoryExpiration: .seconds(300), debugMethodsEnabled: false,
            liveCounters: { LiveCounters() }
        )
        dispatcher = Dispatcher(cache: cache, facts: facts)
    }

    /// Removes the cache folder.
    public func removeFolder() { try? FileManager.default.removeItem(at: folder) }

    /// Parses `line` as one request line and runs what it asks for.
    /// - Returns: nil when every reply was well formed, else what was wrong.
    public func check(_ line: UnsafeRawBufferPointer) -> String? {
        if let problem = Self.hotLineProblem(line) { return problem }
        switch RPCMessageParser.parse(line: line, maxBatch: 100) {
        case .failure(let error):
            return Self.problem(in: RPCReply.error(id: nil, error).bytes)
        case .single(let element):
            return run(element)
        case .batch(let elements):
            for element in elements {
                if let problem = run(element) { return problem }
            }
            return nil
        }
    }

    private func run(_ element: RPCElement) -> String? {
        switch element {
        case .invalid(let id, let error):
            return Self.problem(in: RPCReply.error(id: id, error).bytes)
        case .request(let request):
            // Protocol notifications are the transport's; the dispatcher never sees them.
            // connection.configure may move delivery to the main queue, which the
            // replaying thread (main, blocked below) could never run: parsed, not run.
            if request.method.hasPrefix("$/") || request.method == "connection.configure" { return nil }
            let session = ConnectionSession(peerDescription: "fuzz")
            var call = dispatcher.prepare(request, session: session)
            // As the transport does for a request with an id: memory first, on this thread.
            if request.id != nil {
                var writer = JSONWriter()
                switch dispatcher.answerFromMemory(&call, into: &writer) {
                case .answered:
                    var line = writer.bytes
                    guard line.popLast() == UInt8(ascii: "\n"), !line.contains(UInt8(ascii: "\n")) else {
                        return "a memory answer is not one line: \(String(decoding: writer.bytes, as: UTF8.self))"
                    }
                    return Self.problem(in: line)
                case .notAnswered:
                    guard writer.bytes.isEmpty else { return "a memory answer that declined wrote a reply" }
                }
            }
            let done = DispatchSemaphore(value: 0)
            let reply = LockedReply()
            dispatcher.handle(call) { answer in
                reply.set(answer.bytes)
                done.signal()
            }
            guard done.wait(timeout: .now() + Self.replyTimeout) == .success else {
                return "no reply to \(request.method) within \(Self.replyTimeout)"
            }
            return Self.problem(in: reply.bytes)
        }
    }

    /// Where the hot-line reader and jansson disagree on `line`, if they do: a line
    /// `HotLine.read` accepts must parse to an object of exactly `jsonrpc` "2.0", an integer
    /// `id` equal to the one read, `method` the one read, and `params` holding `key` alone
    /// (a get) or `key` and a string `value` (a set), whose bytes are the spans read.
    public static func hotLineProblem(_ line: UnsafeRawBufferPointer) -> String? {
        guard let hot = HotLine.read(line) else { return nil }
        let text = String(decoding: line, as: UTF8.self)
        guard case .success(let value) = JSONValue.parse(line) else { return "a hot line jansson refuses: \(text)" }
        let method = hot.method == .get ? "cache.get" : "cache.set"
        let members = hot.method == .get ? 1 : 2
        guard value.kind == .object, value.count == 4, value["jsonrpc"]?.string == "2.0",
              value["method"]?.string == method, value["id"]?.kind == .integer, value["id"]?.int64 == hot.id,
              let params = value["params"], params.kind == .object, params.count == members,
              let key = params["key"]?.stringBytes, key.elementsEqual(line[hot.key]),
              hot.method == .get || params["value"]?.stringBytes?.elementsEqual(line[hot.value]) == true
        else { return "a hot line jansson reads otherwise: \(text)" }
        return nil
    }

    /// What is wrong with one reply's bytes, if anything.
    public static func problem(in bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard case .success(let value) = JSONValue.parse(bytes) else { return "reply is not JSON: \(text)" }
        guard value.kind == .object, value["jsonrpc"]?.string == "2.0" else { return "not a JSON-RPC reply: \(text)" }
        guard (value["result"] != nil) != (value["error"] != nil) else { return "needs result xor error: \(text)" }
        if let error = value["error"] {
            guard error["code"]?.int64 != nil, error["message"]?.string != nil else { return "malformed error: \(text)" }
            guard error["code"]?.int64 != -32603 else { return "internal error (a bug): \(text)" }
        }
        return nil
    }
}

/// The reply bytes handed over from the dispatcher's thread. Threading: thread-safe.
private final class LockedReply: Sendable {
    private let value = Locked<[UInt8]>([])
    func set(_ bytes: [UInt8]) { value.withLock { $0 = bytes } }
    var bytes: [UInt8] { value.withLock { $0 } }
}

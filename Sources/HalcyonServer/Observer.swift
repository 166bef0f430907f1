// What the daemon tells about each connection and each request: log lines at debug and
// trace, and request latencies into the histograms of the request's event loop, which
// `Metrics` sums. The transport calls it once per event.

import HalcyonRPC
import HalcyonSupport
import Logging

/// The daemon's eyes on its connections and requests.
///
/// - debug: a connection opened or closed, with the peer's pid, uid and gid;
/// - trace: each request's method, id, outcome (`ok`, or the error's code and reason) and
///   time to its reply in microseconds;
/// - every request's latency goes into its connection's loop's histograms
///   (`LoopCounters.latencies`), which `Metrics` sums when rendered, whatever the log level.
///
/// Per request: a method lookup without hashing and two relaxed atomic adds into
/// histograms only the request's loop writes. The clock is read per read burst where it
/// can be (`Burst`): a request read in a burst starts at the burst's first request, and
/// one answered from memory in it finishes when the burst ends, which is when its reply
/// is handed to the socket; other replies read the clock as they are written.
///
/// Threading: thread-safe (immutable). `started` and `finished` run on the connection's
/// event loop (the transport records a reply when it writes it, so a deferred result's
/// encoding failure is known); the connection methods on any thread.
final class Observer: Sendable {
    /// The registry whose `render` reads what this observer records (through the loops'
    /// counters, which `Metrics` sums).
    let metrics: Metrics
    let logger: Logger
    /// The logger takes trace messages (its level is fixed at start).
    let tracesRequests: Bool

    init(metrics: Metrics, logger: Logger) {
        self.metrics = metrics
        self.logger = logger
        tracesRequests = logger.logLevel <= .trace
    }

    /// A client was admitted.
    func connectionOpened(_ peer: PeerCredentials) {
        logger.debug("connection opened", metadata: Self.metadata(peer))
    }

    /// An admitted client's connection closed.
    func connectionClosed(_ peer: PeerCredentials) {
        logger.debug("connection closed", metadata: Self.metadata(peer))
    }

    /// A request was handed to the dispatcher at `start` (`MonotonicClock.nanoseconds()`)
    /// on a connection of the loop whose counters are `loop`; call `finished` on the result
    /// with its reply's outcome.
    func started(_ request: RPCRequest, peer: String, loop: LoopCounters, at start: UInt64) -> Request {
        Request(
            histograms: Unmanaged.passUnretained(loop.latencies), index: request.spec?.index ?? RequestLatencies.unknownIndex,
            start: start,
            trace: tracesRequests ? Request.Trace(observer: self, method: request.method, id: request.id, peer: peer) : nil
        )
    }

    /// `started` of a request of the method at `index` in the method table, read from a hot
    /// line (`HotLine`) of a connection whose requests are not traced (`tracesRequests`
    /// false): nothing to name in a trace line.
    func started(methodIndex index: Int, loop: LoopCounters, at start: UInt64) -> Request {
        Request(histograms: Unmanaged.passUnretained(loop.latencies), index: index, start: start, trace: nil)
    }

    private static func metadata(_ peer: PeerCredentials) -> Logger.Metadata {
        ["pid": "\(peer.pid)", "uid": "\(peer.uid)", "gid": "\(peer.gid)"]
    }

    /// One request between the dispatcher and its reply.
    struct Request: Sendable {
        /// Where its latency goes: its connection's loop's histograms, which are immortal
        /// (`RequestLatencies.Histograms`): a request, copied along its path, counts no
        /// reference to them.
        let histograms: Unmanaged<RequestLatencies.Histograms>
        /// Its method's index in `RequestLatencies.methodNames`.
        let index: Int
        /// `MonotonicClock.nanoseconds()` when it was dispatched.
        let start: UInt64
        /// What its trace line names; nil unless the observer traces requests, so that a
        /// request that is not traced carries no strings (each copy of the request would
        /// retain them).
        let trace: Trace?

        /// The names of a traced request.
        struct Trace: Sendable {
            let observer: Observer
            let method: String
            let id: RPCID?
            let peer: String
        }

        /// The reply was written, carrying `error` if any: the handler's error, or the
        /// error that replaced a deferred result which could not be encoded. A success the
        /// transport withdraws because the request was cancelled meanwhile still counts as
        /// the `ok` the handler produced.
        func finished(error: RPCError?) {
            finished(error: error, at: MonotonicClock.nanoseconds())
        }

        /// `finished(error:)` at `now` (`MonotonicClock.nanoseconds()`), read once for the
        /// requests answered together.
        func finished(error: RPCError?, at now: UInt64) {
            let nanoseconds = Int(truncatingIfNeeded: now &- start)
            // -32601: not in the method table, so not a method worth a series of its own.
            let index = error?.code == -32601 ? RequestLatencies.unknownIndex : index
            histograms._withUnsafeGuaranteedRef { $0.record(index: index, nanoseconds: nanoseconds) }
            guard let trace else { return }
            trace.observer.logger.trace("request", metadata: [
                "method": "\(trace.method)",
                "id": "\(trace.id.map { $0.description } ?? "none")",
                "outcome": "\(error.map { "error \($0.code) \($0.reason)" } ?? "ok")",
                "micros": "\(nanoseconds / 1000)",
                "peer": "\(trace.peer)",
            ])
        }
    }

    /// The clock of one connection's read burst (from its first `channelRead` to its
    /// `channelReadComplete`): read once for the requests the burst starts, and once for
    /// the memory answers it gives, whose replies are written together when it ends. Two
    /// clock reads per request were 2.5 % of a pipelined get's CPU (Benchmarks/RESULTS.md,
    /// "The clock per read burst; shard locks without counted references").
    ///
    /// Threading: a value owned by one connection handler, on its event loop.
    struct Burst {
        /// When the burst's first request started; 0 until one did.
        private var start: UInt64 = 0
        /// The burst's memory answers, recorded when it ends.
        private var answered: [Request] = []

        /// The start of a request read in this burst.
        mutating func requestStart() -> UInt64 {
            if start == 0 { start = MonotonicClock.nanoseconds() }
            return start
        }

        /// `request` was answered from memory with no error: recorded when the burst ends.
        /// A traced request is recorded now, so its trace line keeps its place in the log.
        mutating func answered(_ request: Request) {
            if request.trace != nil {
                request.finished(error: nil)
            } else {
                answered.append(request)
            }
        }

        /// The burst ended (or its connection did): its memory answers are recorded at one
        /// reading of the clock, and the next burst reads it afresh.
        mutating func end() {
            start = 0
            guard !answered.isEmpty else { return }
            let now = MonotonicClock.nanoseconds()
            for request in answered { request.finished(error: nil, at: now) }
            answered.removeAll(keepingCapacity: true)
        }
    }
}

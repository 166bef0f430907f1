// What the daemon tells about each connection and each request: log lines at debug and
// trace, and request latencies into `Metrics`. The transport calls it once per event.

import HalcyonRPC
import Logging

/// The daemon's eyes on its connections and requests.
///
/// - debug: a connection opened or closed, with the peer's pid, uid and gid;
/// - trace: each request's method, id, outcome (`ok`, or the error's code and reason) and
///   time to its reply in microseconds;
/// - every request's latency goes to `Metrics` whatever the log level.
///
/// Threading: a value, `Sendable`; its methods may run on any thread.
struct Observer: Sendable {
    let metrics: Metrics
    let logger: Logger

    /// A client was admitted.
    func connectionOpened(_ peer: PeerCredentials) {
        logger.debug("connection opened", metadata: Self.metadata(peer))
    }

    /// An admitted client's connection closed.
    func connectionClosed(_ peer: PeerCredentials) {
        logger.debug("connection closed", metadata: Self.metadata(peer))
    }

    /// A request was handed to the dispatcher; call `finished` on the result with its reply.
    func started(_ request: RPCRequest, peer: String) -> Request {
        Request(observer: self, method: request.method, id: request.id, peer: peer, start: .now)
    }

    private static func metadata(_ peer: PeerCredentials) -> Logger.Metadata {
        ["pid": "\(peer.pid)", "uid": "\(peer.uid)", "gid": "\(peer.gid)"]
    }

    /// One request between the dispatcher and its reply.
    struct Request: Sendable {
        let observer: Observer
        let method: String
        let id: RPCID?
        let peer: String
        let start: ContinuousClock.Instant

        /// The reply was produced (on whatever thread the connection's callback queue
        /// picked). A success the transport later withdraws because the request was
        /// cancelled meanwhile still counts as the `ok` the handler produced.
        func finished(_ reply: RPCReply) {
            finished(error: reply.error)
        }

        /// The reply was written at once (the synchronous path), carrying `error` if any.
        func finished(error: RPCError?) {
            let elapsed = ContinuousClock.now - start
            let nanoseconds = elapsed.components.seconds * 1_000_000_000
                + elapsed.components.attoseconds / 1_000_000_000
            // -32601: not in the method table, so not a method worth a series of its own.
            observer.metrics.observe(method: method, known: error?.code != -32601, nanoseconds: nanoseconds)
            observer.logger.trace("request", metadata: [
                "method": "\(method)",
                "id": "\(id.map { $0.description } ?? "none")",
                "outcome": "\(error.map { "error \($0.code) \($0.reason)" } ?? "ok")",
                "micros": "\(nanoseconds / 1000)",
                "peer": "\(peer)",
            ])
        }
    }
}

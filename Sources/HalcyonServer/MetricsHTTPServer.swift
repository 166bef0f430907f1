// The optional HTTP endpoint for Prometheus scrapers (`--metrics-listen 127.0.0.1:PORT`):
// a minimal HTTP/1.1 responder on loopback only. swift-prometheus renders text but serves
// nothing, so this file is the server.

import NIOCore
import NIOHTTP1
import NIOPosix

/// A loopback address and port for the metrics endpoint, as given to `--metrics-listen`.
///
/// Only loopback hosts are accepted (`127.0.0.0/8`, `::1`, `localhost`): the endpoint
/// has no authentication, and the cache's numbers (key counts, traffic) are nobody
/// else's business. Put a proxy in front to publish them further.
public struct MetricsListenAddress: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int

    /// Parses `HOST:PORT` (`[::1]:PORT` for IPv6). Port 0 asks the kernel for a free one.
    /// - Throws: `MetricsListenAddress.Invalid` naming what is wrong.
    public init(parsing text: String) throws(Invalid) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw Invalid(text: text, reason: "expected [::1]:PORT")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw Invalid(text: text, reason: "expected HOST:PORT") }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard let port = Int(portText), (0...65535).contains(port) else {
            throw Invalid(text: text, reason: "the port must be a number within 0...65535")
        }
        guard Self.isLoopback(String(host)) else {
            throw Invalid(text: text, reason: "only loopback addresses (127.0.0.1, ::1, localhost) are allowed")
        }
        self.host = host == "localhost" ? "127.0.0.1" : String(host)
        self.port = port
    }

    /// A host `init(parsing:)` already accepted, with another port.
    init(checkedHost host: String, port: Int) {
        self.host = host
        self.port = port
    }

    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in UInt8(part).map { String($0) == part } ?? false }
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Why a `--metrics-listen` value was refused.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public let text: String
        public let reason: String
        public var description: String { "--metrics-listen '\(text)': \(reason)" }
    }
}

/// Serves `GET /metrics` (and `GET /`) with the Prometheus text of a `Metrics`; any other
/// path is 404, any other method 405. Keep-alive as HTTP/1.1 asks.
///
/// Threading: the listener and its connections run on the daemon's event loops; the
/// handler is loop-bound like every channel handler. The listener lives until the process
/// exits (the daemon's shutdown ends in `exit`).
enum MetricsHTTPServer {
    /// Binds `address` and starts serving. Returns the bound address (with the real port
    /// when 0 was asked).
    /// - Throws: the bind error (address in use, not available).
    static func start(
        on address: MetricsListenAddress, group: any EventLoopGroup, metrics: Metrics
    ) throws -> MetricsListenAddress {
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Responder(metrics: metrics))
                }
            }
            .bind(host: address.host, port: address.port)
            .wait()
        let port = channel.localAddress?.port ?? address.port
        return MetricsListenAddress(checkedHost: address.host, port: port)
    }

    /// One HTTP connection. Threading: on its channel's event loop only.
    final class Responder: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart

        private let metrics: Metrics
        private var head: HTTPRequestHead?

        init(metrics: Metrics) { self.metrics = metrics }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let request): head = request
            case .body: break
            case .end:
                guard let request = head else { return }
                head = nil
                respond(to: request, context: context)
            }
        }

        private func respond(to request: HTTPRequestHead, context: ChannelHandlerContext) {
            let path = request.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.uri
            let (status, body): (HTTPResponseStatus, String) =
                switch (request.method, path) {
                case (.GET, "/metrics"), (.GET, "/"), (.HEAD, "/metrics"): (.ok, metrics.render())
                case (.GET, _), (.HEAD, _): (.notFound, "not found: try /metrics\n")
                default: (.methodNotAllowed, "only GET\n")
                }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: status == .ok ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain")
            headers.add(name: "Content-Length", value: "\(body.utf8.count)")
            let keepAlive = request.isKeepAlive
            if !keepAlive { headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))),
                          promise: nil)
            if request.method != .HEAD {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))),
                              promise: nil)
            }
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keepAlive { channel.close(promise: nil) }
            }
        }
    }
}

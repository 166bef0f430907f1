// The daemon: wires the storage engine, the protocol and the transport, listens on the
// Unix socket, and runs until SIGTERM/SIGINT, then drains and exits.

import Foundation
import HalcyonCache
import HalcyonRPC
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A running `halcyond`.
///
/// Threads and queues it owns:
/// - the NIO event loops (`configuration.eventLoopThreads`, one per core by default),
///   which read requests, answer memory hits, and write every reply;
/// - the hybrid cache's serial ioQueue, which runs every write and disk read;
/// - the main queue (`dispatchMain()` runs it), which only delivers replies of connections
///   under `mainAsync`/`mainCurrentOrAsync` and receives the signals;
/// - `lifecycleQueue`, which runs the shutdown sequence so that waiting for the drain
///   never blocks the main queue, which replies may still need.
///
/// Threading: `start()` once from the main thread; afterwards the daemon is driven by
/// its queues. `Sendable` because every stored property is immutable or a lock box.
public final class Daemon: Sendable {
    public let configuration: ServerConfiguration
    public let cache: HybridCache
    private let logger: Logger
    private let counters = ServerCounters()
    private let group: MultiThreadedEventLoopGroup
    private let lifecycleQueue = DispatchQueue(label: "halcyon.Daemon.lifecycle")
    /// Open client channels, so shutdown can reach each one; guarded by its own lock.
    private let channels = NIOLockedValueBox([ObjectIdentifier: any Channel]())
    /// The listening channel and the prepared socket, set once by `start()`.
    private let listening = NIOLockedValueBox<(channel: (any Channel)?, socket: PreparedSocket?, stopping: Bool)>(
        (nil, nil, false)
    )
    public static let version = "0.1.0"

    public init(configuration: ServerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.cache = HybridCache(config: Self.cacheConfig(from: configuration))
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.eventLoopThreads))
    }

    static func cacheConfig(from c: ServerConfiguration) -> HybridCache.Config {
        var memory = MemoryStorage.Config()
        memory.totalCostLimit = c.memoryLimit
        memory.countLimit = c.memoryCountLimit
        memory.expiration = c.memoryExpiration
        var disk = DiskStorage.Config(name: c.name, sizeLimit: c.diskSizeLimit, directory: c.cacheDirectory)
        disk.expiration = c.diskExpiration
        disk.usesHashedFileName = c.usesHashedFileNames
        disk.pathExtension = c.pathExtension
        var config = HybridCache.Config(memory: memory, disk: disk)
        config.sweepInterval = c.sweepInterval
        var journal = HybridCache.JournalConfig(fsync: c.fsync)
        journal.maxJournalBytes = c.journalLimit
        journal.maxUnwrittenBytes = c.unwrittenLimit
        config.journal = journal
        return config
    }

    /// Runs the daemon with `configuration` until a signal stops it; never returns.
    /// Start-up failures print one line and exit 1.
    public static func run(configuration: ServerConfiguration, logger: Logger) -> Never {
        let daemon = Daemon(configuration: configuration, logger: logger)
        do {
            try daemon.start()
        } catch {
            logger.critical("halcyond cannot start: \(error)")
            FileHandle.standardError.write(Data("halcyond: \(error)\n".utf8))
            exit(1)
        }
        let signalSources = daemon.installSignalHandlers()
        withExtendedLifetime(signalSources) { dispatchMain() }
    }

    /// Binds the socket (or adopts the one systemd passed), starts accepting, and says
    /// READY to systemd.
    public func start() throws {
        let dispatcher = Dispatcher(cache: cache, facts: facts())
        let policy = AccessPolicy(configuration: configuration)
        let source = try SocketPath.listenSource(configuration)

        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 512)
            .childChannelOption(ChannelOptions.maxMessagesPerRead, value: 16)
            .childChannelOption(
                ChannelOptions.writeBufferWaterMark,
                value: .init(low: 256 * 1024, high: 1024 * 1024)
            )
            .childChannelInitializer { [self] channel in
                self.initializeConnection(channel, dispatcher: dispatcher, policy: policy)
            }

        let channel: any Channel
        var prepared: PreparedSocket?
        switch source {
        case .inherited(let fd, let path):
            // systemd owns this socket file: it is never unlinked by us.
            channel = try bootstrap.withBoundSocket(fd).wait()
            logger.info("adopted the socket passed by systemd", metadata: ["fd": "\(fd)", "path": "\(path)"])
        case .bind(let socket):
            prepared = socket
            do {
                channel = try bootstrap.bind(unixDomainSocketPath: socket.path).wait()
                try socket.applyPermissions()
            } catch {
                socket.cleanUp()
                throw error
            }
        }
        listening.withLockedValue { $0 = (channel, prepared, false) }
        logger.info(
            "halcyond \(Self.version) listening",
            metadata: [
                "socket": "\(configuration.socketPath)",
                "cacheFolder": "\(cache.diskStorage.directoryURL.path)",
                "diskSizeLimit": "\(configuration.diskSizeLimit)",
                "diskExpiration": "\(configuration.diskExpiration)",
                "memoryLimit": "\(configuration.memoryLimit)",
                "memoryCountLimit": "\(configuration.memoryCountLimit)",
                "memoryExpiration": "\(configuration.memoryExpiration)",
                "maxConnections": "\(configuration.maxConnections)",
                "maxInFlight": "\(configuration.maxInFlight)",
                "eventLoops": "\(configuration.eventLoopThreads)",
            ]
        )
        if !cache.diskStorage.isReady {
            logger.error("the disk tier is not ready; disk requests will fail with diskStorageIsNotReady",
                         metadata: ["cacheFolder": "\(cache.diskStorage.directoryURL.path)"])
        }
        PressureMonitor(cache: cache, counters: counters, logger: logger, queue: lifecycleQueue).start()
        Systemd.notifyReady()
    }

    private func facts() -> ServerFacts {
        let c = configuration
        let counters = self.counters
        return ServerFacts(
            version: Self.version,
            socketPath: c.socketPath,
            startedAt: Date(),
            limits: [
                ("diskSizeLimit", Int64(clamping: c.diskSizeLimit)),
                ("memoryLimit", Int64(c.memoryLimit)),
                ("memoryCountLimit", Int64(c.memoryCountLimit)),
                ("maxLineBytes", Int64(c.maxLineBytes)),
                ("maxBatch", Int64(c.maxBatch)),
                ("maxConnections", Int64(c.maxConnections)),
                ("maxInFlight", Int64(c.maxInFlight)),
            ],
            diskExpiration: c.diskExpiration,
            memoryExpiration: c.memoryExpiration,
            debugMethodsEnabled: c.enableDebugMethods,
            liveCounters: { counters.snapshot }
        )
    }

    // MARK: Connections

    /// Runs on the new channel's event loop: checks who is calling and whether there is
    /// room, then installs the framing and protocol handlers.
    private func initializeConnection(
        _ channel: any Channel, dispatcher: Dispatcher, policy: AccessPolicy
    ) -> EventLoopFuture<Void> {
        // SO_PEERCRED through NIO's socket-option access, as NIO does not expose the fd.
        // On the channel's own loop this completes at once.
        guard let provider = channel as? any SocketOptionProvider else { return channel.close() }
        let raw: EventLoopFuture<PeerCredentialsRaw> = provider.unsafeGetSocketOption(
            level: .socket, name: NIOBSDSocket.Option(rawValue: 17 /* SO_PEERCRED */)
        )
        // Supplementary groups (SO_PEERGROUPS), recorded by the kernel at connect time like
        // SO_PEERCRED; a peer with more groups than fit is matched on its primary group only.
        let groups: EventLoopFuture<PeerGroupsRaw> = provider.unsafeGetSocketOption(
            level: .socket, name: NIOBSDSocket.Option(rawValue: 59 /* SO_PEERGROUPS */)
        )
        let counters = self.counters
        let logger = self.logger
        return raw.and(groups.recover { _ in PeerGroupsRaw() }).flatMap { raw, groups in
            self.admit(
                channel, peer: PeerCredentials(pid: raw.pid, uid: raw.uid, gid: raw.gid, groups: groups.list),
                dispatcher: dispatcher, policy: policy
            )
        }.flatMapError { error in
            logger.warning("refused a peer whose credentials cannot be read", metadata: ["error": "\(error)"])
            counters.peerRefused()
            return channel.close()
        }
    }

    private func admit(
        _ channel: any Channel, peer: PeerCredentials, dispatcher: Dispatcher, policy: AccessPolicy
    ) -> EventLoopFuture<Void> {
        guard policy.allows(peer) else {
            counters.peerRefused()
            logger.warning("refused peer", metadata: ["pid": "\(peer.pid)", "uid": "\(peer.uid)", "gid": "\(peer.gid)"])
            return channel.close()
        }
        guard counters.openConnection(limit: configuration.maxConnections) else {
            logger.warning("refused a connection: too many connections",
                           metadata: ["limit": "\(configuration.maxConnections)", "pid": "\(peer.pid)"])
            let reply = RPCReply.error(
                id: nil, .overloaded(reason: .tooManyConnections, limit: configuration.maxConnections)
            )
            // The channel is not active yet inside the initializer: the refusal is written
            // by a handler once it is.
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(RefuseConnectionHandler(line: reply.bytes))
            }
        }
        let key = ObjectIdentifier(channel)
        let counters = self.counters
        let channels = self.channels
        channels.withLockedValue { $0[key] = channel }
        channel.closeFuture.whenComplete { _ in
            counters.closeConnection()
            channels.withLockedValue { _ = $0.removeValue(forKey: key) }
        }
        let session = ConnectionSession(peerDescription: "pid\(peer.pid)-uid\(peer.uid)")
        let c = configuration
        let logger = self.logger
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandlers([
                ByteToMessageHandler(LineFrameDecoder(maxLineBytes: c.maxLineBytes)),
                ConnectionHandler(
                    dispatcher: dispatcher, counters: counters, maxInFlight: c.maxInFlight,
                    maxBatch: c.maxBatch, maxLineBytes: c.maxLineBytes, session: session, logger: logger
                ),
            ])
        }
    }

    // MARK: Shutdown

    /// Routes SIGTERM/SIGINT to the drain. The returned sources must stay alive.
    private func installSignalHandlers() -> [any DispatchSourceSignal] {
        var sources: [any DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: lifecycleQueue)
            source.setEventHandler { [self] in self.shutDown(signal: sig) }
            source.resume()
            sources.append(source)
        }
        signal(SIGPIPE, SIG_IGN)
        return sources
    }

    /// Stops accepting, lets in-flight requests finish for up to `drainTimeout`, answers
    /// what is left `shuttingDown`, waits for the ioQueue, removes the socket, exits 0.
    /// Runs on `lifecycleQueue`.
    private func shutDown(signal sig: Int32) {
        let (channel, socket, wasStopping) = listening.withLockedValue { state in
            let old = state
            state.stopping = true
            return old
        }
        guard !wasStopping else { return }
        logger.info("shutting down", metadata: ["signal": "\(sig)"])
        Systemd.notifyStopping()
        try? channel?.close().wait()

        let open = channels.withLockedValue { Array($0.values) }
        for client in open { client.pipeline.fireUserInboundEventTriggered(ShutdownEvent.drain) }
        let deadline = Date().addingTimeInterval(configuration.drainTimeout)
        while counters.snapshot.inFlight > 0, Date() < deadline {
            usleep(20_000)
        }
        let remaining = channels.withLockedValue { Array($0.values) }
        if counters.snapshot.inFlight > 0 {
            logger.warning("drain timeout: answering remaining requests with shuttingDown",
                           metadata: ["inFlight": "\(counters.snapshot.inFlight)"])
        }
        for client in remaining { client.pipeline.fireUserInboundEventTriggered(ShutdownEvent.close) }
        for client in remaining { _ = try? client.closeFuture.wait() }
        // Every write that started has finished once the ioQueue is empty; then the
        // lifetimes reads extended in memory are written to their files.
        cache.shutdown()
        socket?.cleanUp()
        try? group.syncShutdownGracefully()
        logger.info("stopped")
        exit(0)
    }
}

/// The kernel's `struct ucred`, mirrored because Glibc's does not import.
struct PeerCredentialsRaw: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// Room for the peer's supplementary groups as `SO_PEERGROUPS` writes them. NIO does not
/// return the written length, so unused slots keep a sentinel no real group has.
struct PeerGroupsRaw: Sendable {
    private static let unused = gid_t.max
    var slots: (
        gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t,
        gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t
    ) = (
        unused, unused, unused, unused, unused, unused, unused, unused, unused, unused, unused, unused, unused, unused,
        unused, unused, unused, unused, unused, unused, unused, unused, unused, unused, unused, unused, unused, unused,
        unused, unused, unused, unused
    )

    var list: [gid_t] {
        withUnsafeBytes(of: slots) { Array($0.bindMemory(to: gid_t.self)).filter { $0 != Self.unused } }
    }
}

/// Writes one error line to a connection that is refused (too many connections), then
/// closes it. Threading: on the channel's event loop, like every handler.
final class RefuseConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let line: [UInt8]

    init(line: [UInt8]) { self.line = line }

    func channelActive(context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: line.count + 1)
        buffer.writeBytes(line)
        buffer.writeInteger(UInt8(ascii: "\n"))
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

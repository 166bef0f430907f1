// The daemon: wires the storage engine, the protocol and the transport, listens on the
// Unix socket, and runs until SIGTERM/SIGINT, then drains and exits.
//
// Refused connections: over `--max-connections` a client gets one `tooManyConnections`
// line; what it sent is read and dropped until it closes (at most one second), because
// closing a Unix socket with unread input resets it and the client would see ECONNRESET
// instead of the line.
//
// The drain: on SIGTERM/SIGINT the lifecycle queue (which receives the signals, so waiting
// for in-flight requests never blocks the main queue they may need) closes the listener and
// sends each connection a `drain` event. A connection then reads whatever the pressure (its
// remaining input is what the client wrote before the signal), answers every request it has
// not started with -32005 `shuttingDown`, lets started ones finish, and closes once nothing
// is in flight and the client has sent nothing for 100 ms. The daemon waits for all
// connections up to `--drain-timeout`; then a `close` event answers whatever is left,
// batches included, and closes. Finally it waits for the cache's queue, writes a last
// pressure summary (so storage errors of the last seconds reach the log), and removes the
// socket and lock.
//
// Signals: SIGTERM, SIGINT (and SIGHUP under `--access`) are caught before the first log
// line (`catchSignals`, which halcyond calls before `run`), by handlers that write the
// signal's number to a pipe (`hc_signal_pipe_catch`); the lifecycle queue reads the pipe
// once the daemon has started. A stop asked while the daemon starts is therefore drained as
// soon as it can be, never lost. Why not dispatch signal sources: libdispatch registers
// them later, on its own thread, and a signal ignored until then is gone, leaving a daemon
// that answers and does not stop.
//
// The main thread parks in `dispatchMain()`; the main queue only delivers replies of
// connections under `mainAsync`/`mainCurrentOrAsync`, and is recognised by a
// `DispatchSpecificKey` (`Thread.isMainThread` is false on it under `dispatchMain()` on
// Linux). Objects made on one thread and freed on another are the rule on the reply path,
// which is why halcyond runs on jemalloc (Sources/halcyond/Allocator.swift).

import CHalcyonSystem
import Foundation
import HalcyonCache
import HalcyonRPC
import HalcyonSupport
import HalcyonVersion
import Logging
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
    /// What each event loop's connections share: its group of direct writes and its
    /// turn's flush (`LoopShare`).
    private let loopShares = LoopShares()
    /// The metrics registry, rendered by `server.metrics` and the optional HTTP endpoint.
    public let metrics: Metrics
    private let observer: Observer
    /// Where `--metrics-listen` serves the metrics; nil for no endpoint.
    private let metricsListen: MetricsListenAddress?
    private let group: MultiThreadedEventLoopGroup
    /// The cache folder's lock, held for the daemon's life (`CacheFolderLock`).
    private let folderLock: CacheFolderLock
    /// The store shared with other hosts (`--upstream`); nil without one.
    private let upstream: UpstreamLink?
    /// Why the upstream could not be set up (an unreadable password file): `start` throws it.
    private let upstreamSetupError: ConfigurationError?
    private let lifecycleQueue = DispatchQueue(label: "halcyon.Daemon.lifecycle")
    /// Open client channels, so shutdown can reach each one; guarded by its own lock.
    private let channels = Locked([ObjectIdentifier: any Channel]())
    /// The listening channel and the prepared socket, set once by `start()`.
    private let listening = Locked<(channel: (any Channel)?, socket: PreparedSocket?, stopping: Bool)>(
        (nil, nil, false)
    )
    /// Whether the current run of failed accepts was logged; reset by the next accepted
    /// connection, so each episode is logged once.
    private let outOfDescriptors = Locked(false)
    /// The spare descriptor that lets the daemon answer clients while it has none left.
    private let descriptorReserve = DescriptorReserve()
    /// The rules of `--access` in force, replaced on SIGHUP; nil without `--access`. A
    /// connection resolves its namespace and rights from the rules it was accepted under.
    private let accessRules: Locked<AccessRules?>
    /// The namespaces peers were admitted to since start (`LearntNamespaces`).
    private let learntNamespaces = Locked(LearntNamespaces())
    /// The listening descriptor, once bound or adopted; -1 before.
    private let listenerFD = Locked<Int32>(-1)
    /// Unfinished request lines of all connections together (`--max-input-buffer`).
    private let inputBudget: InputBudget
    /// Long lines waiting for or in a parse off the event loops, all connections together
    /// (as much again as `--max-input-buffer`; see `ConnectionHandler`).
    private let parseBudget: InputBudget
    /// The summary logger, kept so shutdown can write a last summary.
    private let pressureMonitor = Locked<PressureMonitor?>(nil)
    public static let version = HalcyonVersion.current
    /// How long accepting pauses after an accept fails (out of descriptors, mostly).
    static let acceptBackoff = TimeAmount.milliseconds(250)
    /// Clients that may wait to be accepted.
    static let listenBacklog: Int32 = 512
    /// Each connection's reply bytes unsent: above `high` it stops reading requests
    /// (back-pressure) until they drop below `low`.
    static let writeBufferWaterMark = ChannelOptions.Types.WriteBufferWaterMark(low: 256 * 1024, high: 1024 * 1024)

    /// Makes the daemon over a cache folder whose lock is already held (`lockFolder`):
    /// the cache replays its journal here.
    public init(
        configuration: ServerConfiguration, folderLock: CacheFolderLock, logger: Logger,
        metricsListen: MetricsListenAddress? = nil
    ) {
        self.configuration = configuration
        let accessRules = Locked(configuration.accessRules)
        self.accessRules = accessRules
        self.folderLock = folderLock
        self.logger = logger
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, configuration.eventLoopThreads))
        self.group = group
        let upstream: UpstreamLink?
        do throws(ConfigurationError) {
            upstream = try UpstreamLink.make(configuration, eventLoop: group.next())
            upstreamSetupError = nil
        } catch {
            upstream = nil
            upstreamSetupError = error
        }
        self.upstream = upstream
        var cacheConfig = Self.cacheConfig(from: configuration, logger: logger)
        cacheConfig.upstream = upstream?.cacheConfig(namespaced: configuration.accessRules != nil)
        self.cache = HybridCache(config: cacheConfig)
        if let rules = configuration.accessRules { Self.applyNamespaces(of: rules, learnt: [:], to: cache) }
        self.metrics = Metrics(
            cache: cache, counters: counters,
            limits: Metrics.Limits(memoryBytes: Int64(configuration.memoryLimit),
                                   diskBytes: Int64(clamping: configuration.diskSizeLimit)),
            upstream: { upstream?.facts },
            namedNamespaces: { Set(accessRules.withLock { $0?.namedNamespaces ?? [] }) })
        self.observer = Observer(metrics: metrics, logger: logger)
        self.metricsListen = metricsListen
        self.inputBudget = InputBudget(limit: configuration.maxInputBuffer)
        self.parseBudget = InputBudget(limit: configuration.maxInputBuffer)
    }

    static func cacheConfig(from c: ServerConfiguration, logger: Logger) -> HybridCache.Config {
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
        journal.onDroppedEntry = { key, error in
            var metadata: Logger.Metadata = ["key": "\(key)", "reason": "\(error.reason)"]
            if let code = error.errno {
                metadata["errno"] = "\(code)"
                metadata["errnoName"] = "\(RPCError.errnoName(code))"
            }
            logger.error("dropped an acknowledged value whose file can never be written", metadata: metadata)
        }
        config.journal = journal
        return config
    }

    /// Runs the daemon with `configuration` until a signal stops it; never returns.
    /// Start-up failures print one line and exit 1.
    /// `signals`: the signal pipe `catchSignals` returned, first thing in the process.
    public static func run(
        configuration: ServerConfiguration, logger: Logger, metricsListen: MetricsListenAddress? = nil, signals: Int32
    ) -> Never {
        let daemon: Daemon
        do {
            try UpstreamLink.checkPasswordFile(configuration)
            let folderLock = try lockFolder(configuration, logger: logger)
            daemon = Daemon(configuration: configuration, folderLock: folderLock, logger: logger, metricsListen: metricsListen)
            try daemon.start()
        } catch {
            // Once: the log goes to stderr already (a second plain line repeated it).
            logger.critical("halcyond cannot start: \(error)")
            exit(1)
        }
        let signalSource = daemon.watchSignals(signals)
        withExtendedLifetime(signalSource) { dispatchMain() }
    }

    /// Checks the cache folder and takes its lock, before anything of the cache exists:
    /// a refused daemon creates nothing (no folder, no journal segment).
    /// - Throws: `CacheFolderCheck.Failure` for a folder others may write to;
    ///   `CacheFolderLock.Failure` for a folder another daemon holds or this one cannot use.
    public static func lockFolder(_ configuration: ServerConfiguration, logger: Logger) throws -> CacheFolderLock {
        let cache = cacheConfig(from: configuration, logger: logger)
        let folder = configuration.cacheDirectory.appendingPathComponent(cache.disk.name, isDirectory: true)
        try CacheFolderCheck.verify(configuration.cacheDirectory)
        try CacheFolderCheck.verify(folder)
        let journal = cache.journal.map { HybridCache.journalDirectory($0, diskPath: folder.path) } ?? folder.path + ".journal"
        return try CacheFolderLock.acquire(folder: folder, journal: URL(fileURLWithPath: journal, isDirectory: true))
    }

    /// Binds the socket (or adopts the one systemd passed), starts accepting, and says
    /// READY to systemd.
    public func start() throws {
        if let upstreamSetupError { throw upstreamSetupError }
        let source = try SocketPath.listenSource(configuration)
        let dispatcher = Dispatcher(cache: cache, facts: facts(socketPath: source.path))
        let policy = AccessPolicy(configuration: configuration)
        upstream?.start(logger: logger)
        lifecycleQueue.async { [self] in learnStoredNamespaces() }

        let logger = self.logger
        let outOfDescriptors = self.outOfDescriptors
        let reserve = self.descriptorReserve
        let listenerFD = self.listenerFD
        let counters = self.counters
        let refusal = RPCReply.error(id: nil, .overloaded(reason: .outOfDescriptors)).bytes
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: Self.listenBacklog)
            .serverChannelInitializer { channel in
                // An accept that fails for want of descriptors (EMFILE, ENFILE) leaves the
                // client in the backlog and the listening socket readable: the event loop
                // would retry it at once, forever. The spare descriptor lets each failure
                // answer and close the waiting clients instead (see DescriptorReserve), and
                // the backoff spaces out the accepts that follow.
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        AcceptBackoffHandler(shouldForwardIOErrorCaught: false) { error in
                            let first = outOfDescriptors.withLock { logged in
                                defer { logged = true }
                                return !logged
                            }
                            if first {
                                logger.error("out of descriptors: refusing new connections until descriptors free up",
                                             metadata: ["error": "\(error)"])
                            }
                            if error.errnoCode == EMFILE || error.errnoCode == ENFILE {
                                let refused = reserve.shedWaitingClients(listener: listenerFD.withLock { $0 }, line: refusal)
                                for _ in 0..<refused { counters.peerRefused() }
                            }
                            return Self.acceptBackoff
                        }
                    )
                }
            }
            .childChannelOption(ChannelOptions.maxMessagesPerRead, value: 16)
            .childChannelOption(ChannelOptions.writeBufferWaterMark, value: Self.writeBufferWaterMark)
            .childChannelInitializer { [self] channel in
                self.initializeConnection(channel, dispatcher: dispatcher, policy: policy)
            }

        // Before binding: a taken metrics port fails the start with only the lock to undo.
        if let metricsListen {
            do {
                let address = try MetricsHTTPServer.start(on: metricsListen, group: group, metrics: metrics)
                logger.info("serving metrics over HTTP", metadata: ["address": "\(address)"])
            } catch {
                if case .bind(let socket) = source { socket.cleanUp() }
                throw error
            }
        }
        let channel: any Channel
        var prepared: PreparedSocket?
        switch source {
        case .inherited(let fd, let path):
            // systemd owns this socket file: it is never unlinked by us.
            listenerFD.withLock { $0 = fd }
            channel = try bootstrap.withBoundSocket(fd).wait()
            logger.info("adopted the socket passed by systemd", metadata: ["fd": "\(fd)", "path": "\(path)"])
        case .bind(let socket):
            prepared = socket
            do {
                let fd = try socket.bindAndListen(backlog: Self.listenBacklog)
                listenerFD.withLock { $0 = fd }
                channel = try bootstrap.withBoundSocket(fd).wait()
                try socket.applyPermissions()
            } catch {
                socket.cleanUp()
                throw error
            }
        }
        listening.withLock { $0 = (channel, prepared, false) }
        var listeningMetadata: Logger.Metadata = [
            "socket": "\(source.path)",
            "cacheFolder": "\(cache.diskStorage.directoryURL.path)",
        ]
        for (name, value) in configuration.limitsForLog { listeningMetadata[name] = "\(value)" }
        logger.info("halcyond \(Self.version) listening", metadata: listeningMetadata)
        if let code = cache.diskStorage.notReadyError {
            logger.error("the disk tier is not ready; disk requests will fail with diskStorageIsNotReady",
                         metadata: ["cacheFolder": "\(cache.diskStorage.directoryURL.path)",
                                    "errno": "\(code)", "errnoName": "\(RPCError.errnoName(code))"])
        }
        let monitor = PressureMonitor(cache: cache, counters: counters, logger: logger, queue: lifecycleQueue)
        pressureMonitor.withLock { $0 = monitor }
        monitor.start()
        Systemd.notifyReady()
    }

    private func facts(socketPath: String) -> ServerFacts {
        let c = configuration
        let counters = self.counters
        let metrics = self.metrics
        var facts = ServerFacts(
            version: Self.version,
            socketPath: socketPath,
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
        facts.cacheName = c.name
        facts.metricsText = { metrics.render() }
        let upstream = self.upstream
        if upstream != nil { facts.upstream = { upstream?.facts } }
        return facts
    }

    // MARK: Connections

    /// Runs on the new channel's event loop: checks who is calling and whether there is
    /// room, then installs the framing and protocol handlers.
    private func initializeConnection(
        _ channel: any Channel, dispatcher: Dispatcher, policy: AccessPolicy
    ) -> EventLoopFuture<Void> {
        let recovered = outOfDescriptors.withLock { logged in
            defer { logged = false }
            return logged
        }
        if recovered {
            logger.notice("accepting connections again",
                          metadata: ["refusedForWantOfDescriptors": "\(descriptorReserve.shedCount)"])
        }
        let counters = self.counters
        let logger = self.logger
        return PeerCredentials.of(channel: channel).flatMap { peer in
            self.admit(channel, peer: peer, dispatcher: dispatcher, policy: policy)
        }.flatMapError { error in
            logger.warning("refused a peer whose credentials cannot be read", metadata: ["error": "\(error)"])
            counters.peerRefused()
            return channel.close()
        }
    }

    private func admit(
        _ channel: any Channel, peer: PeerCredentials, dispatcher: Dispatcher, policy: AccessPolicy
    ) -> EventLoopFuture<Void> {
        // Under --access the rules decide, once: the connection keeps what they grant it.
        let rules = accessRules.withLock { $0 }
        let access = rules?.access(for: peer)
        // A `$user` namespace is learnt here; the file's own were accounted with the rules.
        if let namespace = access?.namespace, let rules {
            cache.registerNamespace(namespace)
            let step = learntNamespaces.withLock { $0.admit(namespace, peer: peer, quotas: rules.hasPeerUserQuotas) }
            if step != .now {
                // Its `$user` line may carry quotas: they are installed before any of its
                // connections reads a request, off the event loop and in order with
                // reloads (the lifecycle queue is serial, so a later connection's turn
                // comes after the install).
                let promise = channel.eventLoop.makePromise(of: Void.self)
                lifecycleQueue.async { [self] in
                    if step == .install {
                        if let rules = accessRules.withLock({ $0 }) { applyNamespaces(of: rules) }
                        learntNamespaces.withLock { $0.installed(namespace) }
                    }
                    promise.succeed(())
                }
                return promise.futureResult.flatMap { [self] in
                    openConnection(channel, peer: peer, rules: rules, access: access, dispatcher: dispatcher, policy: policy)
                }
            }
        }
        return openConnection(channel, peer: peer, rules: rules, access: access, dispatcher: dispatcher, policy: policy)
    }

    /// The rest of `admit`: refuses a peer the rules or the policy do not admit, or one
    /// over `--max-connections`, else installs the connection's handlers.
    private func openConnection(
        _ channel: any Channel, peer: PeerCredentials, rules: AccessRules?, access: ConnectionAccess?,
        dispatcher: Dispatcher, policy: AccessPolicy
    ) -> EventLoopFuture<Void> {
        guard rules == nil ? policy.allows(peer) : access != nil else {
            counters.peerRefused()
            logger.warning("refused peer", metadata: ["pid": "\(peer.pid)", "uid": "\(peer.uid)", "gid": "\(peer.gid)"])
            // Told why before the close, as a refusal for --max-connections is; nothing
            // it sent is read.
            let error: RPCError = rules == nil
                ? .peerNotAllowed(uid: peer.uid, gid: peer.gid) : .peerNotAllowedByRules(uid: peer.uid, gid: peer.gid)
            let reply = RPCReply.error(id: nil, error)
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(RefuseConnectionHandler(line: reply.bytes))
            }
        }
        guard counters.openConnection(limit: configuration.maxConnections) else {
            counters.peerRefused()
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
        channels.withLock { $0[key] = channel }
        let observer = self.observer
        observer.connectionOpened(peer)
        channel.closeFuture.whenComplete { _ in
            observer.connectionClosed(peer)
            counters.closeConnection()
            channels.withLock { _ = $0.removeValue(forKey: key) }
        }
        let inputBudget = self.inputBudget
        let parseBudget = self.parseBudget
        let session = ConnectionSession(peerDescription: "pid\(peer.pid)-uid\(peer.uid)", access: access)
        let c = configuration
        let logger = self.logger
        let loopShares = self.loopShares
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandlers([
                ConnectionHandler(
                    dispatcher: dispatcher, counters: counters, maxInFlight: c.maxInFlight,
                    maxBatch: c.maxBatch, maxLineBytes: c.maxLineBytes, maxOutputBuffer: c.maxOutputBuffer,
                    writeBufferHighWater: Self.writeBufferWaterMark.high, maxInputBuffer: c.maxInputBuffer,
                    session: session, logger: logger, observer: observer, loopShares: loopShares,
                    inputBudget: inputBudget, parseBudget: parseBudget
                ),
            ])
        }
    }

    // MARK: Shutdown

    /// A signal this daemon could not catch.
    public struct SignalSetupError: Error, CustomStringConvertible {
        let errno: Int32
        public var description: String { "cannot catch signals: \(String(cString: strerror(errno)))" }
    }

    /// Catches SIGTERM and SIGINT (the drain) and, under `--access`, SIGHUP (the rules'
    /// reload) on the signal pipe from now on, and ignores SIGPIPE; returns the pipe's read
    /// end, for `run`. Called before the first line is logged: a signal from then on waits
    /// on the pipe until the daemon has started, and is then handled.
    public static func catchSignals(_ configuration: ServerConfiguration) throws(SignalSetupError) -> Int32 {
        let pipe = hc_signal_pipe_open()
        guard pipe >= 0 else { throw SignalSetupError(errno: errno) }
        var caught = [SIGTERM, SIGINT]
        if configuration.accessFile != nil { caught.append(SIGHUP) }
        for sig in caught where hc_signal_pipe_catch(sig) != 0 {
            throw SignalSetupError(errno: errno)
        }
        signal(SIGPIPE, SIG_IGN)
        return pipe
    }

    /// Reads the signal pipe on the lifecycle queue: SIGTERM and SIGINT start the drain,
    /// SIGHUP reloads the access rules. A signal that came while the daemon started is
    /// read at once. The returned source must stay alive.
    private func watchSignals(_ pipe: Int32) -> any DispatchSourceRead {
        let source = DispatchSource.makeReadSource(fileDescriptor: pipe, queue: lifecycleQueue)
        source.setEventHandler { [self] in
            var bytes = [UInt8](repeating: 0, count: 64)
            while true {
                let count = bytes.withUnsafeMutableBytes { read(pipe, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return }
                for sig in bytes[..<count].map(Int32.init) {
                    if sig == SIGHUP { reloadAccessRules() } else { shutDown(signal: sig) }
                }
            }
        }
        source.resume()
        return source
    }

    /// Reads the `--access` file again (on SIGHUP): good rules apply to connections
    /// accepted from now on, and their quotas at once (`applyNamespaces`); bad ones are
    /// logged and the rules in force stay. Open
    /// connections keep what they were granted. Runs on `lifecycleQueue`.
    private func reloadAccessRules() {
        guard let path = configuration.accessFile else { return }
        do {
            let rules = try AccessRules.load(path: path)
            accessRules.withLock { $0 = rules }
            applyNamespaces(of: rules)
            learnStoredNamespaces()
            logger.notice("access rules reloaded", metadata: ["file": "\(path)", "rules": "\(rules.rules.count)"])
        } catch {
            logger.error("access rules not reloaded; the previous rules stay in force",
                         metadata: ["file": "\(path)", "error": "\(error)"])
        }
    }

    /// Learns the `$user` namespaces that hold entries from before (a start, or rules that
    /// now give `$user` lines quotas), so that their quotas hold before their users
    /// connect: each stored namespace whose name is a user's, and which the rules grant
    /// that user through a `$user` line, is learnt as that user's, as its first connection
    /// would learn it. Connections of those namespaces wait for the install, as for a
    /// namespace learnt by a connection. Runs on `lifecycleQueue`; the listing runs on the
    /// ioQueue in the background.
    private func learnStoredNamespaces() {
        guard accessRules.withLock({ $0?.hasPeerUserQuotas }) == true else { return }
        cache.storedNamespaces { [self] stored in
            lifecycleQueue.async { [self] in
                guard let rules = accessRules.withLock({ $0 }), rules.hasPeerUserQuotas else { return }
                let named = Set(rules.namedNamespaces)
                var learnt: [KeyNamespace] = []
                for namespace in stored where !named.contains(namespace) {
                    guard let peer = rules.peerUserOwner(of: namespace, credentials: AccountNames.credentials(ofUser:)),
                          learntNamespaces.withLock({ $0.learn(namespace, peer: peer) })
                    else { continue }
                    cache.registerNamespace(namespace)
                    learnt.append(namespace)
                }
                guard !learnt.isEmpty else { return }
                applyNamespaces(of: rules)
                learntNamespaces.withLock { book in learnt.forEach { book.installed($0) } }
                logger.notice("quotas installed for stored namespaces", metadata: ["namespaces": "\(learnt.count)"])
            }
        }
    }

    /// `applyNamespaces(of:learnt:to:)` with the `$user` namespaces learnt so far. Runs
    /// on `lifecycleQueue`.
    private func applyNamespaces(of rules: AccessRules) {
        Self.applyNamespaces(of: rules, learnt: learntNamespaces.withLock { $0.peers }, to: cache)
    }

    /// Accounts the namespaces `rules` name (in file order, so stats list them so) and
    /// installs their quotas and those the rules give the `learnt` namespaces (a `$user`
    /// namespace whose line lost its quotas loses them); a namespace now over its quota is
    /// evicted down to it before this returns, on the caller's thread (start, or
    /// `lifecycleQueue`).
    static func applyNamespaces(of rules: AccessRules, learnt: [KeyNamespace: PeerCredentials], to cache: HybridCache) {
        for namespace in rules.namedNamespaces { cache.registerNamespace(namespace) }
        cache.setQuotas(rules.quotas(learnt: learnt))
    }

    /// Stops accepting, lets in-flight requests finish for up to `drainTimeout`, answers
    /// what is left `shuttingDown`, waits for the ioQueue, removes the socket, exits 0.
    /// Runs on `lifecycleQueue`.
    private func shutDown(signal sig: Int32) {
        let (channel, socket, wasStopping) = listening.withLock { state in
            let old = state
            state.stopping = true
            return old
        }
        guard !wasStopping else { return }
        logger.info("shutting down", metadata: ["signal": "\(sig)"])
        Systemd.notifyStopping()
        try? channel?.close().wait()

        let open = channels.withLock { Array($0.values) }
        for client in open { client.pipeline.fireUserInboundEventTriggered(ShutdownEvent.drain) }
        // Each connection closes itself once it has answered everything it read and its
        // client has gone quiet; wait for that, up to the drain timeout.
        let deadline = Date().addingTimeInterval(configuration.drainTimeout)
        while counters.snapshot.inFlight > 0 || !channels.withLock({ $0.isEmpty }), Date() < deadline {
            usleep(20_000)
        }
        let remaining = channels.withLock { Array($0.values) }
        if counters.snapshot.inFlight > 0 {
            logger.warning("drain timeout: answering remaining requests with shuttingDown",
                           metadata: ["inFlight": "\(counters.snapshot.inFlight)"])
        }
        for client in remaining { client.pipeline.fireUserInboundEventTriggered(ShutdownEvent.close) }
        for client in remaining { _ = try? client.closeFuture.wait() }
        // Every write that started has finished once the ioQueue is empty; then the
        // lifetimes reads extended in memory are written to their files.
        cache.shutdown()
        upstream?.shutdown()
        // Errors of the last seconds would otherwise never reach the log.
        pressureMonitor.withLock { $0 }?.checkNow()
        socket?.cleanUp()
        try? group.syncShutdownGracefully()
        logger.info("stopped")
        exit(0)
    }
}

/// Writes one error line to a connection that is refused (too many connections), then
/// closes it. What the client sent is read and dropped until it closes its end, or
/// `lingerTime` passes: closing a Unix socket with unread input resets it, and the client
/// would get ECONNRESET instead of the line.
///
/// Threading: on the channel's event loop, like every handler.
/// The namespaces peers were admitted to since start, each with the first such peer (the
/// rules in force give those a `$user` line grants its quotas), and those whose quotas are
/// being installed. A value, inside the daemon's `Locked`.
struct LearntNamespaces {
    /// What a connection waits for before it reads requests.
    enum Step: Equatable {
        /// Nothing.
        case now
        /// Its namespace is new: install the quotas, then open it.
        case install
        /// Another connection is installing its namespace's quotas: open it after that.
        case wait
    }

    private(set) var peers: [KeyNamespace: PeerCredentials] = [:]
    private var installing: Set<KeyNamespace> = []

    /// Records a connection of `peer` to `namespace`; `quotas`: whether a `$user` line of
    /// the rules in force carries quotas.
    mutating func admit(_ namespace: KeyNamespace, peer: PeerCredentials, quotas: Bool) -> Step {
        guard peers[namespace] == nil else { return installing.contains(namespace) ? .wait : .now }
        peers[namespace] = peer
        guard quotas else { return .now }
        installing.insert(namespace)
        return .install
    }

    /// Records `namespace`, found among the stored entries, as `peer`'s, and marks its
    /// quotas as being installed; false when a connection learnt it already.
    mutating func learn(_ namespace: KeyNamespace, peer: PeerCredentials) -> Bool {
        guard peers[namespace] == nil else { return false }
        peers[namespace] = peer
        installing.insert(namespace)
        return true
    }

    /// The quotas of `namespace` are installed.
    mutating func installed(_ namespace: KeyNamespace) {
        installing.remove(namespace)
    }
}

final class RefuseConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    /// The longest a refused client may keep its connection (and a descriptor) open.
    static let lingerTime = TimeAmount.seconds(1)
    private let line: [UInt8]

    init(line: [UInt8]) { self.line = line }

    func channelActive(context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: line.count + 1)
        buffer.writeBytes(line)
        buffer.writeInteger(UInt8(ascii: "\n"))
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        let channel = context.channel
        context.eventLoop.scheduleTask(in: Self.lingerTime) { channel.close(promise: nil) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}

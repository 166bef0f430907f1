// halcyond's command line: flags in, a validated ServerConfiguration out, then the server.
// Every conversion and default lives in HalcyonServer's `ServerConfiguration(flags:)`, so
// this file only declares the flags and their help.

import ArgumentParser
import Foundation
import Glibc
import HalcyonServer
import HalcyonVersion
import Logging

/// The `halcyond` command. Parsed and run on the main thread by `main.swift`.
struct HalcyondCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "halcyond",
        abstract: "Halcyon cache daemon: JSON-RPC 2.0 over a Unix socket, memory and disk tiers.",
        discussion: """
        Sizes: 4096, 512KiB, 64MiB, 1GiB (binary), 1KB, 1MB, 1GB (decimal); K/M/G alone are binary.
        Durations: 1.5s, 300s, 10m, 1h30m, 7d, 2w, 500ms; a bare number is seconds. Expirations also take 'never'.
        See Docs/OPERATIONS.md.
        """,
        version: HalcyonVersion.current
    )

    @Option(help: ArgumentHelp("Unix socket path (env HALCYON_SOCKET).", discussion: "Default: $XDG_RUNTIME_DIR/halcyon/halcyon.sock, else /tmp/halcyon-<uid>/halcyon.sock."))
    var socket: String?

    @Option(name: .customLong("cache-dir"), help: ArgumentHelp("Disk tier folder (env HALCYON_CACHE_DIR).", discussion: "Default: $XDG_CACHE_HOME/halcyon, else ~/.cache/halcyon."))
    var cacheDir: String?

    @Option(help: "Cache name, shown in server.info. (default: default)")
    var name: String?

    @Option(help: "Disk tier size limit; 0 = none. (default: 1GiB)")
    var diskSizeLimit: String?

    @Option(help: "Default disk expiration, or 'never'. (default: 7d)")
    var diskExpiration: String?

    @Option(help: "Memory tier size limit; 0 = none. (default: 256MiB)")
    var memoryLimit: String?

    @Option(help: "Memory tier entry-count limit; 0 = none. (default: 0)")
    var memoryCountLimit: String?

    @Option(help: "Default memory expiration, or 'never'. (default: 300s)")
    var memoryExpiration: String?

    @Flag(help: "Name disk files by the key itself instead of its SHA-256.")
    var noHashedFileNames = false

    @Option(help: "Extension added to every disk file name. (default: none)")
    var pathExtension: String?

    @Option(help: "Longest request line. (default: 64MiB)")
    var maxLineBytes: String?

    @Option(help: "Most requests in one batch. (default: 1000)")
    var maxBatch: String?

    @Option(help: "Most open connections. (default: 1024)")
    var maxConnections: String?

    @Option(help: "Requests in flight per connection before reading pauses. (default: 1024)")
    var maxInFlight: String?

    @Option(help: "Unsent reply bytes per connection before a client that does not read is disconnected. (default: 64MiB)")
    var maxOutputBuffer: String?

    @Option(help: "Bytes of unfinished request lines all connections may hold together. (default: 512MiB)")
    var maxInputBuffer: String?

    @Option(help: "How often expired entries are removed and size limits enforced; 0 = never. (default: 10m)")
    var sweepInterval: String?

    @Option(help: "When journal writes reach the device: always|everysec|never. (default: everysec)")
    var fsync: String?

    @Option(help: "Bound on the write-ahead journal's bytes; writes wait, then fail with diskBacklog. (default: 256MiB)")
    var journalLimit: String?

    @Option(help: "Bound on acknowledged bytes not yet in their files. (default: 64MiB)")
    var unwrittenLimit: String?

    @Option(help: "Socket file mode, octal. (default: 0600)")
    var socketMode: String?

    @Option(help: "Socket file group, name or gid. (default: the daemon's)")
    var socketGroup: String?

    @Option(name: .customLong("allow-uid"), help: "Also allow this user (name or uid); repeatable.")
    var allowUID: [String] = []

    @Option(name: .customLong("allow-gid"), help: "Also allow members of this group (name or gid); repeatable.")
    var allowGID: [String] = []

    @Option(help: ArgumentHelp(
        "Rules file: one namespace and rights per peer (user, uid, group, gid); reread on SIGHUP.",
        discussion: "Replaces --allow-uid/--allow-gid. Not with --no-hashed-file-names. With --upstream, each namespace shares its own keys. (default: none)"))
    var access: String?

    @Option(help: "How long SIGTERM/SIGINT waits for in-flight work. (default: 10s)")
    var drainTimeout: String?

    @Option(help: "trace|debug|info|notice|warning|error|critical. (default: info)")
    var logLevel: String?

    @Option(help: "Log line format: text or json (one JSON object per line). (default: text)")
    var logFormat: String?

    @Option(help: ArgumentHelp(
        "Serve Prometheus metrics over HTTP on this loopback address, HOST:PORT. (default: off)",
        discussion: "Only 127.0.0.0/8, [::1] and localhost are accepted. Scrape GET /metrics."))
    var metricsListen: String?

    @Flag(help: "Enable debug.* methods (debug.sleep), for tests.")
    var enableDebugMethods = false

    @Option(help: "SwiftNIO event-loop threads. (default: the number of cores)")
    var eventLoopThreads: String?

    @Option(help: ArgumentHelp(
        "Share keys with other hosts through this Redis or Valkey: redis://[user@]host:port[/db] or unix:///path; repeat for several seeds of a cluster. (default: none)",
        discussion: "See Docs/OPERATIONS.md, \"Across machines\"."))
    var upstream: [String] = []

    @Option(help: "File whose first line is the upstream's password (never on the command line). (default: none)")
    var upstreamPasswordFile: String?

    @Option(help: "Share only keys starting with this; repeatable. (default: every key, with --upstream)")
    var upstreamPrefix: [String] = []

    /// The flags as text, for `ServerConfiguration(flags:environment:)`.
    var flags: ServerConfiguration.Flags {
        var flags = ServerConfiguration.Flags()
        flags.socket = socket
        flags.cacheDir = cacheDir
        flags.name = name
        flags.diskSizeLimit = diskSizeLimit
        flags.diskExpiration = diskExpiration
        flags.memoryLimit = memoryLimit
        flags.memoryCountLimit = memoryCountLimit
        flags.memoryExpiration = memoryExpiration
        flags.noHashedFileNames = noHashedFileNames
        flags.pathExtension = pathExtension
        flags.maxLineBytes = maxLineBytes
        flags.maxBatch = maxBatch
        flags.maxConnections = maxConnections
        flags.maxInFlight = maxInFlight
        flags.maxOutputBuffer = maxOutputBuffer
        flags.maxInputBuffer = maxInputBuffer
        flags.sweepInterval = sweepInterval
        flags.fsync = fsync
        flags.journalLimit = journalLimit
        flags.unwrittenLimit = unwrittenLimit
        flags.socketMode = socketMode
        flags.socketGroup = socketGroup
        flags.allowUID = allowUID
        flags.allowGID = allowGID
        flags.access = access
        flags.drainTimeout = drainTimeout
        flags.logLevel = logLevel
        flags.enableDebugMethods = enableDebugMethods
        flags.eventLoopThreads = eventLoopThreads
        flags.upstream = upstream
        flags.upstreamPasswordFile = upstreamPasswordFile
        flags.upstreamPrefix = upstreamPrefix
        return flags
    }

    func run() throws {
        let configuration: ServerConfiguration
        let format: LogFormat
        let listen: MetricsListenAddress?
        do {
            configuration = try ServerConfiguration(flags: flags)
            format = try LogFormat(parsing: logFormat ?? "text")
            listen = try metricsListen.map { text throws(MetricsListenAddress.Invalid) in
                try MetricsListenAddress(parsing: text)
            }
        } catch {
            throw UsageError(message: "\(error)")
        }
        // swift-log to stderr at the chosen level and format, before anything logs.
        // Bootstrapping is allowed once per process, which this is.
        LoggingSystem.bootstrap(format.makeHandler(level: configuration.logLevel))
        let logger = Logger(label: "halcyond")
        // Signals before the first line: a SIGTERM from then on is drained once the daemon
        // has started, however early it came.
        let signals: Int32
        do {
            signals = try Daemon.catchSignals(configuration)
        } catch {
            logger.critical("halcyond cannot start: \(error)")
            Foundation.exit(1)
        }
        logger.info("memory allocator", metadata: ["allocator": "\(Allocator.description)"])
        // Never returns: the main thread parks in dispatchMain(); a drain exits 0, a
        // start-up failure exits 1 with one line on stderr.
        Daemon.run(configuration: configuration, logger: logger, metricsListen: listen, signals: signals)
    }
}

/// A bad flag value, found after ArgumentParser's own parsing; reported like its errors.
struct UsageError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

extension HalcyondCommand {
    /// Parses the command line and runs, mapping every outcome to an exit status:
    /// 0 for success and `--help`, 2 for any bad flag (one line on stderr, as the issue
    /// asks, instead of ArgumentParser's usage block and 64), 1 for a failure while running.
    static func start(arguments: [String] = Array(CommandLine.arguments.dropFirst())) -> Never {
        do {
            // `--help` parses as ArgumentParser's help command, whose run throws the
            // help request; both paths end in `finish(error)`.
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch {
            finish(error)
        }
        Glibc.exit(0)
    }

    private static func finish(_ error: any Error) -> Never {
        if let usage = error as? UsageError { failUsage(usage.message) }
        switch exitCode(for: error) {
        case .success:
            print(fullMessage(for: error))
            Glibc.exit(0)
        case .validationFailure:
            failUsage(message(for: error))
        default:
            printError("halcyond: \(error)")
            Glibc.exit(1)
        }
    }

    private static func failUsage(_ message: String) -> Never {
        let line = message.split(separator: "\n").first.map(String.init) ?? message
        printError("halcyond: \(line) (see halcyond --help)")
        Glibc.exit(2)
    }
}

/// Writes one line to stderr (the `stderr` global is rejected in Swift 6 mode).
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

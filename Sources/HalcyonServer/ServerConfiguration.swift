// Everything an operator can set about one halcyond: where it listens, where it keeps
// files, the cache's limits, the transport's limits and who may connect. The daemon's
// flags (Sources/halcyond) fill it through `ServerConfiguration.Flags`, so flag parsing is
// tested here rather than through a process.

import Foundation
import HalcyonCache
import HalcyonUpstream
import Logging
import NIOCore

/// The settings of one `halcyond` instance: a value type, read by the server at start.
///
/// Required inputs are in `init`; every other field is a `var` whose doc gives its default
/// and the flag that sets it. Build one from command-line text with
/// `ServerConfiguration(flags:environment:)`, or directly:
///
/// ```swift
/// var config = ServerConfiguration(socketPath: "/run/halcyon/halcyon.sock",
///                                  cacheDirectory: URL(fileURLWithPath: "/var/cache/halcyon"))
/// config.memoryLimit = 64 << 20
/// try config.validate()
/// ```
///
/// A plain `Sendable` value: any thread may build, copy and read it.
public struct ServerConfiguration: Sendable {
    /// The Unix socket's path (`--socket`, env `HALCYON_SOCKET`). Default:
    /// `defaultSocketPath(environment:)`. At most 107 bytes (the kernel's `sun_path`).
    public var socketPath: String
    /// The disk tier's folder (`--cache-dir`, env `HALCYON_CACHE_DIR`). Default:
    /// `defaultCacheDirectory(environment:)`.
    public var cacheDirectory: URL
    /// The cache's name, shown in `server.info` and logs (`--name`). Default `"default"`.
    /// Never empty; no `/`, not `.` or `..`, so it can safely name a folder.
    public var name = "default"
    /// The disk tier's size limit in bytes, enforced by the sweep (`--disk-size-limit`).
    /// Default 1 GiB; 0 means no limit.
    public var diskSizeLimit: UInt64 = 1 << 30
    /// How long a disk entry lives unless a request says otherwise (`--disk-expiration`).
    /// Default 7 days.
    public var diskExpiration: StorageExpiration = .days(7)
    /// The memory tier's cost limit in bytes (`--memory-limit`). Default 256 MiB; 0 means
    /// no limit.
    public var memoryLimit: Int = 256 << 20
    /// The memory tier's entry-count limit (`--memory-count-limit`). Default 0: no limit.
    public var memoryCountLimit: Int = 0
    /// How long a memory entry lives unless a request says otherwise
    /// (`--memory-expiration`). Default 300 seconds.
    public var memoryExpiration: StorageExpiration = .seconds(300)
    /// Whether disk file names are the SHA-256 of the key (default `true`;
    /// `--no-hashed-file-names` turns it off, for debugging a cache folder by eye).
    public var usesHashedFileNames = true
    /// An extension appended to every disk file name (`--path-extension`). Default none.
    public var pathExtension: String? = nil
    /// The longest request line accepted, in bytes (`--max-line-bytes`). Default 64 MiB.
    public var maxLineBytes = 64 << 20
    /// The most elements a batch may hold (`--max-batch`). Default 1000.
    public var maxBatch = 1000
    /// The most connections open at once; more are closed at accept (`--max-connections`).
    /// Default 1024.
    public var maxConnections = 1024
    /// Requests in flight per connection before the server stops reading it
    /// (`--max-in-flight`). Default 1024.
    public var maxInFlight = 1024
    /// Unsent reply bytes a connection may hold before its client, which is evidently not
    /// reading, is disconnected (`--max-output-buffer`). Default 64 MiB. A single reply
    /// larger than this still goes out when nothing else is waiting.
    public var maxOutputBuffer = 64 << 20
    /// Bytes of unfinished request lines all connections may hold together
    /// (`--max-input-buffer`). Default 512 MiB; a line that would pass it is dropped and
    /// answered `-32005 inputBufferFull`. As much again bounds the long lines waiting for a
    /// parse off the event loops (past it they are parsed on their loop; nothing refused).
    public var maxInputBuffer = 512 << 20
    /// Seconds between sweeps that remove expired entries and enforce the size limits
    /// (`--sweep-interval`). Default 600 (10 minutes); 0 turns the periodic sweep off.
    public var sweepInterval: TimeInterval = 600
    /// When journal appends reach the device (`--fsync always|everysec|never`). Default
    /// `.everysec`: a background fdatasync at most about a second behind.
    public var fsync: Journal.FsyncPolicy = .everysec
    /// The write-ahead journal's bound in bytes (`--journal-limit`). Default 256 MiB.
    public var journalLimit: UInt64 = 256 << 20
    /// The bound on acknowledged bytes not yet in their per-key files
    /// (`--unwritten-limit`). Default 64 MiB.
    public var unwrittenLimit: UInt64 = 64 << 20
    /// The socket file's permission bits (`--socket-mode`, octal). Default `0o600`.
    public var socketMode: mode_t = 0o600
    /// The socket file's group, if it should differ from the daemon's (`--socket-group`).
    /// Default nil.
    public var socketGroup: gid_t? = nil
    /// Users, besides the daemon's own and root, allowed to talk to it (`--allow-uid`).
    public var allowedUIDs: [uid_t] = []
    /// Groups whose members may talk to it, primary or supplementary (`--allow-gid`).
    public var allowedGIDs: [gid_t] = []
    /// The rules file of `--access`, read again on SIGHUP; nil (default) for no tenancy:
    /// one keyspace for every peer `allowedUIDs`/`allowedGIDs` admit.
    public var accessFile: String? = nil
    /// The rules `accessFile` held at start (`AccessRules`); nil without `--access`.
    public var accessRules: AccessRules? = nil
    /// Seconds the server waits for in-flight work after SIGTERM/SIGINT before answering
    /// the rest with a shutting-down error (`--drain-timeout`). Default 10.
    public var drainTimeout: TimeInterval = 10
    /// The lowest level logged to stderr (`--log-level`). Default `.info`.
    public var logLevel: Logger.Level = .info
    /// Whether `debug.*` methods exist (`--enable-debug-methods`). Default `false`.
    public var enableDebugMethods = false
    /// SwiftNIO event-loop threads (`--event-loop-threads`). Default: the core count.
    public var eventLoopThreads = System.coreCount
    /// The Redis or Valkey deployment shared with other hosts (`--upstream`, repeatable:
    /// several seeds of one cluster). Default none: every key is this host's alone.
    public var upstreamURLs: [UpstreamURL] = []
    /// The file holding the upstream's password (`--upstream-password-file`); its first
    /// line is read at start. Never on the command line or in a log. Default none.
    public var upstreamPasswordFile: String? = nil
    /// Only keys starting with one of these are shared (`--upstream-prefix`, repeatable).
    /// Default empty: with an upstream, every key is shared.
    public var upstreamPrefixes: [String] = []

    /// A configuration with every default, listening at `socketPath` and keeping files in
    /// `cacheDirectory`.
    public init(socketPath: String, cacheDirectory: URL) {
        self.socketPath = socketPath
        self.cacheDirectory = cacheDirectory
    }

    /// The socket path used when neither `--socket` nor `HALCYON_SOCKET` gives one:
    /// `$XDG_RUNTIME_DIR/halcyon/halcyon.sock` when `XDG_RUNTIME_DIR` is an absolute path,
    /// else `/tmp/halcyon-<euid>/halcyon.sock`.
    public static func defaultSocketPath(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return (runtime.hasSuffix("/") ? String(runtime.dropLast()) : runtime) + "/halcyon/halcyon.sock"
        }
        return "/tmp/halcyon-\(geteuid())/halcyon.sock"
    }

    /// The cache folder used when `--cache-dir` is not given: `$HALCYON_CACHE_DIR`, else
    /// `$XDG_CACHE_HOME/halcyon` (only when absolute, as the XDG spec says), else
    /// `$HOME/.cache/halcyon`, with the home folder from the password database when
    /// `HOME` is unset.
    public static func defaultCacheDirectory(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> URL {
        if let explicit = environment["HALCYON_CACHE_DIR"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit, isDirectory: true)
        }
        if let cacheHome = environment["XDG_CACHE_HOME"], cacheHome.hasPrefix("/") {
            return URL(fileURLWithPath: cacheHome, isDirectory: true).appendingPathComponent("halcyon", isDirectory: true)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? AccountNames.homeDirectory(of: geteuid()) ?? "/"
        return URL(fileURLWithPath: home, isDirectory: true)
            .appendingPathComponent(".cache", isDirectory: true)
            .appendingPathComponent("halcyon", isDirectory: true)
    }

    /// The smallest `--max-line-bytes`: room for any request with a short key and value.
    public static let minimumLineBytes = 1024

    /// Checks the values no server could run with.
    /// - Throws: `ConfigurationError.invalid` naming the flag and the reason.
    public func validate() throws(ConfigurationError) {
        func fail(_ flag: String, _ why: String) -> ConfigurationError { .invalid(flag: flag, reason: why) }
        guard !socketPath.isEmpty else { throw fail("--socket", "the socket path is empty") }
        guard socketPath.utf8.count <= SocketPath.maximumPathBytes else {
            throw fail("--socket", "'\(socketPath)' is \(socketPath.utf8.count) bytes; a Unix socket path holds at most \(SocketPath.maximumPathBytes)")
        }
        guard !cacheDirectory.path.isEmpty else { throw fail("--cache-dir", "the cache folder is empty") }
        guard !name.isEmpty, !name.contains("/"), name != ".", name != "..", !name.contains("\0") else {
            throw fail("--name", "'\(name)' cannot name a folder")
        }
        if let ext = pathExtension, ext.isEmpty || ext.contains("/") || ext.contains("\0") {
            throw fail("--path-extension", "'\(ext)' is not a file name extension")
        }
        guard memoryLimit >= 0 else { throw fail("--memory-limit", "must not be negative") }
        guard memoryCountLimit >= 0 else { throw fail("--memory-count-limit", "must not be negative") }
        // Below this not even a ping fits, and every request would be refused lineTooLong.
        guard maxLineBytes >= Self.minimumLineBytes else {
            throw fail("--max-line-bytes", "must be at least 1KiB (\(Self.minimumLineBytes) bytes); requests would not fit")
        }
        guard maxBatch > 0 else { throw fail("--max-batch", "must be greater than zero") }
        guard maxConnections > 0 else { throw fail("--max-connections", "must be greater than zero") }
        guard maxInFlight > 0 else { throw fail("--max-in-flight", "must be greater than zero") }
        guard maxOutputBuffer > 0 else { throw fail("--max-output-buffer", "must be greater than zero") }
        guard maxInputBuffer > 0 else { throw fail("--max-input-buffer", "must be greater than zero") }
        guard sweepInterval >= 0, sweepInterval.isFinite else { throw fail("--sweep-interval", "must be a duration") }
        guard drainTimeout >= 0, drainTimeout.isFinite else { throw fail("--drain-timeout", "must be a duration") }
        guard socketMode & ~0o777 == 0 else { throw fail("--socket-mode", "only permission bits (at most 0777) are allowed") }
        guard socketMode & 0o200 != 0 else {
            throw fail("--socket-mode", "the owner needs write permission to connect (e.g. 0600)")
        }
        guard !diskExpiration.isExpired else { throw fail("--disk-expiration", "must be positive or 'never'") }
        guard !memoryExpiration.isExpired else { throw fail("--memory-expiration", "must be positive or 'never'") }
        guard journalLimit >= 1 << 20 else { throw fail("--journal-limit", "must be at least 1 MiB") }
        guard unwrittenLimit >= 1 << 20 else { throw fail("--unwritten-limit", "must be at least 1 MiB") }
        guard eventLoopThreads > 0 else { throw fail("--event-loop-threads", "must be greater than zero") }
        if upstreamURLs.isEmpty {
            if upstreamPasswordFile != nil { throw fail("--upstream-password-file", "needs --upstream") }
            if !upstreamPrefixes.isEmpty { throw fail("--upstream-prefix", "needs --upstream") }
        }
        if accessFile != nil {
            if !usesHashedFileNames {
                throw fail("--access", "needs hashed file names: a key with its namespace is not a safe file name (drop --no-hashed-file-names)")
            }
            if !allowedUIDs.isEmpty || !allowedGIDs.isEmpty {
                throw fail("--access", "replaces --allow-uid and --allow-gid: give those peers a line of the rules file")
            }
        }
        if upstreamPrefixes.contains("") { throw fail("--upstream-prefix", "must not be empty (leave it out to share every key)") }
    }

    /// The name and every limit and default, as the daemon holds them (bytes, seconds,
    /// counts), named as the flags are in camelCase: the metadata of the start-up
    /// `listening` line. Every flag that bounds or sets something is here.
    public var limitsForLog: [(String, String)] {
        var out: [(String, String)] = [
            ("name", name),
            ("diskSizeLimit", "\(diskSizeLimit)"),
            ("diskExpiration", HumanUnits.formatExpiration(diskExpiration)),
            ("memoryLimit", "\(memoryLimit)"),
            ("memoryCountLimit", "\(memoryCountLimit)"),
            ("memoryExpiration", HumanUnits.formatExpiration(memoryExpiration)),
            ("hashedFileNames", "\(usesHashedFileNames)"),
            ("maxLineBytes", "\(maxLineBytes)"),
            ("maxBatch", "\(maxBatch)"),
            ("maxConnections", "\(maxConnections)"),
            ("maxInFlight", "\(maxInFlight)"),
            ("maxOutputBuffer", "\(maxOutputBuffer)"),
            ("maxInputBuffer", "\(maxInputBuffer)"),
            ("sweepInterval", "\(sweepInterval)"),
            ("fsync", fsync.rawValue),
            ("journalLimit", "\(journalLimit)"),
            ("unwrittenLimit", "\(unwrittenLimit)"),
            ("socketMode", "0" + String(socketMode, radix: 8)),
            ("drainTimeout", "\(drainTimeout)"),
            ("eventLoops", "\(eventLoopThreads)"),
        ]
        if let ext = pathExtension { out.append(("pathExtension", ext)) }
        if !upstreamURLs.isEmpty {
            out.append(("upstream", upstreamURLs.map(\.description).joined(separator: ",")))
            out.append(("upstreamPrefixes", upstreamPrefixes.isEmpty ? "*" : upstreamPrefixes.joined(separator: ",")))
        }
        return out
    }

    /// One line for the start-up log: socket, folder, limits and defaults.
    public var summary: String {
        var parts = [
            "socket=\(socketPath)",
            "cache-dir=\(cacheDirectory.path)",
            "name=\(name)",
            "disk-size-limit=\(HumanUnits.formatByteCount(diskSizeLimit))",
            "disk-expiration=\(HumanUnits.formatExpiration(diskExpiration))",
            "memory-limit=\(HumanUnits.formatByteCount(UInt64(max(0, memoryLimit))))",
            "memory-count-limit=\(memoryCountLimit)",
            "memory-expiration=\(HumanUnits.formatExpiration(memoryExpiration))",
            "hashed-file-names=\(usesHashedFileNames)",
            "max-line-bytes=\(HumanUnits.formatByteCount(UInt64(maxLineBytes)))",
            "max-batch=\(maxBatch)",
            "max-connections=\(maxConnections)",
            "max-in-flight=\(maxInFlight)",
            "max-output-buffer=\(HumanUnits.formatByteCount(UInt64(maxOutputBuffer)))",
            "max-input-buffer=\(HumanUnits.formatByteCount(UInt64(maxInputBuffer)))",
            "sweep-interval=\(HumanUnits.formatDuration(sweepInterval))",
            "fsync=\(fsync.rawValue)",
            "journal-limit=\(HumanUnits.formatByteCount(journalLimit))",
            "unwritten-limit=\(HumanUnits.formatByteCount(unwrittenLimit))",
            "socket-mode=0\(String(socketMode, radix: 8))",
            "drain-timeout=\(HumanUnits.formatDuration(drainTimeout))",
            "event-loop-threads=\(eventLoopThreads)",
        ]
        if let ext = pathExtension { parts.append("path-extension=\(ext)") }
        if let group = socketGroup { parts.append("socket-group=\(group)") }
        if !allowedUIDs.isEmpty { parts.append("allow-uid=\(allowedUIDs.map(String.init).joined(separator: ","))") }
        if !allowedGIDs.isEmpty { parts.append("allow-gid=\(allowedGIDs.map(String.init).joined(separator: ","))") }
        if let accessFile { parts.append("access=\(accessFile)") }
        if enableDebugMethods { parts.append("debug-methods=on") }
        for url in upstreamURLs { parts.append("upstream=\(url)") }
        if upstreamPasswordFile != nil { parts.append("upstream-password=(from file)") }
        for prefix in upstreamPrefixes { parts.append("upstream-prefix=\(prefix)") }
        return parts.joined(separator: " ")
    }
}

/// A configuration that cannot be used; `description` is the one-line message the daemon
/// prints before exiting with status 2.
public enum ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A flag's (or environment variable's) value is wrong.
    case invalid(flag: String, reason: String)

    public var description: String {
        switch self {
        case .invalid(let flag, let reason): return "\(flag): \(reason)"
        }
    }
}

extension ServerConfiguration {
    /// The daemon's flags as the text the user typed; `nil`/empty means "not given".
    /// `halcyond` copies its parsed arguments here and calls
    /// `ServerConfiguration(flags:environment:)`, which owns every conversion and default.
    public struct Flags: Sendable, Equatable {
        public var socket: String?
        public var cacheDir: String?
        public var name: String?
        public var diskSizeLimit: String?
        public var diskExpiration: String?
        public var memoryLimit: String?
        public var memoryCountLimit: String?
        public var memoryExpiration: String?
        public var noHashedFileNames = false
        public var pathExtension: String?
        public var maxLineBytes: String?
        public var maxBatch: String?
        public var maxConnections: String?
        public var maxInFlight: String?
        public var maxOutputBuffer: String?
        public var maxInputBuffer: String?
        public var sweepInterval: String?
        public var fsync: String?
        public var journalLimit: String?
        public var unwrittenLimit: String?
        public var socketMode: String?
        public var socketGroup: String?
        public var allowUID: [String] = []
        public var allowGID: [String] = []
        public var access: String?
        public var drainTimeout: String?
        public var logLevel: String?
        public var enableDebugMethods = false
        public var eventLoopThreads: String?
        public var upstream: [String] = []
        public var upstreamPasswordFile: String?
        public var upstreamPrefix: [String] = []

        /// No flag given.
        public init() {}
    }

    /// Builds and validates a configuration from flag text. A flag wins over its
    /// environment variable (`HALCYON_SOCKET`, `HALCYON_CACHE_DIR`), which wins over the
    /// default.
    /// - Throws: `ConfigurationError.invalid` naming the first bad flag.
    public init(flags: Flags, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) {
        func given(_ value: String?) -> String? { value.flatMap { $0.isEmpty ? nil : $0 } }
        let socket = given(flags.socket) ?? given(environment["HALCYON_SOCKET"]) ?? Self.defaultSocketPath(environment: environment)
        let cacheDirectory = given(flags.cacheDir).map { URL(fileURLWithPath: $0, isDirectory: true) }
            ?? Self.defaultCacheDirectory(environment: environment)
        self.init(socketPath: Self.absolute(socket), cacheDirectory: cacheDirectory.standardizedFileURL)

        func convert<T>(_ flag: String, _ text: String?, _ parse: (String) throws(HumanUnits.ParseError) -> T) throws(ConfigurationError) -> T? {
            guard let text else { return nil }
            do { return try parse(text) } catch { throw .invalid(flag: flag, reason: error.description) }
        }
        func count(_ text: String) throws(HumanUnits.ParseError) -> Int {
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else { throw .malformed(text) }
            guard value >= 0 else { throw .notPositive(text) }
            return value
        }

        if let value = flags.name { name = value }
        if let value = try convert("--disk-size-limit", flags.diskSizeLimit, HumanUnits.parseByteCount) { diskSizeLimit = value }
        if let value = try convert("--disk-expiration", flags.diskExpiration, HumanUnits.parseExpiration) { diskExpiration = value }
        if let value = try convert("--memory-limit", flags.memoryLimit, HumanUnits.parseIntByteCount) { memoryLimit = value }
        if let value = try convert("--memory-count-limit", flags.memoryCountLimit, count) { memoryCountLimit = value }
        if let value = try convert("--memory-expiration", flags.memoryExpiration, HumanUnits.parseExpiration) { memoryExpiration = value }
        usesHashedFileNames = !flags.noHashedFileNames
        if let value = flags.pathExtension { pathExtension = value.hasPrefix(".") ? String(value.dropFirst()) : value }
        if let value = try convert("--max-line-bytes", flags.maxLineBytes, HumanUnits.parseIntByteCount) { maxLineBytes = value }
        if let value = try convert("--max-batch", flags.maxBatch, count) { maxBatch = value }
        if let value = try convert("--max-connections", flags.maxConnections, count) { maxConnections = value }
        if let value = try convert("--max-in-flight", flags.maxInFlight, count) { maxInFlight = value }
        if let value = try convert("--max-output-buffer", flags.maxOutputBuffer, HumanUnits.parseIntByteCount) {
            maxOutputBuffer = value
        }
        if let value = try convert("--max-input-buffer", flags.maxInputBuffer, HumanUnits.parseIntByteCount) {
            maxInputBuffer = value
        }
        if let value = try convert("--sweep-interval", flags.sweepInterval, HumanUnits.parseDuration) { sweepInterval = value }
        if let text = flags.fsync {
            guard let policy = Journal.FsyncPolicy(rawValue: text.lowercased()) else {
                throw .invalid(flag: "--fsync", reason: "'\(text)' is not one of always|everysec|never")
            }
            fsync = policy
        }
        if let value = try convert("--journal-limit", flags.journalLimit, HumanUnits.parseByteCount) { journalLimit = value }
        if let value = try convert("--unwritten-limit", flags.unwrittenLimit, HumanUnits.parseByteCount) { unwrittenLimit = value }
        if let value = try convert("--drain-timeout", flags.drainTimeout, HumanUnits.parseDuration) { drainTimeout = value }
        if let value = try convert("--event-loop-threads", flags.eventLoopThreads, count) { eventLoopThreads = value }
        if let text = flags.socketMode {
            let digits = text.hasPrefix("0o") ? String(text.dropFirst(2)) : text
            guard !digits.isEmpty, let mode = mode_t(digits, radix: 8) else {
                throw .invalid(flag: "--socket-mode", reason: "'\(text)' is not an octal mode such as 0600 or 0660")
            }
            socketMode = mode
        }
        if let text = flags.socketGroup {
            do { socketGroup = try AccountNames.groupID(text) } catch { throw .invalid(flag: "--socket-group", reason: error.description) }
        }
        for text in flags.allowUID {
            do { allowedUIDs.append(try AccountNames.userID(text)) } catch { throw .invalid(flag: "--allow-uid", reason: error.description) }
        }
        for text in flags.allowGID {
            do { allowedGIDs.append(try AccountNames.groupID(text)) } catch { throw .invalid(flag: "--allow-gid", reason: error.description) }
        }
        if let path = given(flags.access) {
            let file = Self.absolute(path)
            accessFile = file
            do { accessRules = try AccessRules.load(path: file) } catch { throw .invalid(flag: "--access", reason: "\(path) \(error)") }
        }
        if let text = flags.logLevel {
            guard let level = Logger.Level(rawValue: text.lowercased()) else {
                let names = Logger.Level.allCases.map(\.rawValue).joined(separator: "|")
                throw .invalid(flag: "--log-level", reason: "'\(text)' is not one of \(names)")
            }
            logLevel = level
        }
        enableDebugMethods = flags.enableDebugMethods
        for text in flags.upstream {
            do {
                upstreamURLs.append(try UpstreamURL(text))
            } catch {
                throw .invalid(flag: "--upstream", reason: "'\(Self.withoutPassword(text))': \(error.description)")
            }
        }
        upstreamPasswordFile = given(flags.upstreamPasswordFile)
        upstreamPrefixes = flags.upstreamPrefix
        try validate()
    }

    /// Makes a relative socket path absolute against the current folder, so the path in
    /// `server.info` and in the lock file's name does not depend on where a client runs.
    /// An `--upstream` value as an error may quote it: a password written in it
    /// (`user:secret@`) is shown as `user:***@`, so the refusal does not log it.
    static func withoutPassword(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text.lastIndex(of: "@"), scheme.upperBound < at,
              let colon = text[scheme.upperBound..<at].firstIndex(of: ":")
        else { return text }
        return String(text[..<text.index(after: colon)]) + "***" + String(text[at...])
    }

    private static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
            .appendingPathComponent(path).standardizedFileURL.path
    }
}

// Real Redis servers for the tests: a standalone server or a 3-primary cluster on free
// loopback ports, each in its own temporary folder, started from Debian's redis-server
// (or valkey-server where that is what is installed) and stopped when the test process
// exits (or when the test that owns one stops it).

import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HalcyonSupport
import HalcyonUpstream
import NIOCore
import NIOPosix

/// The one event loop group of the test process.
let testGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)

/// Finds the server and CLI binaries.
enum RedisBinaries {
    static let server: String = first(["valkey-server", "redis-server"])
    static let cli: String = first(["valkey-cli", "redis-cli"])

    private static func first(_ names: [String]) -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for name in names.reversed() {  // redis-* first when both exist: the cluster tool is the same
            for folder in path.split(separator: ":") where FileManager.default.isExecutableFile(atPath: "\(folder)/\(name)") {
                return "\(folder)/\(name)"
            }
        }
        return "/usr/bin/\(names.last!)"
    }
}

/// Every server process started and its folder, so the exit handler can stop them and
/// remove what they wrote.
private let runningServers = Locked<[Int32]>([])
private let serverFolders = Locked<[String]>([])
private let exitHandlerInstalled: Void = {
    atexit {
        for pid in runningServers.withLock({ $0 }) { kill(pid, SIGKILL) }
        for folder in serverFolders.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: folder) }
    }
}()

/// A port `p` such that `p` and `p + 10000` (the cluster bus) can be bound on loopback now.
func freePort() -> Int {
    for _ in 0..<1000 {
        let port = Int.random(in: 20000..<30000)
        if canBind(port) && canBind(port + 10000) { return port }
    }
    fatalError("no free port pair")
}

private func canBind(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return bindLoopback(fd, port: port)
}

/// Binds the socket `fd` to 127.0.0.1:`port`; whether it could.
private func bindLoopback(_ fd: Int32, port: Int) -> Bool {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// Runs `redis-cli` with `arguments`; its standard output.
@discardableResult
func redisCLI(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: RedisBinaries.cli)
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

/// A listener on a loopback port that accepts one connection, closes it at once, and then
/// stops listening: what a client may meet while a killed server's process goes away
/// (its listener can still complete a connect the process will never answer).
///
/// Threading: thread-safe; the accepting runs on its own thread, the count is `Locked`.
final class ClosingListener: Sendable {
    private let count = Locked(0)
    private let done = DispatchSemaphore(value: 0)

    /// How many connections it accepted (and closed): 0 or 1.
    var accepted: Int { count.withLock { $0 } }

    /// Binds `port` now; accepts (for at most `timeout` seconds) on a thread of its own.
    init(port: Int, timeout: Int32 = 10) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard bindLoopback(fd, port: port), listen(fd, 8) == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        let (count, done) = (count, done)
        Thread.detachNewThread {
            var waiting = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&waiting, 1, timeout * 1000) == 1 {
                let connection = accept(fd, nil, nil)
                if connection >= 0 {
                    close(connection)
                    count.withLock { $0 += 1 }
                }
            }
            close(fd)
            done.signal()
        }
    }

    /// Waits until it has stopped listening.
    func waitUntilClosed() { done.wait() }
}

/// One redis-server process.
///
/// Threading: thread-safe; the running process is held in a `Locked`.
final class RedisServer: Sendable {
    let port: Int
    let folder: URL
    let extraArguments: [String]
    private let running = Locked<Process?>(nil)
    var process: Process? { running.withLock { $0 } }

    var address: NodeAddress { .tcp(host: "127.0.0.1", port: port) }

    init(port: Int = freePort(), arguments: [String] = []) throws {
        _ = exitHandlerInstalled
        self.port = port
        extraArguments = arguments
        folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("halcyon-redis-\(port)-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        serverFolders.withLock { $0.append(folder.path) }
        try start()
    }

    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: RedisBinaries.server)
        process.currentDirectoryURL = folder
        process.arguments = [
            "--port", String(port), "--bind", "127.0.0.1", "--dir", folder.path, "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--logfile", folder.appendingPathComponent("redis.log").path,
            "--enable-debug-command", "yes",
        ] + extraArguments
        try process.run()
        running.withLock { $0 = process }
        let pid = process.processIdentifier
        runningServers.withLock { $0.append(pid) }
        try waitUntilReady()
    }

    /// Waits (at most 10 s) until the server accepts connections.
    private func waitUntilReady() throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            guard process?.isRunning == true else {
                throw RedisError.unavailable(node: "127.0.0.1:\(port)", detail: "exited; see \(folder.path)/redis.log")
            }
            if try redisCLI(["-p", String(port), "--no-auth-warning", "PING"]).contains("PONG")
                || (try redisCLI(["-p", String(port), "PING"])).contains("NOAUTH") { return }
            usleep(20_000)
        }
        throw RedisError.unavailable(node: "127.0.0.1:\(port)", detail: "did not start")
    }

    /// Kills the process (SIGKILL: no shutdown, as a crash) and waits for it.
    func kill() {
        guard let process = running.withLock({ running in defer { running = nil }; return running }) else { return }
        let pid = process.processIdentifier
        Glibc.kill(pid, SIGKILL)
        process.waitUntilExit()
        runningServers.withLock { $0.removeAll { $0 == pid } }
    }

    func remove() {
        resume()
        kill()
        try? FileManager.default.removeItem(at: folder)
    }

    /// SIGSTOP: the process keeps its connections open and answers nothing (a hung server).
    func pause() {
        if let pid = process?.processIdentifier { Glibc.kill(pid, SIGSTOP) }
    }

    /// SIGCONT after `pause`.
    func resume() {
        if let pid = process?.processIdentifier { Glibc.kill(pid, SIGCONT) }
    }

    /// `redis-cli -p port arguments…`
    @discardableResult
    func cli(_ arguments: String...) throws -> String {
        try redisCLI(["-p", String(port)] + arguments).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Three primaries, no replicas, made with `redis-cli --cluster create`.
final class RedisCluster: Sendable {
    let nodes: [RedisServer]

    init() throws {
        var nodes: [RedisServer] = []
        for _ in 0..<3 {
            nodes.append(try RedisServer(arguments: [
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
            ]))
        }
        self.nodes = nodes
        try redisCLI(["--cluster", "create"] + nodes.map { "127.0.0.1:\($0.port)" } + ["--cluster-replicas", "0", "--cluster-yes"])
        try waitUntilOK()
    }

    var seeds: [NodeAddress] { nodes.map(\.address) }

    /// Waits (at most 20 s) until every running node reports `cluster_state:ok`.
    func waitUntilOK() throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let states = try nodes.filter { $0.process != nil }.map { try $0.cli("CLUSTER", "INFO") }
            if states.allSatisfy({ $0.contains("cluster_state:ok") }) { return }
            usleep(50_000)
        }
        throw RedisError.unavailable(node: "cluster", detail: "never reached cluster_state:ok")
    }

    /// The node serving `key`, by asking the cluster.
    func node(serving key: String) throws -> RedisServer {
        let slot = try nodes[0].cli("CLUSTER", "KEYSLOT", key)
        let reply = try nodes[0].cli("CLUSTER", "NODES")
        for line in reply.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 8, fields[2].contains("master") else { continue }
            for range in fields[8...] {
                let bounds = range.split(separator: "-").compactMap { Int($0) }
                guard let low = bounds.first, let high = bounds.last, let s = Int(slot) else { continue }
                if s >= low && s <= high {
                    let port = Int(fields[1].split(separator: ":")[1].split(separator: "@")[0])!
                    return nodes.first { $0.port == port }!
                }
            }
        }
        throw RedisError.slotUncovered(Int(slot) ?? -1)
    }

    func id(of node: RedisServer) throws -> String { try node.cli("CLUSTER", "MYID") }

    func remove() { nodes.forEach { $0.remove() } }
}

/// Servers shared by the tests that do not stop or reconfigure them.
enum SharedServers {
    static let standalone: RedisServer = try! RedisServer()
    static let cluster: RedisCluster = try! RedisCluster()
}

/// The events a test has received, in arrival order, with a way to wait for one.
///
/// Threading: thread-safe; `events` is a `Locked`, and every append signals `arrived`.
final class EventLog<Event: Sendable>: Sendable {
    private let events = Locked<[Event]>([])
    private let arrived = DispatchSemaphore(value: 0)

    func append(_ event: Event) {
        events.withLock { $0.append(event) }
        arrived.signal()
    }

    var all: [Event] { events.withLock { $0 } }

    /// The first event satisfying `matches`, waiting for new ones up to `timeout`.
    func wait(timeout: TimeInterval, for matches: (Event) -> Bool) -> Event? {
        let deadline = DispatchTime.now() + timeout
        while true {
            if let event = all.first(where: matches) { return event }
            if arrived.wait(timeout: deadline) == .timedOut { return all.first(where: matches) }
        }
    }
}

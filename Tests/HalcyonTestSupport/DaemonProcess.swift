// Starts a real halcyond binary on a private socket and cache folder for one test, and
// stops it afterwards.

import Foundation

/// A `halcyond` child process with its own temporary socket and cache folder.
///
/// Threading: use from the test that created it; `stop()` may be called once.
public final class DaemonProcess {
    public let root: URL
    public let socketPath: String
    public let cacheDirectory: URL
    public let process = Process()
    private let stderrPipe = Pipe()
    /// What `waitForStderr` has read of the daemon's stderr so far.
    private var stderrRead = Data()

    /// The built halcyond: `HALCYOND_BIN`, else beside the test bundle (SwiftPM puts the
    /// products of one build in one folder).
    public static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["HALCYOND_BIN"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("halcyond")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        // Tests/HalcyonTestSupport/DaemonProcess.swift -> the package root.
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/halcyond")
    }

    /// Starts halcyond with `arguments` added to the private socket/cache flags, and waits
    /// until it answers a ping.
    public init(
        arguments: [String] = [], root: URL? = nil, environment: [String: String] = [:],
        debugMethods: Bool = true, waitUntilReady: Bool = true, openFileLimit: Int? = nil
    ) throws {
        // Short paths: a Unix socket path must fit in 108 bytes.
        self.root = root ?? URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: self.root, withIntermediateDirectories: true)
        socketPath = self.root.appendingPathComponent("s.sock").path
        cacheDirectory = self.root.appendingPathComponent("cache")
        let daemonArguments = [
            "--socket", socketPath, "--cache-dir", cacheDirectory.path, "--log-level", "warning",
        ] + (debugMethods ? ["--enable-debug-methods"] : []) + arguments
        if let openFileLimit {
            // A shell lowers the descriptor limit, then becomes halcyond (same pid).
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "ulimit -n \(openFileLimit) && exec \"$0\" \"$@\"", Self.binary.path]
                + daemonArguments
        } else {
            process.executableURL = Self.binary
            process.arguments = daemonArguments
        }
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "NOTIFY_SOCKET")
        env.removeValue(forKey: "LISTEN_FDS")
        env.removeValue(forKey: "LISTEN_PID")
        for (k, v) in environment { env[k] = v }
        process.environment = env
        process.standardError = stderrPipe
        try process.run()
        if waitUntilReady { try self.waitUntilReady() }
    }

    public func waitUntilReady(timeout: TimeInterval = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if !process.isRunning {
                throw DaemonError.exited(status: process.terminationStatus, stderr: stderrText())
            }
            if let client = try? TestClient(path: socketPath),
               let pong = try? client.call("server.ping"), pong["result"]?["pong"]?.bool == true {
                client.close()
                return
            }
            usleep(20_000)
        }
        throw DaemonError.notReady(stderr: stderrText())
    }

    /// Waits up to `timeout` for the daemon to exit on its own; false if it still runs.
    public func waitForExit(timeout: TimeInterval = 20) -> Bool {
        Self.waitForExit(of: process, timeout: timeout)
    }

    /// Waits up to `timeout` for `process` to exit; false if it still runs.
    private static func waitForExit(of process: Process, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        return !process.isRunning
    }

    public func client() throws -> TestClient { try TestClient(path: socketPath) }

    /// Sends `signal` and waits for the exit status.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: TimeInterval = 30) -> Int32 {
        if process.isRunning {
            kill(process.processIdentifier, signal)
            if !Self.waitForExit(of: process, timeout: timeout) {
                // A stop that hangs is a bug of its own: where each thread waits goes to the
                // test's output before the kill (the test then fails on the status, 9).
                if signal != SIGKILL { Self.printStacks(of: process.processIdentifier) }
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        return process.terminationStatus
    }

    /// Prints every thread's stack of process `pid` to standard error, through gdb when
    /// the machine has it; says so when it has not. Gives gdb at most 60 s.
    private static func printStacks(of pid: Int32) {
        let header = "halcyond (pid \(pid)) did not stop; its threads:\n"
        FileHandle.standardError.write(Data(header.utf8))
        let gdb = ["/usr/bin/gdb", "/usr/local/bin/gdb"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let gdb else {
            FileHandle.standardError.write(Data("(no gdb on this machine)\n".utf8))
            return
        }
        let dump = Process()
        dump.executableURL = URL(fileURLWithPath: gdb)
        dump.arguments = ["-p", "\(pid)", "-batch", "-nx", "-ex", "thread apply all bt 40"]
        dump.standardOutput = FileHandle.standardError
        dump.standardError = FileHandle.standardError
        guard (try? dump.run()) != nil else { return }
        if !waitForExit(of: dump, timeout: 60) { dump.terminate() }
    }

    public func stderrText() -> String {
        if process.isRunning { return "(running)" }
        let data = stderrRead + stderrPipe.fileHandleForReading.readDataToEndOfFile()
        return String(decoding: data, as: UTF8.self)
    }

    /// Reads the daemon's stderr as it is written until it holds `text` (true), the daemon
    /// closes it (exits), or `timeout` passes (false). What it reads stays part of
    /// `stderrText()`.
    public func waitForStderr(containing text: String, timeout: TimeInterval = 30) -> Bool {
        let fd = stderrPipe.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: stderrRead, as: UTF8.self).contains(text) {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return false }
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, Int32(left * 1000) + 1) > 0 else { continue }
            let count = read(fd, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            stderrRead.append(contentsOf: buffer[..<count])
        }
        return true
    }

    /// Stops the daemon and removes its folder.
    public func cleanUp() {
        stop(signal: SIGKILL)
        try? FileManager.default.removeItem(at: root)
    }

    public enum DaemonError: Error, CustomStringConvertible {
        case exited(status: Int32, stderr: String)
        case notReady(stderr: String)

        public var description: String {
            switch self {
            case .exited(let status, let stderr): return "halcyond exited with \(status): \(stderr)"
            case .notReady(let stderr): return "halcyond did not become ready: \(stderr)"
            }
        }
    }
}

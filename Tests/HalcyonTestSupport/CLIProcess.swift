// Runs the built `halcyon` command once, with given stdin bytes and environment, and
// captures its exit status, stdout and stderr exactly.

import Foundation

/// One finished run of the `halcyon` binary.
public struct CLIRun {
    public let status: Int32
    public let stdout: [UInt8]
    public let stderr: [UInt8]

    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    public var stderrText: String { String(decoding: stderr, as: UTF8.self) }
    /// The lines written to stderr (without their line feeds).
    public var stderrLines: [Substring] { stderrText.split(separator: "\n", omittingEmptySubsequences: false).dropLast() }
}

/// Starts `halcyon` as a child process.
///
/// Threading: `run` blocks the calling thread until the child exits; tests call it from
/// their own task. Output goes to files rather than pipes, so a large value can never
/// dead-lock a full pipe against a child that is still writing.
public enum CLIProcess {
    /// The built `halcyon`: `HALCYON_BIN`, else the sibling of the built halcyond.
    public static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["HALCYON_BIN"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        return DaemonProcess.binary.deletingLastPathComponent().appendingPathComponent("halcyon")
    }

    /// Runs `halcyon arguments…`.
    /// - Parameters:
    ///   - socket: when given, passed as `--socket` before the other arguments.
    ///   - stdin: bytes to feed on standard input (empty input when nil).
    ///   - environment: added to (or, with an empty value, removed from) the test's own
    ///     environment; `HALCYON_SOCKET` and `XDG_RUNTIME_DIR` are removed by default so a
    ///     developer's real daemon is never reached by accident.
    public static func run(
        _ arguments: [String], socket: String? = nil, stdin: [UInt8]? = nil,
        environment: [String: String] = [:]
    ) throws -> CLIRun {
        let folder = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("halcyon-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let inURL = folder.appendingPathComponent("in")
        let outURL = folder.appendingPathComponent("out")
        let errURL = folder.appendingPathComponent("err")
        try Data(stdin ?? []).write(to: inURL)
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)

        let process = Process()
        process.executableURL = binary
        process.arguments = (socket.map { ["--socket", $0] } ?? []) + arguments
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "HALCYON_SOCKET")
        env.removeValue(forKey: "XDG_RUNTIME_DIR")
        for (name, value) in environment {
            if value.isEmpty { env.removeValue(forKey: name) } else { env[name] = value }
        }
        process.environment = env
        let input = try FileHandle(forReadingFrom: inURL)
        let output = try FileHandle(forWritingTo: outURL)
        let errors = try FileHandle(forWritingTo: errURL)
        defer { try? input.close(); try? output.close(); try? errors.close() }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        return CLIRun(
            status: process.terminationStatus,
            stdout: [UInt8](try Data(contentsOf: outURL)),
            stderr: [UInt8](try Data(contentsOf: errURL)))
    }
}

import Foundation
import HalcyonCache
import Logging
import Testing
@testable import HalcyonServer

@Suite struct ConfigurationTests {
    let environment = ["XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/ada"]

    @Test func defaultSocketPathPrefersRuntimeDir() {
        #expect(ServerConfiguration.defaultSocketPath(environment: environment) == "/run/user/1000/halcyon/halcyon.sock")
        #expect(ServerConfiguration.defaultSocketPath(environment: ["XDG_RUNTIME_DIR": "/run/user/7/"]) == "/run/user/7/halcyon/halcyon.sock")
        #expect(ServerConfiguration.defaultSocketPath(environment: [:]) == "/tmp/halcyon-\(geteuid())/halcyon.sock")
        // A relative runtime dir is ignored, as the XDG spec says.
        #expect(ServerConfiguration.defaultSocketPath(environment: ["XDG_RUNTIME_DIR": "run"]) == "/tmp/halcyon-\(geteuid())/halcyon.sock")
    }

    @Test func defaultCacheDirectoryOrder() {
        #expect(ServerConfiguration.defaultCacheDirectory(environment: environment).path == "/home/ada/.cache/halcyon")
        #expect(ServerConfiguration.defaultCacheDirectory(environment: environment.merging(["XDG_CACHE_HOME": "/var/c"]) { $1 }).path == "/var/c/halcyon")
        #expect(ServerConfiguration.defaultCacheDirectory(environment: environment.merging(["XDG_CACHE_HOME": "rel"]) { $1 }).path == "/home/ada/.cache/halcyon")
        #expect(ServerConfiguration.defaultCacheDirectory(environment: ["HALCYON_CACHE_DIR": "/srv/h", "XDG_CACHE_HOME": "/var/c"]).path == "/srv/h")
        // Without HOME the password database answers; it is never empty.
        #expect(!ServerConfiguration.defaultCacheDirectory(environment: [:]).path.isEmpty)
    }

    @Test func noFlagsGivesTheDocumentedDefaults() throws {
        let config = try ServerConfiguration(flags: .init(), environment: environment)
        #expect(config.socketPath == "/run/user/1000/halcyon/halcyon.sock")
        #expect(config.cacheDirectory.path == "/home/ada/.cache/halcyon")
        #expect(config.name == "default")
        #expect(config.diskSizeLimit == 1 << 30)
        #expect(config.diskExpiration == .days(7))
        #expect(config.memoryLimit == 256 << 20)
        #expect(config.memoryCountLimit == 0)
        #expect(config.memoryExpiration == .seconds(300))
        #expect(config.usesHashedFileNames)
        #expect(config.pathExtension == nil)
        #expect(config.maxLineBytes == 64 << 20)
        #expect(config.maxBatch == 1000)
        #expect(config.maxConnections == 1024)
        #expect(config.maxInFlight == 1024)
        #expect(config.sweepInterval == 600)
        #expect(config.socketMode == 0o600)
        #expect(config.socketGroup == nil)
        #expect(config.allowedUIDs.isEmpty && config.allowedGIDs.isEmpty)
        #expect(config.drainTimeout == 10)
        #expect(config.logLevel == .info)
        #expect(!config.enableDebugMethods)
        #expect(config.eventLoopThreads >= 1)
    }

    @Test func environmentThenFlagsWin() throws {
        var env = environment
        env["HALCYON_SOCKET"] = "/srv/env.sock"
        env["HALCYON_CACHE_DIR"] = "/srv/env-cache"
        var config = try ServerConfiguration(flags: .init(), environment: env)
        #expect(config.socketPath == "/srv/env.sock")
        #expect(config.cacheDirectory.path == "/srv/env-cache")
        var flags = ServerConfiguration.Flags()
        flags.socket = "/srv/flag.sock"
        flags.cacheDir = "/srv/flag-cache/../cache"
        config = try ServerConfiguration(flags: flags, environment: env)
        #expect(config.socketPath == "/srv/flag.sock")
        #expect(config.cacheDirectory.path == "/srv/cache")
    }

    @Test func relativeSocketBecomesAbsolute() throws {
        var flags = ServerConfiguration.Flags()
        flags.socket = "h.sock"
        let config = try ServerConfiguration(flags: flags, environment: environment)
        #expect(config.socketPath.hasPrefix("/") && config.socketPath.hasSuffix("/h.sock"))
    }

    @Test func everyFlagIsConverted() throws {
        var flags = ServerConfiguration.Flags()
        flags.name = "builds"
        flags.diskSizeLimit = "10GB"
        flags.diskExpiration = "never"
        flags.memoryLimit = "64MiB"
        flags.memoryCountLimit = "5000"
        flags.memoryExpiration = "1h30m"
        flags.noHashedFileNames = true
        flags.pathExtension = ".bin"
        flags.maxLineBytes = "1MiB"
        flags.maxBatch = "10"
        flags.maxConnections = "8"
        flags.maxInFlight = "16"
        flags.sweepInterval = "0"
        flags.socketMode = "0660"
        flags.socketGroup = "0"
        flags.allowUID = ["65534", "root"]
        flags.allowGID = ["100", "root"]
        flags.drainTimeout = "2.5s"
        flags.logLevel = "DEBUG"
        flags.enableDebugMethods = true
        flags.eventLoopThreads = "3"
        let config = try ServerConfiguration(flags: flags, environment: environment)
        #expect(config.name == "builds")
        #expect(config.diskSizeLimit == 10_000_000_000)
        #expect(config.diskExpiration == .never)
        #expect(config.memoryLimit == 64 << 20)
        #expect(config.memoryCountLimit == 5000)
        #expect(config.memoryExpiration == .seconds(5400))
        #expect(!config.usesHashedFileNames)
        #expect(config.pathExtension == "bin")
        #expect(config.maxLineBytes == 1 << 20)
        #expect(config.maxBatch == 10)
        #expect(config.maxConnections == 8)
        #expect(config.maxInFlight == 16)
        #expect(config.sweepInterval == 0)
        #expect(config.socketMode == 0o660)
        #expect(config.socketGroup == 0)
        #expect(config.allowedUIDs == [65534, 0])
        #expect(config.allowedGIDs == [100, 0])
        #expect(config.drainTimeout == 2.5)
        #expect(config.logLevel == .debug)
        #expect(config.enableDebugMethods)
        #expect(config.eventLoopThreads == 3)
        #expect(config.summary.contains("memory-limit=64MiB"))
        #expect(config.summary.contains("socket-mode=0660"))
        #expect(!config.summary.contains("\n"))
    }

    /// Each bad value names its flag, in one line.
    @Test(arguments: [
        ("--disk-size-limit", "lots"), ("--memory-limit", "9EiB"), ("--memory-expiration", "0s"),
        ("--disk-expiration", "soon"), ("--max-line-bytes", "0"), ("--max-line-bytes", "10"),
        ("--max-line-bytes", "1023"), ("--max-batch", "-3"),
        ("--max-connections", "0"), ("--max-in-flight", "many"), ("--sweep-interval", "10 parsecs"),
        ("--drain-timeout", "-1s"), ("--socket-mode", "0999"), ("--socket-mode", "1777"),
        ("--socket-mode", "0044"), ("--socket-group", "no-such-group-halcyon"), ("--log-level", "loud"),
        ("--name", "a/b"), ("--name", ".."), ("--path-extension", "x/y"), ("--event-loop-threads", "0"),
        ("--socket", "/" + String(repeating: "s", count: 120)),
    ])
    func badValuesNameTheirFlag(flag: String, value: String) throws {
        var flags = ServerConfiguration.Flags()
        switch flag {
        case "--disk-size-limit": flags.diskSizeLimit = value
        case "--memory-limit": flags.memoryLimit = value
        case "--memory-expiration": flags.memoryExpiration = value
        case "--disk-expiration": flags.diskExpiration = value
        case "--max-line-bytes": flags.maxLineBytes = value
        case "--max-batch": flags.maxBatch = value
        case "--max-connections": flags.maxConnections = value
        case "--max-in-flight": flags.maxInFlight = value
        case "--sweep-interval": flags.sweepInterval = value
        case "--drain-timeout": flags.drainTimeout = value
        case "--socket-mode": flags.socketMode = value
        case "--socket-group": flags.socketGroup = value
        case "--log-level": flags.logLevel = value
        case "--name": flags.name = value
        case "--path-extension": flags.pathExtension = value
        case "--event-loop-threads": flags.eventLoopThreads = value
        case "--socket": flags.socket = value
        default: Issue.record("unknown flag \(flag)")
        }
        do {
            _ = try ServerConfiguration(flags: flags, environment: environment)
            Issue.record("\(flag) \(value) was accepted")
        } catch {
            guard case .invalid(let named, _) = error else {
                Issue.record("\(flag) failed with \(error), not .invalid")
                return
            }
            #expect(named == flag)
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func unknownUserIsRejected() {
        var flags = ServerConfiguration.Flags()
        flags.allowUID = ["no-such-user-halcyon"]
        #expect(throws: ConfigurationError.self) { try ServerConfiguration(flags: flags, environment: environment) }
    }
}

/// The real `halcyond` executable's answer to bad flags: one line on stderr, status 2.
/// Found as every end-to-end test finds it (`DaemonProcess.binary`); a missing binary fails.
@Suite(.timeLimit(.minutes(1)))
struct HalcyondFlagsTests {

    func run(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = DaemonProcess.binary
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }

    @Test(arguments: [
        ["--memory-limit", "12XB"], ["--bogus"], ["--max-batch"], ["--drain-timeout", "soon"],
        ["--socket-mode", "9"], ["--log-level", "loud"], ["--allow-uid", "no-such-user-halcyon"],
    ])
    func aBadFlagIsOneLineAndStatus2(arguments: [String]) throws {
        let result = try run(arguments)
        #expect(result.status == 2)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("halcyond: "))
        #expect(result.stderr.filter { $0 == "\n" }.count == 1)
    }

    @Test func anUpstreamAddressErrorSaysWhatIsWrongWithoutThePassword() {
        let environment = ["XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/ada"]
        func refusal(_ url: String) -> String {
            var flags = ServerConfiguration.Flags()
            flags.upstream = [url]
            do {
                _ = try ServerConfiguration(flags: flags, environment: environment)
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        let password = refusal("redis://cache:hunter2@10.0.0.5:6379")
        #expect(password.hasPrefix("--upstream: 'redis://cache:***@10.0.0.5:6379': "), "\(password)")
        #expect(password.contains("--upstream-password-file"), "\(password)")
        #expect(!password.contains("hunter2") && !password.contains("passwordInURL"), "\(password)")
        let scheme = refusal("http://10.0.0.5:6379")
        #expect(scheme.contains("redis://") && scheme.contains("unix://") && !scheme.contains("unsupportedScheme"),
                "\(scheme)")
    }

    @Test func accessIsRefusedWithFlagsItCannotHonour() throws {
        let folder = URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let rules = folder.appendingPathComponent("access.conf").path
        try "uid 1 web read\n".write(toFile: rules, atomically: true, encoding: .utf8)
        func refusal(_ change: (inout ServerConfiguration.Flags) -> Void) -> String {
            var flags = ServerConfiguration.Flags()
            flags.access = rules
            change(&flags)
            do {
                let configuration = try ServerConfiguration(flags: flags, environment: ["HOME": "/home/ada"])
                return "accepted \(configuration.accessRules?.rules.count ?? 0) rule(s) from \(configuration.accessFile ?? "")"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal { _ in } == "accepted 1 rule(s) from \(rules)")
        #expect(refusal { $0.upstream = ["redis://127.0.0.1:6379"] } == "accepted 1 rule(s) from \(rules)")
        #expect(refusal { $0.noHashedFileNames = true }.hasPrefix("--access: needs hashed file names"))
        #expect(refusal { $0.allowGID = ["0"] }.hasPrefix("--access: replaces --allow-uid and --allow-gid"))
        try "uid 1 web read,fly\n".write(toFile: rules, atomically: true, encoding: .utf8)
        #expect(refusal { _ in } == "--access: \(rules) line 1: 'fly' is not one of the rights read, write, admin")
    }

    @Test func helpExitsZero() throws {
        let result = try run(["--help"])
        #expect(result.status == 0)
        #expect(result.stdout.contains("--disk-size-limit"))
    }
}

// Leases from scripts: `lease KEY … -- COMMAND` prints the key's value or runs COMMAND
// once across all concurrent callers (the lease lives as long as this process's
// connection, so the command runs inside it); `release KEY TOKEN` gives back a lease
// taken by a longer-lived client.

import ArgumentParser
import Foundation
import HalcyonJSON

/// `halcyon lease KEY [--lease-ttl D] [--wait D] [value expiration] -- COMMAND [ARG…]`:
/// compute-once across processes.
///
/// A lease belongs to the connection that took it and ends when that closes, so the
/// command runs while this process holds the lease: a hit prints the value; otherwise the
/// one caller that gets the lease runs COMMAND, stores its stdout (exit 0 only) and prints
/// it, while the others wait for that value. Exit 0: the value is on stdout. Exit 3:
/// another caller still held the lease after `--wait` (nothing ran). A failing COMMAND
/// releases the lease, is not cached, and its status is this command's.
struct LeaseCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "lease",
        abstract: "Print KEY's value, or run COMMAND once across all callers and cache its output.",
        discussion: """
            Concurrent callers for one key run COMMAND once: the first takes the key's lease \
            and runs it; the others wait (up to --wait) and print the value it stores. \
            Exit 0: the value is on stdout. Exit 3: another caller still held the lease after \
            --wait. A failing COMMAND is not cached; its exit status is passed on.
            """)

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var positionalKey: String?
    // After `--` comes the command, so a key that starts with '-' cannot be given as the
    // argument: `--key` takes any value, a leading '-' included.
    @Option(name: .customLong("key"), parsing: .unconditional, help: ArgumentHelp(
        "The key, for one that starts with '-' (instead of KEY).", valueName: "key"))
    var keyOption: String?
    @Option(name: .customLong("lease-ttl"), help: ArgumentHelp("How long the lease holds while COMMAND runs (default 5m).", valueName: "duration"))
    var leaseTTL: String?
    @Option(help: ArgumentHelp("How long to wait for another caller's value (default: the lease's ttl).", valueName: "duration"))
    var wait: String?
    @Option(help: ArgumentHelp("Expire the value after this long (disk tier).", valueName: "duration")) var ttl: String?
    @Option(help: ArgumentHelp("Expire the value at this instant.", valueName: "time")) var expiresAt: String?
    @Flag(help: "The value never expires.") var never = false
    @Argument(parsing: .postTerminator, help: "The command whose stdout is the value.") var command: [String] = []

    /// KEY or `--key`, exactly one.
    private var key: String {
        get throws(CLIError) {
            switch (positionalKey, keyOption) {
            case (let k?, nil), (nil, let k?): return k
            case (nil, nil): throw .usage("missing KEY (or --key)")
            case (_?, _?): throw .usage("give KEY or --key, not both")
            }
        }
    }

    func execute(_ context: CommandContext) throws(CLIError) {
        let key = try self.key
        guard !command.isEmpty else { throw .usage("missing COMMAND after '--'") }
        var lease = 300.0
        if let leaseTTL {
            do { lease = try Durations.seconds(leaseTTL) } catch { throw .usage("--lease-ttl: \(error.description)") }
        }
        var waitSeconds = lease
        if let wait {
            do { waitSeconds = try Durations.secondsOrZero(wait) } catch { throw .usage("--wait: \(error.description)") }
        }
        let expiration = try Expiration.choose(ttl: ttl, expiresAt: expiresAt, never: never)
        // The reply may take up to the wait: the connection must not give up before it.
        let connection = try Connection(path: context.socketPath, timeout: max(context.timeout, waitSeconds + 5))
        let result = try connection.call("cache.lease") { writer in
            writer.key("key"); writer.string(key)
            writer.key("ttl"); Expiration.seconds(lease).write(to: &writer)
            if waitSeconds > 0 { writer.key("wait"); writer.double(waitSeconds) }
            writer.key("encoding"); writer.string("base64")
        }
        if result["found"]?.bool == true {
            guard let text = result["value"]?.stringBytes, let bytes = StrictBase64.decode(text) else {
                throw .badReply("the value is not base64")
            }
            Output.value(bytes)
            return
        }
        guard let token = result["lease"]?.string else { throw .leased }
        let (status, output) = try ChildCommand.run(command)
        guard status == 0 else {
            _ = try? connection.call("cache.releaseLease") { writer in
                writer.key("key"); writer.string(key)
                writer.key("lease"); writer.string(token)
            }
            Output.stdout(output)
            throw .childFailed(status: status)
        }
        let encoded = try EncodedValue(output, asJSON: false)
        _ = try connection.call("cache.set") { writer in
            writer.key("key"); writer.string(key)
            writer.key("value"); encoded.write(to: &writer)
            writer.key("encoding"); writer.string(encoded.encoding.rawValue)
            if let expiration { writer.key("expiration"); expiration.write(to: &writer) }
            writer.key("lease"); writer.string(token)
        }
        Output.value(output)
    }
}

/// Runs a command with this process's stdin and stderr and captures its stdout.
enum ChildCommand {
    /// - Returns: the exit status (128 + signal for a killed child) and the stdout bytes.
    /// - Throws: `CLIError.input(reason: "cannotRun")` when it cannot be started.
    static func run(_ arguments: [String]) throws(CLIError) -> (Int32, [UInt8]) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        do { try process.run() } catch {
            throw .input(reason: "cannotRun", message: "cannot run \(arguments[0]): \(error)")
        }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let status = process.terminationReason == .uncaughtSignal
            ? 128 + process.terminationStatus : process.terminationStatus
        return (status, [UInt8](data))
    }
}

/// `halcyon release KEY TOKEN`: gives a lease back (exit 1 if it had already ended).
struct ReleaseCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "release", abstract: "Give back a lease taken with 'lease' (exit 1 if it had already ended).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Argument(help: "The token 'lease' printed.") var token: String

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.releaseLease") { writer in
            writer.key("key"); writer.string(key)
            writer.key("lease"); writer.string(token)
        }
        guard result["released"]?.bool == true else { throw .miss }
    }
}

// Leases from scripts: `lease KEY … -- COMMAND` prints the key's value or runs COMMAND
// once across all concurrent callers (the lease lives as long as this process's
// connection, so the command runs inside it); `release KEY TOKEN` gives back a lease
// taken by a longer-lived client.

import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
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
            --wait. A failing COMMAND is not cached; its exit status is passed on. COMMAND is a \
            program found on PATH, run directly (exit 127 if there is none): a shell function \
            or alias is not a program, so run it with 'bash -c' (after 'export -f'), or use \
            halcyon_cached from Clients/shell/halcyon.sh, which runs it in the calling shell.
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

    var byteArguments: [String] { command }

    func execute(_ context: CommandContext) throws(CLIError) {
        guard context.session == nil else {
            throw .usage("'lease' holds its lease while COMMAND runs, so it runs as a command of its own, not in 'halcyon loop'")
        }
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
            context.output.value(bytes)
            return
        }
        guard let token = result["lease"]?.string else { throw .leased }
        let (status, output) = try ChildCommand.run(command.map(context.words.bytes(of:)))
        guard status == 0 else {
            _ = try? connection.call("cache.releaseLease") { writer in
                writer.key("key"); writer.string(key)
                writer.key("lease"); writer.string(token)
            }
            context.output.write(output)
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
        context.output.value(output)
    }
}

/// Runs a command with this process's stdin and stderr and captures its stdout.
enum ChildCommand {
    /// Runs `arguments` (the program, found on PATH as a shell would, then its arguments).
    /// - Returns: the exit status (128 + signal for a killed child) and the stdout bytes.
    /// - Throws: `CLIError.cannotRun` (exit 127 when the program does not exist, 126 when
    ///   it cannot be executed), with a line that says why; `CLIError.input` when the
    ///   pipe for its output cannot be made.
    static func run(_ arguments: [[UInt8]]) throws(CLIError) -> (Int32, [UInt8]) {
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            throw .input(reason: "cannotRun", message: "cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        // Neither end may stay open in the child: it would never see its own output end.
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 onto stdout clears close-on-exec there; both pipe ends close at exec.
        posix_spawn_file_actions_adddup2(&actions, writeEnd, STDOUT_FILENO)
        let cArguments: [UnsafeMutablePointer<CChar>?] = arguments.map { bytes in
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
            bytes.withUnsafeBytes { raw in
                UnsafeMutableRawPointer(copy).copyMemory(from: raw.baseAddress!, byteCount: bytes.count)
            }
            copy[bytes.count] = 0
            return copy
        } + [nil]
        defer { for pointer in cArguments { pointer?.deallocate() } }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, cArguments[0]!, &actions, nil, cArguments, environ)
        close(writeEnd)
        guard spawned == 0 else {
            close(readEnd)
            let name = String(decoding: arguments[0], as: UTF8.self)
            switch spawned {
            case ENOENT:
                throw .cannotRun(status: 127, message: "'\(name)' is not a program on PATH (a shell function or alias cannot run here: "
                    + "use bash -c, or halcyon_cached from Clients/shell/halcyon.sh)")
            default:
                throw .cannotRun(status: 126, message: "cannot run '\(name)': \(String(cString: strerror(spawned)))")
            }
        }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if count > 0 { output.append(contentsOf: chunk[..<count]); continue }
            if count < 0, errno == EINTR { continue }
            break
        }
        close(readEnd)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        // WIFEXITED/WEXITSTATUS/WTERMSIG are C macros Swift does not import: the low seven
        // bits are the terminating signal (0 for a normal exit), the next byte the status.
        let signal = status & 0x7F
        return (signal == 0 ? (status >> 8) & 0xFF : 128 + signal, output)
    }
}

/// `halcyon release KEY TOKEN`: gives a lease back (exit 1 if it had already ended).
struct ReleaseCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "release", abstract: "Give back a lease another client holds, by its token (exit 1 if it had already ended).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Argument(help: "The lease token a longer-lived client took with cache.lease (Python: Client.lease(...).token). 'halcyon lease' never prints its token: its lease ends with it.") var token: String

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.releaseLease") { writer in
            writer.key("key"); writer.string(key)
            writer.key("lease"); writer.string(token)
        }
        guard result["released"]?.bool == true else { throw .miss }
    }
}

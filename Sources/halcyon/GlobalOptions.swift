// The options every command takes (`--socket`, `--timeout`, `--verbose`), and the
// context a command runs with once they are resolved.

import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

/// Options accepted before the command name (`halcyon --socket P get k`) and after it
/// (`halcyon get k --socket P`); `CLIMain` moves the leading ones behind the name, so
/// ArgumentParser sees one place.
struct GlobalOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "The daemon's Unix socket.",
        discussion: "Default: $HALCYON_SOCKET, else the first socket of $XDG_RUNTIME_DIR/halcyon/halcyon.sock, /run/user/<euid>/halcyon/halcyon.sock, /tmp/halcyon-<euid>/halcyon.sock, /run/halcyon/halcyon.sock.",
        valueName: "path"))
    var socket: String?

    @Option(help: ArgumentHelp("Give up when the daemon makes no progress for this long: seconds, or a duration such as 500ms, 2m (default 30).", valueName: "seconds"))
    var timeout: String?

    @Flag(name: .shortAndLong, help: "Print more: the result of set, the new expiry of touch, the tier for exists.")
    var verbose = false
}

/// What a command needs to run: where the daemon is, how long to wait for it, where its
/// results go, and the words it was parsed from.
///
/// Threading: a value; the CLI is single-threaded.
struct CommandContext {
    /// The socket path after `--socket`, `HALCYON_SOCKET` and the default.
    let socketPath: String
    /// The longest wait for any progress (connecting, sending, receiving).
    let timeout: Double
    /// `-v`/`--verbose`.
    let verbose: Bool
    /// Where results go: stdout, or the reply line in `halcyon loop`.
    let output: CommandOutput
    /// The words the command was parsed from: the bytes of a VALUE that is not UTF-8.
    let words: ArgumentWords
    /// `halcyon loop`'s connection and defaults; nil when the process runs one command.
    let session: LoopSession?

    /// The default `--timeout`: long enough for the daemon to store a 64 MiB value on a
    /// busy disk before it answers, short enough that a wedged daemon does not hang a
    /// script forever.
    static let defaultTimeout = 30.0

    /// Resolves `options` against the environment, or against the loop's own options.
    /// - Throws: `CLIError.usage` for a bad `--timeout`, or a `--socket` on a line of
    ///   `halcyon loop` (whose one connection has its socket already).
    init(
        options: GlobalOptions, environment: [String: String], output: CommandOutput = .standardOutput(),
        words: ArgumentWords = ArgumentWords([]), session: LoopSession? = nil
    ) throws(CLIError) {
        try self.init(
            socket: options.socket, timeout: options.timeout, verbose: options.verbose, environment: environment,
            output: output, words: words, session: session)
    }

    /// The same from the global options' plain values (`nil`: not given).
    init(
        socket: String?, timeout timeoutText: String?, verbose: Bool, environment: [String: String],
        output: CommandOutput, words: ArgumentWords, session: LoopSession?
    ) throws(CLIError) {
        if let session {
            guard socket == nil else { throw .usage("--socket is given once, to 'halcyon loop'") }
            socketPath = session.socketPath
        } else {
            socketPath = SocketPath.resolve(flag: socket, environment: environment)
        }
        if let timeoutText {
            do { timeout = try Durations.seconds(timeoutText) } catch { throw .usage("--timeout: \(error.description)") }
        } else {
            timeout = session?.timeout ?? Self.defaultTimeout
        }
        self.verbose = verbose || session?.verbose == true
        self.output = output
        self.words = words
        self.session = session
    }

    /// A connection to the daemon: a new one, or in `halcyon loop` the loop's own.
    func connect() throws(CLIError) -> Connection {
        if let session { return try session.connection(timeout: timeout) }
        return try Connection(path: socketPath, timeout: timeout)
    }

    /// Fails when stdin cannot give a value: in `halcyon loop` it carries the commands,
    /// and on a terminal a missing VALUE is almost always a forgotten argument (`-`
    /// still reads the terminal for those who mean it).
    /// - Parameter argument: the VALUE argument: nil when absent, `-` for stdin.
    func checkStandardInput(for argument: String?) throws(CLIError) {
        if session != nil {
            throw .usage("missing VALUE: in 'halcyon loop' stdin carries the commands, so the value goes in the line")
        }
        if argument == nil, Output.stdinIsTerminal {
            throw .usage("missing VALUE: give it as an argument, '-' to type it, or pipe it on stdin")
        }
    }
}

/// Finds the daemon's socket without configuration, also where `XDG_RUNTIME_DIR` is
/// unset (cron, `sudo -u`, ssh without a session).
enum SocketPath {
    /// `--socket`, else `HALCYON_SOCKET`, else the first of `candidates` that is a socket,
    /// else the first candidate (where `halcyond` binds by default, so an error names it).
    /// Empty values count as unset, as they do for the daemon.
    static func resolve(
        flag: String?, environment: [String: String], uid: uid_t = geteuid(),
        isSocket: (String) -> Bool = SocketPath.isSocket
    ) -> String {
        if let flag, !flag.isEmpty { return flag }
        if let fromEnvironment = environment["HALCYON_SOCKET"], !fromEnvironment.isEmpty { return fromEnvironment }
        let places = candidates(environment: environment, uid: uid)
        return places.first(where: isSocket) ?? defaultPath(environment: environment, uid: uid)
    }

    /// Where `halcyond` binds when given no `--socket`: `$XDG_RUNTIME_DIR/halcyon/halcyon.sock`
    /// when `XDG_RUNTIME_DIR` is an absolute path, else `/tmp/halcyon-<euid>/halcyon.sock`.
    static func defaultPath(environment: [String: String], uid: uid_t) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return (runtime.hasSuffix("/") ? String(runtime.dropLast()) : runtime) + "/halcyon/halcyon.sock"
        }
        return "/tmp/halcyon-\(uid)/halcyon.sock"
    }

    /// The documented places, in order: `$XDG_RUNTIME_DIR/halcyon/halcyon.sock` (when
    /// set); `/run/user/<euid>/halcyon/halcyon.sock`, where a daemon started in a login
    /// session is when cron looks for it; `/tmp/halcyon-<euid>/halcyon.sock`; the
    /// system-wide `/run/halcyon/halcyon.sock` of the packaged system unit.
    static func candidates(environment: [String: String], uid: uid_t) -> [String] {
        var places: [String] = []
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            places.append(defaultPath(environment: environment, uid: uid))
        }
        for place in ["/run/user/\(uid)/halcyon/halcyon.sock", "/tmp/halcyon-\(uid)/halcyon.sock",
                      "/run/halcyon/halcyon.sock"] where !places.contains(place) {
            places.append(place)
        }
        return places
    }

    /// Whether `path` names a socket (following symbolic links, as `connect` does).
    static func isSocket(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
    }
}

/// A command of the `halcyon` tool: parsed by ArgumentParser, run by `CLIMain` with a
/// resolved context (not through `run()`, so errors map to our exit codes).
protocol HalcyonSubcommand: ParsableCommand {
    /// The shared options as parsed for this command.
    var global: GlobalOptions { get }
    /// Does the work. Returns normally for exit 0.
    /// - Throws: `CLIError.miss` for exit 1, any other `CLIError` for exit 2.
    func execute(_ context: CommandContext) throws(CLIError)
    /// The parsed arguments that are values, sent as bytes, so may be words that are not
    /// UTF-8 (`set`'s VALUE, `lease`'s COMMAND); every other argument must be text.
    var byteArguments: [String] { get }
}

extension HalcyonSubcommand {
    var byteArguments: [String] { [] }
}

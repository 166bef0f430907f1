// The command lines a shell script sends most, run without ArgumentParser: building its
// command tree and reflecting over a command's options costs more than the request
// itself (Benchmarks/RESULTS.md, "A shell call").

/// A command line of one of a few fixed shapes, recognised by hand and run by the same
/// function the parsed command runs, so the request and the output are the same:
///
///     get [--] KEY            exists [--] KEY         rm|del [--] KEY
///     touch [--] KEY TTL      incr [--] KEY [BY]      ping
///     set [--ttl D] [--] KEY VALUE                    add [--ttl D] [--] KEY VALUE
///
/// each with any of `--socket P`, `--timeout T`, `-v`. Anything else (another option,
/// help, a missing or extra argument, a word that is not UTF-8 where text goes, a value
/// from stdin) is not direct, and ArgumentParser judges it, errors included.
///
/// Threading: a value; the CLI is single-threaded.
struct DirectCommand {
    private let name: String
    private let positionals: [String]
    private let socket: String?
    private let timeout: String?
    private let verbose: Bool
    private let ttl: String?

    /// Recognises `words` (the command name first, as `CLIMain.reorder` leaves them), or nil.
    init?(_ words: [String], standIns: ArgumentWords) {
        guard let name = words.first else { return nil }
        let shape: (count: ClosedRange<Int>, takesTTL: Bool)
        switch name {
        case "get", "exists", "rm", "del": shape = (1...1, false)
        case "touch": shape = (2...2, false)
        case "incr": shape = (1...2, false)
        case "ping": shape = (0...0, false)
        case "set", "add": shape = (2...2, true)
        default: return nil
        }
        var positionals: [String] = []
        var socket: String?
        var timeout: String?
        var ttl: String?
        var verbose = false
        var index = 1
        var optionsEnded = false
        while index < words.count {
            let word = words[index]
            index += 1
            if optionsEnded || !word.hasPrefix("-") {
                positionals.append(word)
                continue
            }
            switch word {
            case "--": optionsEnded = true
            case "-v", "--verbose": verbose = true
            case "--socket", "--timeout", "--ttl":
                guard index < words.count, word != "--ttl" || shape.takesTTL else { return nil }
                let value = words[index]
                index += 1
                if word == "--socket" { socket = value } else if word == "--timeout" { timeout = value } else { ttl = value }
            default: return nil
            }
        }
        guard shape.count.contains(positionals.count) else { return nil }
        // Only a VALUE may stand for bytes that are not UTF-8, and a VALUE of '-' reads stdin.
        let textCount = shape.takesTTL ? positionals.count - 1 : positionals.count
        guard !positionals.prefix(textCount).contains(where: standIns.isStandIn) else { return nil }
        if shape.takesTTL, positionals.last == "-" { return nil }
        if name == "incr", positionals.count == 2, Int64(positionals[1]) == nil { return nil }
        self.name = name
        self.positionals = positionals
        self.socket = socket
        self.timeout = timeout
        self.verbose = verbose
        self.ttl = ttl
    }

    /// Runs the command as its parsed form would.
    func execute(
        environment: [String: String], output: CommandOutput, words: ArgumentWords, session: LoopSession?
    ) throws(CLIError) {
        let context = try CommandContext(
            socket: socket, timeout: timeout, verbose: verbose, environment: environment, output: output,
            words: words, session: session)
        let key = positionals.first ?? ""
        switch name {
        case "get": try GetCommand.run(context, key: key)
        case "exists": try ExistsCommand.run(context, key: key)
        case "rm", "del": try RemoveCommand.run(context, key: key)
        case "touch": try TouchCommand.run(context, key: key, ttl: positionals[1])
        case "incr": try CounterSettings().run(context, key: key, by: positionals.count == 2 ? Int64(positionals[1])! : 1)
        case "ping": try PingCommand.run(context)
        case "set": try SetCommand.run(context, key: key, value: positionals[1], settings: StoreSettings(ttl: ttl))
        case "add": try AddCommand.run(context, key: key, value: positionals[1], settings: StoreSettings(ttl: ttl))
        default: preconditionFailure("DirectCommand.init admits only the names above")
        }
    }
}

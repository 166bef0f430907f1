// Running one command: parse, resolve the context, execute, and map the outcome to an
// exit status and at most one error line. A process runs one command this way; `halcyon
// loop` runs one per line.

import ArgumentParser

/// The whole life of one command, as a function from words to an outcome.
///
/// Threading: main thread only; nothing here is concurrent.
enum CLIMain {
    /// How one command ended: the exit status and the error line (without `halcyon: `).
    struct Outcome {
        let status: Int32
        let errorLine: String?
    }

    /// Runs the process's command and returns its exit status.
    static func run(_ words: ArgumentWords, environment: [String: String]) -> Int32 {
        let outcome = execute(words, environment: environment, output: .standardOutput(), session: nil)
        if let line = outcome.errorLine { Output.error(line) }
        return outcome.status
    }

    /// Parses and runs one command.
    /// - Parameters:
    ///   - words: the command's words, without the program name.
    ///   - output: where results (and help) go.
    ///   - session: `halcyon loop`'s connection, or nil for a command of its own.
    static func execute(
        _ words: ArgumentWords, environment: [String: String], output: CommandOutput, session: LoopSession?
    ) -> Outcome {
        let arguments = words.strings
        let reordered: [String]
        do {
            reordered = try reorder(arguments)
        } catch {
            return Outcome(status: error.exitCode, errorLine: error.line)
        }
        if let direct = DirectCommand(reordered, standIns: words) {
            do {
                try direct.execute(environment: environment, output: output, words: words, session: session)
                return Outcome(status: 0, errorLine: nil)
            } catch {
                return Outcome(status: error.exitCode, errorLine: error.line)
            }
        }
        var command: ParsableCommand
        do {
            if let type = directType(reordered) {
                command = try type.parse(Array(reordered.dropFirst()))
            } else {
                command = try HalcyonCommand.parseAsRoot(reordered)
            }
        } catch {
            return report(parserError: error, output: output, arguments: reordered)
        }
        guard let subcommand = command as? any HalcyonSubcommand else {
            if arguments.isEmpty {
                return Outcome(status: 2, errorLine: CLIError.usage("missing command; see 'halcyon --help'").line)
            }
            // `--help`, `help set`, `--version`: ArgumentParser hands back a command of its
            // own whose run() prints the text (by throwing a clean exit).
            do {
                try command.run()
                return Outcome(status: 0, errorLine: nil)
            } catch {
                return report(parserError: error, output: output, arguments: reordered)
            }
        }
        do {
            let allowed = subcommand.byteArguments
            for standIn in words.standIns where !allowed.contains(standIn) {
                throw CLIError.input(
                    reason: "notUTF8",
                    message: "an argument is not valid UTF-8: keys, prefixes and options are text; only a VALUE may hold other bytes")
            }
            let context = try CommandContext(
                options: subcommand.global, environment: environment, output: output, words: words, session: session)
            try subcommand.execute(context)
            return Outcome(status: 0, errorLine: nil)
        } catch let error as CLIError {
            return Outcome(status: error.exitCode, errorLine: error.line)
        } catch {
            return Outcome(status: 2, errorLine: CLIError.usage("\(error)").line)
        }
    }

    /// What ArgumentParser reports: help with status 0, anything else as one `usage:`
    /// line with status 2 (ArgumentParser's own status would be 64). An unknown option
    /// that is really a key or value starting with '-' gets the way to pass it.
    private static func report(parserError error: any Error, output: CommandOutput, arguments: [String]) -> Outcome {
        let code = HalcyonCommand.exitCode(for: error)
        if code == .success {
            output.line(HalcyonCommand.fullMessage(for: error))
            return Outcome(status: 0, errorLine: nil)
        }
        let message = HalcyonCommand.message(for: error)
        let firstLine = message.split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init) ?? "invalid arguments"
        var text = String(firstLine.trimmingPrefix("Error: "))
        // ArgumentParser may first miss the argument a dashed word was meant to be.
        let shortFlags: Set<String> = ["-", "-v", "-h", "-0"]
        let dashWord = arguments.prefix(while: { $0 != "--" }).dropFirst().contains {
            $0.hasPrefix("-") && !$0.hasPrefix("--") && !shortFlags.contains($0)
        }
        if text.hasPrefix("Unknown option '-") || (text.hasPrefix("Missing expected argument") && dashWord),
           let hint = dashHint(command: arguments.first ?? "") {
            text += " (\(hint))"
        }
        return Outcome(status: 2, errorLine: CLIError.usage(text).line)
    }

    /// How `command` takes an argument that starts with '-', or nil for a command whose
    /// arguments are not keys, prefixes or values.
    static func dashHint(command: String) -> String? {
        let example: String
        switch command {
        case "set", "add": example = "a key or value that starts with '-' goes after '--': halcyon \(command) -- -key -value"
        case "cas": example = "a key or value that starts with '-' goes after '--': halcyon cas -- -key VERSION -value"
        case "keys", "rm-prefix": example = "a prefix that starts with '-' goes after '--': halcyon \(command) -- -prefix"
        case "lease": example = "a key that starts with '-' goes in --key: halcyon lease --key -key -- COMMAND"
        case "get", "rm", "del", "exists", "describe", "touch", "incr", "decr", "release":
            example = "a key that starts with '-' goes after '--': halcyon \(command) -- -key"
        default: return nil
        }
        return example
    }

    /// Options that may come before the command name and take a value.
    private static let leadingOptionsWithValue: Set<String> = ["--socket", "--timeout"]
    /// Flags that may come before the command name.
    private static let leadingFlags: Set<String> = ["-v", "--verbose"]
    /// Every option of any command that takes a value (the rest are flags): what tells an
    /// option's value from a positional argument when negative numbers are moved behind
    /// `--`. An option missing here would lose its value to the positional arguments
    /// whenever a negative number is on the line.
    private static let optionsWithValue: Set<String> = [
        "--socket", "--timeout", "--ttl", "--expires-at", "--memory-ttl", "--lease", "--encoding",
        "--initial", "--page-size", "--key", "--lease-ttl", "--wait", "--interval",
    ]

    /// Rewrites the command line into the one shape ArgumentParser reads:
    /// - global options written before the command name move to just after it, where
    ///   each command's `GlobalOptions` group parses them: `--socket P get k` becomes
    ///   `get --socket P k`;
    /// - negative numbers are arguments, not options: `incr n -3` becomes `incr -- n -3`
    ///   (ArgumentParser would read `-3` as an unknown option).
    /// Anything else (help, an unknown option) is left in place for ArgumentParser to judge.
    /// - Throws: `CLIError.usage` for a missing command, an unknown command name (also
    ///   after `help`), or a leading option without its value, which ArgumentParser would
    ///   report less clearly.
    static func reorder(_ arguments: [String]) throws(CLIError) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            if leadingOptionsWithValue.contains(name) {
                if argument.contains("=") {
                    leading.append(argument)
                    index += 1
                } else {
                    guard index + 1 < arguments.count else { throw .usage("missing value for \(argument)") }
                    leading.append(contentsOf: arguments[index...(index + 1)])
                    index += 2
                }
            } else if leadingFlags.contains(argument) {
                leading.append(argument)
                index += 1
            } else {
                break
            }
        }
        guard index < arguments.count else {
            if leading.isEmpty { return arguments }
            throw .usage("missing command; see 'halcyon --help'")
        }
        let commandName = arguments[index]
        if commandName.hasPrefix("-") { return arguments }
        guard isCommandName(commandName) else {
            throw .usage("unknown command '\(commandName)'; see 'halcyon --help'")
        }
        let rest = Array(arguments[(index + 1)...])
        if commandName == "help", let topic = rest.first, !topic.hasPrefix("-"), !isCommandName(topic) {
            throw .usage("unknown command '\(topic)'; see 'halcyon --help'")
        }
        // `lease` keeps its words: after its `--` comes a command, whose arguments are its own.
        if commandName == "lease" { return [commandName] + leading + rest }
        return [commandName] + separatingNegativeNumbers(leading + rest)
    }

    /// Moves the positional arguments behind one `--` when any of them is a negative
    /// number, keeping their order and every option's value beside its option
    /// (`--initial -5` becomes `--initial=-5`). Without a negative number before an
    /// explicit `--`, the words are returned as they are.
    private static func separatingNegativeNumbers(_ words: [String]) -> [String] {
        let end = words.firstIndex(of: "--") ?? words.count
        guard words[..<end].contains(where: isNegativeNumber) else { return words }
        var options: [String] = []
        var positionals: [String] = []
        var index = 0
        while index < end {
            let word = words[index]
            if optionsWithValue.contains(word), index + 1 < end {
                options.append("\(word)=\(words[index + 1])")
                index += 2
                continue
            }
            if word.hasPrefix("-"), word != "-", !isNegativeNumber(word) {
                options.append(word)
            } else {
                positionals.append(word)
            }
            index += 1
        }
        let afterTerminator = end < words.count ? words[(end + 1)...] : []
        return options + ["--"] + positionals + afterTerminator
    }

    /// `-3`, `-12.5`: a word ArgumentParser would take for an option. `-0` is not one:
    /// it is `keys`' flag.
    private static func isNegativeNumber(_ word: String) -> Bool {
        let digits = word.utf8.dropFirst()
        guard word.utf8.first == UInt8(ascii: "-"), word != "-0", let first = digits.first,
              (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first)
        else { return false }
        var seenPoint = false
        for byte in digits {
            if byte == UInt8(ascii: "."), !seenPoint {
                seenPoint = true
            } else if !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                return false
            }
        }
        return digits.last != UInt8(ascii: ".")
    }

    /// The subcommand to parse `words` with directly, skipping the root command: the
    /// root builds the whole command tree first, which is most of what a short command
    /// costs. Nil for help and version requests, whose texts name the command as
    /// `halcyon <name>` only when parsed from the root.
    private static func directType(_ words: [String]) -> (any HalcyonSubcommand.Type)? {
        guard let name = words.first, let type = subcommands[name] else { return nil }
        for word in words.dropFirst() {
            if word == "--" { break }
            if word == "-h" || word == "--help" || word == "--version" || word.hasPrefix("--experimental") { return nil }
        }
        return type
    }

    /// Every subcommand by its name and its aliases.
    private static let subcommands: [String: any HalcyonSubcommand.Type] = {
        var types: [String: any HalcyonSubcommand.Type] = [:]
        for command in HalcyonCommand.configuration.subcommands {
            guard let type = command as? any HalcyonSubcommand.Type else { continue }
            if let name = command.configuration.commandName { types[name] = type }
            for alias in command.configuration.aliases { types[alias] = type }
        }
        return types
    }()

    /// Whether `word` names a subcommand (or alias), or ArgumentParser's `help`.
    private static func isCommandName(_ word: String) -> Bool {
        word == "help" || subcommands[word] != nil
    }
}

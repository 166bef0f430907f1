// Running one invocation: parse, resolve the context, execute, map the outcome to an
// exit status and at most one stderr line.

import ArgumentParser

/// The whole life of one `halcyon` process, as a function from arguments to exit status.
///
/// Threading: main thread only; nothing here is concurrent.
enum CLIMain {
    /// Options that may come before the command name and take a value.
    private static let leadingOptionsWithValue: Set<String> = ["--socket", "--timeout"]
    /// Flags that may come before the command name.
    private static let leadingFlags: Set<String> = ["-v", "--verbose"]

    /// Runs `arguments` (without the program name) and returns the exit status.
    static func run(_ arguments: [String], environment: [String: String]) -> Int32 {
        let reordered: [String]
        do {
            reordered = try reorder(arguments)
        } catch {
            Output.error(error.line!)
            return error.exitCode
        }
        var command: ParsableCommand
        do {
            command = try HalcyonCommand.parseAsRoot(reordered)
        } catch {
            return report(parserError: error)
        }
        guard let subcommand = command as? any HalcyonSubcommand else {
            if arguments.isEmpty {
                Output.error(CLIError.usage("missing command; see 'halcyon --help'").line!)
                return 2
            }
            // `--help`, `help set`, `--version`: ArgumentParser hands back a command of its
            // own whose run() prints the text (by throwing a clean exit).
            do {
                try command.run()
                return 0
            } catch {
                return report(parserError: error)
            }
        }
        do {
            let context = try CommandContext(options: subcommand.global, environment: environment)
            try subcommand.execute(context)
            return 0
        } catch {
            if let line = error.line { Output.error(line) }
            return error.exitCode
        }
    }

    /// Prints what ArgumentParser reports: help on stdout with status 0, anything else
    /// as one `usage:` line with status 2 (ArgumentParser's own status would be 64).
    private static func report(parserError error: any Error) -> Int32 {
        let code = HalcyonCommand.exitCode(for: error)
        if code == .success {
            Output.line(HalcyonCommand.fullMessage(for: error))
            return 0
        }
        let message = HalcyonCommand.message(for: error)
        let firstLine = message.split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init) ?? "invalid arguments"
        Output.error(CLIError.usage(String(firstLine.trimmingPrefix("Error: "))).line!)
        return 2
    }

    /// Moves global options written before the command name to just after it, where
    /// each command's `GlobalOptions` group parses them: `--socket P get k` becomes
    /// `get --socket P k`. Anything else (help, an unknown option) is left in place for
    /// ArgumentParser to judge.
    /// - Throws: `CLIError.usage` for a missing command, an unknown command name, or a
    ///   leading option without its value, which ArgumentParser would report less clearly.
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
        guard commandNames.contains(commandName) else {
            throw .usage("unknown command '\(commandName)'; see 'halcyon --help'")
        }
        return [commandName] + leading + arguments[(index + 1)...]
    }

    /// Every name and alias of a subcommand, and ArgumentParser's `help`.
    private static let commandNames: Set<String> = {
        var names: Set<String> = ["help"]
        for command in HalcyonCommand.configuration.subcommands {
            if let name = command.configuration.commandName { names.insert(name) }
            names.formUnion(command.configuration.aliases)
        }
        return names
    }()
}

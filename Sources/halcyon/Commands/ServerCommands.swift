// Commands about the daemon rather than one key: `ping`, `info`, `stats`.

import ArgumentParser
import HalcyonJSON

/// `halcyon ping`: prints PONG when the daemon answers.
struct PingCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "ping", abstract: "Check that the daemon answers (prints PONG).")

    @OptionGroup(title: "Global options") var global: GlobalOptions

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("server.ping")
        guard result["pong"]?.bool == true else { throw .badReply("server.ping did not answer pong: \(result.compactText)") }
        Output.line("PONG")
    }
}

/// `halcyon info`: the daemon's name, version, paths, limits and defaults.
struct InfoCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "info", abstract: "Show the daemon's version, paths, limits and defaults.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Print the raw result JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("server.info")
        Output.line(json ? result.compactText : HumanFormat.table(result))
    }
}

/// `halcyon stats`: the daemon's counters as a table.
struct StatsCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "stats", abstract: "Show hit/miss counters, sizes and load by tier.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Print the raw result JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.stats")
        Output.line(json ? result.compactText : HumanFormat.table(result))
    }
}

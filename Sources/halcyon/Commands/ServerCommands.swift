// Commands about the daemon rather than one key: `ping`, `info`, `whoami`, `stats`.

import ArgumentParser
import HalcyonJSON

/// `halcyon ping`: prints PONG when the daemon answers.
struct PingCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "ping", abstract: "Check that the daemon answers (prints PONG).")

    @OptionGroup(title: "Global options") var global: GlobalOptions

    func execute(_ context: CommandContext) throws(CLIError) {
        try Self.run(context)
    }

    /// The command as a function (also `DirectCommand`'s `ping`).
    static func run(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("server.ping")
        guard result["pong"]?.bool == true else { throw .badReply("server.ping did not answer pong: \(result.compactText)") }
        context.output.line("PONG")
    }
}

/// `halcyon info`: the daemon's name, version, paths, limits and defaults.
struct InfoCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "info", abstract: "Show the daemon's version, paths, limits and defaults.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Print the raw result JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("server.info")
        context.output.line(json ? result.compactText : HumanFormat.table(result))
    }
}

/// `halcyon whoami`: the namespace and rights the daemon gave this connection
/// (`server.info`'s `namespace` and `rights`, under `halcyond --access`).
struct WhoamiCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "whoami", abstract: "Show the namespace and rights the daemon grants this user.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Print {\"namespace\":...,\"rights\":[...]} as JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("server.info")
        // A daemon without --access has one keyspace and no rights to check: every right.
        let tenancy = result["rights"] != nil
        let namespace = result["namespace"]?.string
        let rights = result["rights"]?.array?.compactMap(\.string) ?? ["read", "write", "admin"]
        if json {
            let object = JSONValue.object([
                ("namespace", namespace.map(JSONValue.string) ?? .null), ("rights", .array(rights.map(JSONValue.string))),
            ])
            context.output.line(object.compactText)
            return
        }
        let shown = namespace ?? (tenancy ? "* (the whole keyspace)" : "- (the daemon runs without --access)")
        context.output.line("namespace  \(shown)")
        context.output.line("rights     \(rights.joined(separator: ","))")
    }
}

/// `halcyon stats`: the daemon's counters as a table.
struct StatsCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "stats", abstract: "Show hit/miss counters, sizes and load by tier.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Print the raw result JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.stats")
        context.output.line(json ? result.compactText : HumanFormat.table(result))
    }
}

/// `halcyon metrics`: the daemon's metrics in the Prometheus text format, as
/// `server.metrics` returns them; written as is, so node_exporter's textfile collector
/// can read a file this command filled (`halcyon metrics > halcyon.prom.$$ && mv ...`).
struct MetricsCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Print the daemon's metrics in the Prometheus text format.")

    @OptionGroup(title: "Global options") var global: GlobalOptions

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("server.metrics")
        guard let text = result["text"]?.string else {
            throw .badReply("server.metrics has no text: \(result.compactText)")
        }
        context.output.write(Array(text.utf8))
    }
}

// Whole-cache commands: `clear`, `trim`, `remove-expired`, `size`.

import ArgumentParser
import HalcyonJSON

/// `halcyon clear`: removes every entry from both tiers (or one).
struct ClearCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove every entry (prints how many).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Clear the memory tier only.") var memoryOnly = false
    @Flag(help: "Clear the disk tier only.") var diskOnly = false
    @Flag(help: "Print the raw result JSON.") var json = false

    func validate() throws {
        if memoryOnly && diskOnly { throw ValidationError("give only one of --memory-only and --disk-only") }
    }

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.clear") { writer in
            if memoryOnly { writer.key("disk"); writer.bool(false) }
            if diskOnly { writer.key("memory"); writer.bool(false) }
        }
        context.output.line(json ? result.compactText : "removed \(result["removed"]?.compactText ?? "?")")
    }
}

/// `halcyon trim`: brings the disk tier under its size limit now.
struct TrimCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "trim", abstract: "Shrink the disk tier to half its limit if it is over it (least recently used first).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Print the raw result JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.trim")
        if json { return context.output.line(result.compactText) }
        let total = result["totalSize"]?.int64.map(HumanFormat.size) ?? "?"
        context.output.line("removed \(result["removed"]?.compactText ?? "?"); disk tier now \(total)")
    }
}

/// `halcyon remove-expired`: sweeps expired entries now instead of waiting for the timer.
struct RemoveExpiredCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "remove-expired", abstract: "Remove expired entries now (prints how many).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Print the raw result JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.removeExpired")
        context.output.line(json ? result.compactText : "removed \(result["removed"]?.compactText ?? "?")")
    }
}

/// `halcyon size`: the disk tier's total size and file count.
struct SizeCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "size", abstract: "Show the disk tier's total size and entry count.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Print the raw result JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.totalSize")
        if json { return context.output.line(result.compactText) }
        let bytes = result["bytes"]?.int64.map(HumanFormat.size) ?? "?"
        context.output.line("\(bytes) in \(result["count"]?.compactText ?? "?") entries")
    }
}

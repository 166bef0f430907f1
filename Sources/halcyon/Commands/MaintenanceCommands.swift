// Whole-cache commands: `clear`, `trim`, `remove-expired`, `size`.

import ArgumentParser
import HalcyonJSON

/// `halcyon clear`: removes every entry from both tiers (or one).
struct ClearCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove every entry (prints how many).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Clear the memory tier only.") var memoryOnly = false
    @Flag(help: "Clear the disk tier only.") var diskOnly = false
    @Flag(help: "Also remove the shared keys from the upstream (Redis), for every host (needs a daemon with --upstream).")
    var shared = false
    @Flag(help: "Print the raw result JSON.") var json = false

    func validate() throws {
        if memoryOnly && diskOnly { throw ValidationError("give only one of --memory-only and --disk-only") }
    }

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.clear") { writer in
            if memoryOnly { writer.key("disk"); writer.bool(false) }
            if diskOnly { writer.key("memory"); writer.bool(false) }
            if shared { writer.key("shared"); writer.bool(true) }
        }
        context.output.line(json ? result.compactText : removedLine(result))
    }
}

/// `removed N`, and with an upstream what happened to shared keys: `removed 2; dropped 1
/// shared copy` (this host's copies; the keys stay upstream), `; removed 3 shared keys
/// upstream` (for every host).
func removedLine(_ result: JSONValue) -> String {
    var line = "removed \(result["removed"]?.compactText ?? "?")"
    if let dropped = result["droppedShared"]?.int64 {
        line += "; dropped \(dropped) shared \(dropped == 1 ? "copy" : "copies")"
    }
    if let removed = result["removedShared"]?.int64 {
        line += "; removed \(removed) shared \(removed == 1 ? "key" : "keys") upstream"
    }
    return line
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
        context.output.line("\(removedLine(result)); disk tier now \(total)")
    }
}

/// `halcyon remove-expired`: sweeps expired entries now instead of waiting for the timer.
struct RemoveExpiredCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(commandName: "remove-expired", abstract: "Remove expired entries now (prints how many).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Flag(help: "Print the raw result JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.removeExpired")
        context.output.line(json ? result.compactText : removedLine(result))
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

// Listing and removing keys by prefix: `keys [PREFIX]` pages through `cache.keys` until
// the cursor runs out; `rm-prefix PREFIX` removes every match.

import ArgumentParser
import HalcyonJSON

/// `halcyon keys [PREFIX]`: every live key starting with PREFIX, one per line.
struct KeysCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List the live keys starting with PREFIX (default: all), one per line.",
        discussion: "Pages through the daemon's listing (--page-size keys a request); the order is unspecified.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "Only keys starting with this.") var prefix: String = ""
    @Option(help: "Keys per request (1 to 10000).") var pageSize: Int = 1000
    @Flag(name: [.customShort("0"), .long], help: "End each key with NUL instead of a line feed.") var null = false

    func execute(_ context: CommandContext) throws(CLIError) {
        guard (1 ... 10_000).contains(pageSize) else { throw .usage("--page-size must be 1 to 10000") }
        let connection = try context.connect()
        var cursor: String?
        repeat {
            let page = try connection.call("cache.keys") { writer in
                if !prefix.isEmpty { writer.key("prefix"); writer.string(prefix) }
                if let cursor { writer.key("cursor"); writer.string(cursor) }
                writer.key("limit"); writer.int(pageSize)
            }
            guard let keys = page["keys"]?.array else { throw .badReply("a keys result without keys") }
            var out: [UInt8] = []
            for key in keys {
                guard let bytes = key.stringBytes else { throw .badReply("a key that is not a string") }
                out += bytes
                out.append(null ? 0 : UInt8(ascii: "\n"))
            }
            context.output.write(out)
            cursor = page["cursor"]?.string
        } while cursor != nil
    }
}

/// `halcyon rm-prefix PREFIX`: removes every key starting with PREFIX; prints the count.
struct RemovePrefixCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "rm-prefix",
        abstract: "Remove every key starting with PREFIX from both tiers and print how many (exit 1, printing nothing, if none).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The prefix (not empty; 'clear' removes everything).") var prefix: String

    func execute(_ context: CommandContext) throws(CLIError) {
        guard !prefix.isEmpty else { throw .usage("PREFIX must not be empty (use 'halcyon clear')") }
        let result = try context.connect().call("cache.removePrefix") { writer in
            writer.key("prefix"); writer.string(prefix)
        }
        let removed = result["removed"]?.int64 ?? 0
        // A miss prints nothing, as every other command's miss does.
        guard removed > 0 else { throw .miss }
        context.output.line(String(removed))
    }
}

// `halcyon describe KEY`: what the cache knows about a key, without loading it.

import ArgumentParser
import HalcyonJSON

/// Prints size, encoding, tier, expiry and last access of an entry as text, or the raw
/// `cache.describe` result with `--json`. Never loads the value and never extends its
/// expiration, so describing is free of side effects.
struct DescribeCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "describe", abstract: "Show a key's size, encoding, tier, expiry and last access (exit 1 on a miss).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Flag(help: "Print the raw result JSON.") var json = false

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.describe") { writer in
            writer.key("key"); writer.string(key)
        }
        let found = result["found"]?.bool == true
        if json {
            context.output.line(result.compactText)
            if !found { throw .miss }
            return
        }
        guard found else { throw .miss }
        let tier = result["cacheType"]?.string ?? "unknown"
        // One lifetime whichever tier answered; a memory copy also says how long it stays
        // in RAM ("expires in 7d; in memory for 5m"), which never shortens the lifetime.
        var expires = HumanFormat.expiry(result["expiresAt"])
        if let resident = result["memoryExpiresAt"] {
            expires += "; " + HumanFormat.residency(resident)
        }
        let rows: [(String, String)] = [
            ("key", key),
            ("tier", tier),
            ("size", result["size"]?.int64.map(HumanFormat.size) ?? "unknown"),
            ("encoding", result["encoding"]?.string ?? "unknown"),
            ("expires", expires),
            ("last access", HumanFormat.pastTime(result["lastAccessAt"])),
            ("version", result["version"]?.int64.map { String($0) } ?? "unknown"),
        ]
        for (name, text) in rows {
            let label = name + ":"
            context.output.line(label + String(repeating: " ", count: max(1, 13 - label.count)) + text)
        }
    }
}

// The small per-key commands: `rm`, `exists`, `touch`. Each maps a "nothing there"
// answer to exit 1, so `if halcyon exists k; then …` reads naturally in shell.

import ArgumentParser
import HalcyonJSON

/// `halcyon rm KEY`: removes a key from both tiers (or one).
struct RemoveCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "rm", abstract: "Remove a key (exit 1 if nothing was removed).", aliases: ["del"])

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Flag(help: "Remove from the memory tier only.") var memoryOnly = false
    @Flag(help: "Remove from the disk tier only.") var diskOnly = false

    func validate() throws {
        if memoryOnly && diskOnly { throw ValidationError("give only one of --memory-only and --disk-only") }
    }

    func execute(_ context: CommandContext) throws(CLIError) {
        try Self.run(context, key: key, memoryOnly: memoryOnly, diskOnly: diskOnly)
    }

    /// The command with its options as plain values (also `DirectCommand`'s `rm KEY`).
    static func run(_ context: CommandContext, key: String, memoryOnly: Bool = false, diskOnly: Bool = false) throws(CLIError) {
        let result = try context.connect().call("cache.remove") { writer in
            writer.key("key"); writer.string(key)
            if memoryOnly { writer.key("fromDisk"); writer.bool(false) }
            if diskOnly { writer.key("fromMemory"); writer.bool(false) }
        }
        guard result["removed"]?.bool == true else { throw .miss }
    }
}

/// `halcyon exists KEY`: exit 0 when cached, 1 when not; never loads or extends.
struct ExistsCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "exists", abstract: "Exit 0 if the key is cached, 1 if not (-v prints memory or disk).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String

    func execute(_ context: CommandContext) throws(CLIError) {
        try Self.run(context, key: key)
    }

    /// The command as a function (also `DirectCommand`'s `exists KEY`).
    static func run(_ context: CommandContext, key: String) throws(CLIError) {
        let result = try context.connect().call("cache.isCached") { writer in
            writer.key("key"); writer.string(key)
        }
        guard result["cached"]?.bool == true else { throw .miss }
        if context.verbose { context.output.line(result["cacheType"]?.string ?? "unknown") }
    }
}

/// `halcyon touch KEY TTL`: a new expiration counted from now, value untouched.
struct TouchCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "touch", abstract: "Give a key a new expiration from now (exit 1 on a miss).",
        discussion: "A TTL of 0 expires the key now: it is removed and counted as an expiration, as Redis's EXPIRE with 0 does.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Argument(help: "The new time to live: a duration (10m, 1h30m), 'never', or 0 to expire the key now.") var ttl: String
    @Option(name: .customLong("memory-ttl"), help: ArgumentHelp("A new memory-tier expiration too.", valueName: "duration"))
    var memoryTTL: String?

    func execute(_ context: CommandContext) throws(CLIError) {
        try Self.run(context, key: key, ttl: ttl, memoryTTL: memoryTTL)
    }

    /// The command with its options as plain values (also `DirectCommand`'s `touch KEY TTL`).
    static func run(_ context: CommandContext, key: String, ttl: String, memoryTTL: String? = nil) throws(CLIError) {
        let expiration = try Expiration.ttl(ttl, option: "TTL", zeroExpiresNow: true)
        let memoryExpiration = try memoryTTL.map { text throws(CLIError) in try Expiration.ttl(text, option: "--memory-ttl") }
        let result = try context.connect().call("cache.touch") { writer in
            writer.key("key"); writer.string(key)
            writer.key("expiration"); expiration.write(to: &writer)
            if let memoryExpiration { writer.key("memoryExpiration"); memoryExpiration.write(to: &writer) }
        }
        guard result["touched"]?.bool == true else { throw .miss }
        guard context.verbose else { return }
        // A TTL of 0 removed the key; the instant the daemon reports is when that happened.
        if case .expired = expiration {
            context.output.line("expired now: removed")
        } else {
            context.output.line(HumanFormat.expiry(result["expiresAt"]))
        }
    }
}

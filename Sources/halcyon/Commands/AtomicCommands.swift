// The atomic writes from the shell: `add` (set-if-absent), `cas` (compare-and-set on a
// version from `describe`) and `incr`/`decr`. `add` and `cas` map "not stored" to exit 1,
// so `if halcyon add lock 1 --ttl 1h; then …` runs once across scripts.

import ArgumentParser
import HalcyonJSON

/// The value and store options `add` and `cas` share with `set`.
struct StoreOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Expire after this long (disk tier).", valueName: "duration"))
    var ttl: String?

    @Option(help: ArgumentHelp("Expire at this instant: Unix seconds or ISO 8601.", valueName: "time"))
    var expiresAt: String?

    @Flag(help: "Never expire (disk tier).")
    var never = false

    @Option(name: .customLong("memory-ttl"), help: ArgumentHelp("Expiration in the memory tier (or 'never').", valueName: "duration"))
    var memoryTTL: String?

    @Flag(help: "Keep the value in memory only.")
    var noDisk = false

    @Flag(help: "The value is JSON: validate it and store it with the json encoding.")
    var json = false

    @Option(help: ArgumentHelp("The lease token from 'halcyon lease' this write fulfils.", valueName: "token"))
    var lease: String?

    /// The options as plain values.
    var settings: StoreSettings {
        StoreSettings(ttl: ttl, expiresAt: expiresAt, never: never, memoryTTL: memoryTTL, noDisk: noDisk, json: json, lease: lease)
    }
}

/// What `set`, `add` and `cas` store with: `StoreOptions` as plain values, so a command
/// line that needs no parser (`DirectCommand`) makes the same request.
struct StoreSettings {
    var ttl: String?
    var expiresAt: String?
    var never = false
    var memoryTTL: String?
    var noDisk = false
    var json = false
    var lease: String?

    /// Reads the value (argument, or stdin for '-' or none), connects, and returns the
    /// connection with a writer of the params of a set-shaped request (into `writer`'s
    /// open object, after `key`).
    func params(value: String?, context: CommandContext) throws(CLIError)
        -> (Connection, (inout JSONWriter) -> Void)
    {
        let expiration = try Expiration.choose(ttl: ttl, expiresAt: expiresAt, never: never)
        let memoryExpiration = try memoryTTL.map { text throws(CLIError) in try Expiration.ttl(text, option: "--memory-ttl") }
        let fromStandardInput = value == nil || value == "-"
        if fromStandardInput { try context.checkStandardInput(for: value) }
        // Connect before reading stdin: a daemon that is down fails the command at once,
        // not after a slow producer on stdin is done.
        let connection = try context.connect()
        let bytes = fromStandardInput ? try Output.readStandardInput() : context.words.bytes(of: value!)
        let encoded = try EncodedValue(bytes, asJSON: json)
        let noDisk = self.noDisk
        let lease = self.lease
        // Without a disk copy the memory lifetime is the entry's lifetime: --ttl says it
        // unless --memory-ttl does.
        let memoryLifetime = memoryExpiration ?? (noDisk ? expiration : nil)
        return (connection, { writer in
            writer.key("value"); encoded.write(to: &writer)
            writer.key("encoding"); writer.string(encoded.encoding.rawValue)
            if let expiration { writer.key("expiration"); expiration.write(to: &writer) }
            if let memoryLifetime { writer.key("memoryExpiration"); memoryLifetime.write(to: &writer) }
            if noDisk { writer.key("toDisk"); writer.bool(false) }
            if let lease { writer.key("lease"); writer.string(lease) }
        })
    }
}

/// `halcyon add KEY [VALUE|-]`: stores only when the key holds no live entry.
struct AddCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Store a value only if the key is absent (exit 1 if it exists).",
        discussion: "Atomic across all clients: of concurrent adds of one key exactly one stores. -v prints the new version.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Argument(help: "The value; '-' or absent reads stdin.") var value: String?
    @OptionGroup var store: StoreOptions

    var byteArguments: [String] { value.map { [$0] } ?? [] }

    func execute(_ context: CommandContext) throws(CLIError) {
        try Self.run(context, key: key, value: value, settings: store.settings)
    }

    /// The command with its options as plain values (also `DirectCommand`'s `add K V`).
    static func run(_ context: CommandContext, key: String, value: String?, settings: StoreSettings) throws(CLIError) {
        let (connection, write) = try settings.params(value: value, context: context)
        let result = try connection.call("cache.add") { writer in
            writer.key("key"); writer.string(key)
            write(&writer)
        }
        guard result["stored"]?.bool == true else { throw .miss }
        if context.verbose, let version = result["version"]?.int64 { context.output.line(String(version)) }
    }
}

/// `halcyon cas KEY VERSION [VALUE|-]`: stores only when the key's version is VERSION.
struct CompareAndSetCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "cas",
        abstract: "Store a value only if the key's version is still VERSION (exit 1 if it changed or is gone).",
        discussion: "Take VERSION from 'halcyon describe KEY' (its 'version:' row, or 'describe --json'), or from 'add -v', 'set -v' or a previous 'cas'. Prints the new version.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Argument(help: "The version the key must still have.") var version: UInt64
    @Argument(help: "The value; '-' or absent reads stdin.") var value: String?
    @OptionGroup var store: StoreOptions

    var byteArguments: [String] { value.map { [$0] } ?? [] }

    func execute(_ context: CommandContext) throws(CLIError) {
        let (connection, write) = try store.settings.params(value: value, context: context)
        let result = try connection.call("cache.cas") { writer in
            writer.key("key"); writer.string(key)
            writer.key("version"); writer.int(Int64(bitPattern: version))
            write(&writer)
        }
        guard result["stored"]?.bool == true else { throw .miss }
        if let version = result["version"]?.int64 { context.output.line(String(version)) }
    }
}

/// The options `incr` and `decr` share.
struct CounterOptions: ParsableArguments {
    @Option(help: "The value a missing key starts from.") var initial: Int64 = 0
    @Option(help: ArgumentHelp("A new expiration (the entry's lifetime; with --no-disk, in memory).", valueName: "duration"))
    var ttl: String?
    @Option(help: ArgumentHelp("Expire at this instant: Unix seconds or ISO 8601.", valueName: "time")) var expiresAt: String?
    @Flag(help: "Never expire.") var never = false
    @Option(name: .customLong("memory-ttl"), help: ArgumentHelp("Expiration in the memory tier (or 'never').", valueName: "duration"))
    var memoryTTL: String?
    @Flag(help: "Keep the value in memory only.") var noDisk = false

    /// The options as plain values.
    var settings: CounterSettings {
        CounterSettings(initial: initial, ttl: ttl, expiresAt: expiresAt, never: never, memoryTTL: memoryTTL, noDisk: noDisk)
    }
}

/// `CounterOptions` as plain values, and the request `incr` and `decr` make.
struct CounterSettings {
    var initial: Int64 = 0
    var ttl: String?
    var expiresAt: String?
    var never = false
    var memoryTTL: String?
    var noDisk = false

    /// Adds `by` to `key` and prints the new value.
    func run(_ context: CommandContext, key: String, by: Int64) throws(CLIError) {
        let expiration = try Expiration.choose(ttl: ttl, expiresAt: expiresAt, never: never)
        let memoryExpiration = try memoryTTL.map { text throws(CLIError) in try Expiration.ttl(text, option: "--memory-ttl") }
        // Without a disk copy the memory lifetime is the entry's lifetime: --ttl says it
        // unless --memory-ttl does.
        let memoryLifetime = memoryExpiration ?? (noDisk ? expiration : nil)
        let initial = self.initial
        let noDisk = self.noDisk
        let result = try context.connect().call("cache.incr") { writer in
            writer.key("key"); writer.string(key)
            writer.key("by"); writer.int(by)
            if initial != 0 { writer.key("initial"); writer.int(initial) }
            if let expiration { writer.key("expiration"); expiration.write(to: &writer) }
            if let memoryLifetime { writer.key("memoryExpiration"); memoryLifetime.write(to: &writer) }
            if noDisk { writer.key("toDisk"); writer.bool(false) }
        }
        guard let value = result["value"]?.int64 else { throw .badReply("an incr result without a value") }
        context.output.line(String(value))
    }
}

/// `halcyon incr KEY [BY]`: atomic integer arithmetic.
struct IncrementCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "incr",
        abstract: "Add BY (default 1) to the integer under KEY atomically and print the result.",
        discussion: """
            A missing key starts at --initial (default 0). The entry keeps its expiration unless             --ttl/--expires-at/--never is given. BY may be negative: 'halcyon incr n -3'.
            """)

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Argument(help: "The amount (may be negative).") var by: Int64 = 1
    @OptionGroup var counter: CounterOptions

    func execute(_ context: CommandContext) throws(CLIError) {
        try counter.settings.run(context, key: key, by: by)
    }
}

/// `halcyon decr KEY [BY]`: `incr` with BY negated.
struct DecrementCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "decr", abstract: "Subtract BY (default 1) from the integer under KEY atomically and print the result.")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Argument(help: "The amount.") var by: Int64 = 1
    @OptionGroup var counter: CounterOptions

    func execute(_ context: CommandContext) throws(CLIError) {
        guard by != Int64.min else { throw .usage("BY is out of range") }
        try counter.settings.run(context, key: key, by: -by)
    }
}

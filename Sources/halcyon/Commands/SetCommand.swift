// `halcyon set KEY [VALUE|-]`: store a value from an argument or stdin.

import ArgumentParser
import HalcyonJSON

/// Stores a value. The encoding is picked so nothing is lost and the entry reads back as
/// the type it is: valid UTF-8 goes as `utf8` (readable in `describe` and by other
/// clients as text), anything else as `base64`, and `--json` validates the input and
/// stores it as `json`.
struct SetCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Store a value from an argument or stdin.",
        discussion: """
            The value is the argument, or stdin when it is '-' or absent (binary-safe). \
            Durations: 500ms, 30s, 10m, 2h, 7d, 1h30m, or plain seconds. \
            Without --ttl/--expires-at/--never the daemon's default disk expiration applies.
            """)

    @OptionGroup(title: "Global options") var global: GlobalOptions

    @Argument(help: "The key.")
    var key: String

    @Argument(help: "The value; '-' or absent reads stdin.")
    var value: String?

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

    func execute(_ context: CommandContext) throws(CLIError) {
        let expiration = try Expiration.choose(ttl: ttl, expiresAt: expiresAt, never: never)
        let memoryExpiration = try memoryTTL.map { text throws(CLIError) in try Expiration.ttl(text, option: "--memory-ttl") }
        // A missing VALUE with a terminal on stdin is almost always a forgotten argument;
        // `-` still reads the terminal for those who mean it.
        if value == nil, Output.stdinIsTerminal {
            throw .usage("missing VALUE: give it as an argument, '-' to type it, or pipe it on stdin")
        }
        // Connect before reading stdin, so `slow-producer | halcyon set k` fails at once
        // when the daemon is down instead of after the producer is done.
        let connection = try context.connect()
        let bytes: [UInt8]
        if let value, value != "-" {
            bytes = Array(value.utf8)
        } else {
            bytes = try Output.readStandardInput()
        }
        let encodedValue = try EncodedValue(bytes, asJSON: json)
        let result = try connection.call("cache.set") { writer in
            writer.key("key"); writer.string(key)
            writer.key("value")
            encodedValue.write(to: &writer)
            writer.key("encoding"); writer.string(encodedValue.encoding.rawValue)
            if let expiration { writer.key("expiration"); expiration.write(to: &writer) }
            if let memoryExpiration { writer.key("memoryExpiration"); memoryExpiration.write(to: &writer) }
            if noDisk { writer.key("toDisk"); writer.bool(false) }
            if let lease { writer.key("lease"); writer.string(lease) }
        }
        if context.verbose { Output.line(result.compactText) }
    }
}

/// A value ready for the wire with the encoding chosen for it.
struct EncodedValue {
    let encoding: WireEncoding
    private let bytes: [UInt8]
    private let parsed: JSONValue?

    /// Chooses the encoding for `bytes`: `json` when asked (after parsing), else `utf8`
    /// for valid UTF-8, else `base64`.
    /// - Throws: `CLIError.input(reason: "invalidJSON")` when `asJSON` and the bytes do
    ///   not parse.
    init(_ bytes: [UInt8], asJSON: Bool) throws(CLIError) {
        self.bytes = bytes
        if asJSON {
            switch JSONValue.parse(bytes) {
            case .success(let value):
                parsed = value
                encoding = .json
            case .failure(let error):
                throw .input(reason: "invalidJSON", message: "the value is not JSON: \(error.message) at byte \(error.position)")
            }
        } else {
            parsed = nil
            encoding = isValidUTF8(bytes) ? .utf8 : .base64
        }
    }

    /// Writes the value member's JSON. A json value is re-serialised compactly, since its
    /// text may hold line feeds that would break the line framing.
    func write(to writer: inout JSONWriter) {
        switch encoding {
        case .json: writer.value(parsed!)
        case .utf8: writer.string(utf8Bytes: bytes)
        case .base64: writer.base64(bytes)
        }
    }
}

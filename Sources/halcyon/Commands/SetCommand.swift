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

    @OptionGroup var store: StoreOptions

    var byteArguments: [String] { value.map { [$0] } ?? [] }

    func execute(_ context: CommandContext) throws(CLIError) {
        // StoreSettings.params connects before reading stdin, so `slow-producer | halcyon
        // set k` fails at once when the daemon is down instead of after the producer is done.
        try Self.run(context, key: key, value: value, settings: store.settings)
    }

    /// The command with its options as plain values (also `DirectCommand`'s `set K V`).
    static func run(_ context: CommandContext, key: String, value: String?, settings: StoreSettings) throws(CLIError) {
        let (connection, write) = try settings.params(value: value, context: context)
        let result = try connection.call("cache.set") { writer in
            writer.key("key"); writer.string(key)
            write(&writer)
        }
        if context.verbose { context.output.line(result.compactText) }
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

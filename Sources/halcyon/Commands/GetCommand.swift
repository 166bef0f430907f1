// `halcyon get KEY`: a value's bytes on stdout, exit 1 on a miss.

import ArgumentParser
import HalcyonJSON

/// The wire encodings, as `--encoding` takes them.
enum WireEncoding: String, ExpressibleByArgument, CaseIterable {
    case utf8, base64, json
}

/// Reads a value. Without `--encoding` it asks for base64 and decodes it, so whatever
/// was stored (text, bytes, JSON) comes out as exactly its stored bytes: binary-safe,
/// and a json value prints its JSON text.
struct GetCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write a value's bytes to stdout (exit 1 on a miss).",
        discussion: """
            Binary-safe: the stored bytes are written exactly, with no line feed added \
            (except on a terminal). With --encoding the value is shown in that encoding \
            instead: utf8 as text, base64 and json as one line.
            """)

    @OptionGroup(title: "Global options") var global: GlobalOptions

    @Argument(help: "The key.")
    var key: String

    @Option(help: "Show the value in this encoding (utf8, base64 or json) instead of raw bytes.")
    var encoding: WireEncoding?

    @Flag(help: "Look only in the memory tier.")
    var memoryOnly = false

    @Flag(help: "Do not extend the entry's expiration on this read.")
    var noExtend = false

    func execute(_ context: CommandContext) throws(CLIError) {
        try Self.run(context, key: key, encoding: encoding, memoryOnly: memoryOnly, noExtend: noExtend)
    }

    /// The command with its options as plain values (also `DirectCommand`'s `get KEY`).
    static func run(
        _ context: CommandContext, key: String, encoding: WireEncoding? = nil, memoryOnly: Bool = false,
        noExtend: Bool = false
    ) throws(CLIError) {
        let connection = try context.connect()
        let params: (inout JSONWriter) -> Void = { writer in
            writer.key("key"); writer.string(key)
            writer.key("encoding"); writer.string((encoding ?? .base64).rawValue)
            if memoryOnly { writer.key("fromMemoryOnly"); writer.bool(true) }
            if noExtend { writer.key("extendingExpiration"); writer.string("none") }
        }
        let result: JSONValue
        if encoding == nil, context.output.isStandardOutput {
            // The raw bytes go out as they arrive: a large value is never held whole.
            let output = context.output
            switch try connection.callStreamingValue("cache.get", params: params, sink: { output.writeStreamed($0) }) {
            case .streamed(let lastByte):
                output.endStreamedValue(lastByte: lastByte)
                return
            case .whole(let whole):
                result = whole
            }
        } else {
            result = try connection.call("cache.get", params: params)
        }
        guard result["found"]?.bool == true else { throw .miss }
        guard let value = result["value"] else { throw .badReply("a hit without a value") }
        switch encoding {
        case nil:
            guard let text = value.stringBytes, let bytes = StrictBase64.decode(text) else {
                throw .badReply("the value is not base64")
            }
            context.output.value(bytes)
        case .utf8:
            guard let bytes = value.stringBytes else { throw .badReply("the value is not a string") }
            context.output.value(bytes)
        case .base64:
            guard let text = value.string else { throw .badReply("the value is not a string") }
            context.output.line(text)
        case .json:
            context.output.line(value.compactText)
        }
    }
}

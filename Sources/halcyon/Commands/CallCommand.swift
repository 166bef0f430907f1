// `halcyon call METHOD [PARAMS]`: any method, raw JSON in and out.

import ArgumentParser
import HalcyonJSON

/// Sends any JSON-RPC method with the given params and prints the result's JSON. The
/// params are sent as given (after a parse, to re-serialise them onto one line), so the
/// daemon, not this tool, decides what is valid.
struct CallCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "call", abstract: "Call any method and print the result JSON (an error exits 2).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The method, e.g. cache.get.") var method: String
    @Argument(help: "The params as JSON; '-' reads them from stdin.") var params: String?

    func execute(_ context: CommandContext) throws(CLIError) {
        var parsed: JSONValue?
        if let params {
            if params == "-" { try context.checkStandardInput(for: params) }
            let bytes = params == "-" ? try Output.readStandardInput() : Array(params.utf8)
            switch JSONValue.parse(bytes) {
            case .success(let value): parsed = value
            case .failure(let error):
                throw .input(reason: "invalidJSON", message: "PARAMS is not JSON: \(error.message) at byte \(error.position)")
            }
        }
        let result = try context.connect().call(method, rawParams: parsed)
        context.output.line(result.compactText)
    }
}

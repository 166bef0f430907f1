// The ways a command ends other than success, and the exit code and stderr line each
// one maps to: 1 for a miss (silent), 2 for every error (one line naming a reason).

/// How a command ended when it did not succeed.
///
/// Every error prints exactly one line, `halcyon: <reason>: <message>`, so scripts can
/// match the reason the same way they would branch on the protocol's `data.reason`.
enum CLIError: Error {
    /// The key was not there (or nothing was removed/touched): exit 1, nothing printed.
    case miss
    /// The command line itself was wrong: exit 2.
    case usage(String)
    /// The daemon could not be reached or the connection broke; `line` is complete.
    case transport(line: String)
    /// The daemon answered with a JSON-RPC error.
    case rpc(code: Int64, reason: String, message: String)
    /// The daemon answered something this client cannot read.
    case badReply(String)
    /// A local input (stdin, a JSON argument) could not be used.
    case input(reason: String, message: String)
    /// `lease`: another caller still holds the key's lease: exit 3, nothing printed.
    case leased
    /// `lease`: the command it ran failed with this status, which becomes the exit status.
    case childFailed(status: Int32)
    /// `lease`: the command could not be started: exit 127 when it was not found, 126
    /// when it could not be executed, as a shell does.
    case cannotRun(status: Int32, message: String)

    /// The process exit status for this outcome.
    var exitCode: Int32 {
        switch self {
        case .miss: return 1
        case .leased: return 3
        case .childFailed(let status), .cannotRun(let status, _): return status
        case .usage, .transport, .rpc, .badReply, .input: return 2
        }
    }

    /// The single stderr line (without `halcyon: ` or newline); nil for a silent miss.
    var line: String? {
        switch self {
        case .miss, .leased, .childFailed: return nil
        case .usage(let message): return "usage: \(message)"
        case .transport(let line): return line
        case .rpc(let code, let reason, let message): return "\(reason): \(message) (\(code))"
        case .badReply(let message): return "badReply: \(message)"
        case .input(let reason, let message): return "\(reason): \(message)"
        case .cannotRun(_, let message): return "cannotRun: \(message)"
        }
    }
}

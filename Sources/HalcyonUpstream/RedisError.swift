// What can go wrong talking to Redis or Valkey, one case per stage: connecting, framing,
// the server's own error replies, and the client's bounds.

/// An error of the RESP3 client.
///
/// Threading: a value type; `Sendable`.
public enum RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No connection to `node` could be made (refused, timed out, or still backing off
    /// after a failure).
    case unavailable(node: String, detail: String)
    /// The connection to `node` closed before the reply came; the command may or may
    /// not have run.
    case connectionClosed(node: String)
    /// The server sent bytes that are not RESP3 (the connection is closed).
    case protocolViolation(RESP3ParseError)
    /// The server answered with an error reply (`-CODE message` or a blob error).
    case server(String)
    /// The handshake (`HELLO 3`, `AUTH`, `CLIENT TRACKING`, `SELECT`) was refused.
    case handshake(String)
    /// A reply of a shape the command never returns.
    case unexpectedReply(String)
    /// `MOVED`/`ASK`/`TRYAGAIN` went on for more than `maxRedirects` tries.
    case tooManyRedirects(String)
    /// No node serves the key's slot.
    case slotUncovered(Int)
    /// A command got no reply within `commandTimeout` (its connection is closed).
    case timedOut(node: String)
    /// The client was shut down.
    case shutDown

    /// The error code of a `.server` error: its first word (`MOVED`, `ERR`, `NOSCRIPT`…).
    public var serverCode: Substring? {
        guard case .server(let text) = self else { return nil }
        return text.split(separator: " ", maxSplits: 1).first
    }

    /// Whether the command certainly did not reach a working server (safe to report as
    /// "upstream unavailable" rather than as a failed command).
    public var isUnavailable: Bool {
        switch self {
        case .unavailable, .connectionClosed, .timedOut, .shutDown, .slotUncovered: return true
        case .server:
            return ["CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN"].contains(serverCode ?? "")
        default: return false
        }
    }

    public var description: String {
        switch self {
        case .unavailable(let node, let detail): return "\(node) unavailable: \(detail)"
        case .connectionClosed(let node): return "connection to \(node) closed"
        case .protocolViolation(let reason): return "protocol violation: \(reason)"
        case .server(let text): return text
        case .handshake(let text): return "handshake refused: \(text)"
        case .unexpectedReply(let text): return "unexpected reply: \(text)"
        case .tooManyRedirects(let text): return "too many redirects: \(text)"
        case .slotUncovered(let slot): return "no node serves slot \(slot)"
        case .timedOut(let node): return "no reply from \(node) in time"
        case .shutDown: return "client shut down"
        }
    }
}

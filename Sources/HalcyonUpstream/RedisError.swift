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
    /// The server sent nothing for `RedisConnection.Options.deadAfter` while a reply (a
    /// command's or a heartbeat `PING`'s) was owed: the path is taken to be dead and the
    /// connection is closed, as if the server had closed it.
    case heartbeatMissed(node: String)
    /// `node` is in an outage (its last connection attempt failed for `cause`); commands
    /// to it fail at once until a reconnect succeeds.
    case down(node: String, cause: FailureCause)
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
        case .unavailable, .connectionClosed, .timedOut, .heartbeatMissed, .down, .shutDown, .slotUncovered: return true
        case .server:
            return ["CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN"].contains(serverCode ?? "")
        default: return false
        }
    }

    /// Why a node cannot be used, for the failures that say so: what the loss of a node
    /// is logged and reported with. Nil for failures of one command on a working node.
    public var failureCause: FailureCause? {
        switch self {
        case .unavailable(_, let detail):
            return detail.contains(FailureCause.refused.rawValue) ? .refused
                : detail.contains(FailureCause.timedOut.rawValue) ? .timedOut : .closed
        case .connectionClosed: return .closed
        case .timedOut: return .timedOut
        case .heartbeatMissed: return .heartbeatMissed
        case .down(_, let cause): return cause
        case .handshake(let text):
            if text.contains(FailureCause.wrongPassword.rawValue) { return .wrongPassword }
            if text.contains(FailureCause.noAuth.rawValue) { return .noAuth }
            return .handshakeRefused
        case .protocolViolation, .unexpectedReply: return .protocolViolation
        case .server, .tooManyRedirects, .slotUncovered, .shutDown: return nil
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
        case .heartbeatMissed(let node): return "\(node) stopped answering (heartbeat missed)"
        case .down(let node, let cause): return "\(node) unreachable (\(cause.rawValue)); reconnecting"
        case .shutDown: return "client shut down"
        }
    }
}

/// Why a node is unreachable: the cause a loss is logged with and `server.info` shows.
///
/// Threading: a value type; `Sendable`.
public enum FailureCause: String, Sendable, Equatable, CaseIterable {
    /// Nothing accepts connections at the address (`ECONNREFUSED`).
    case refused
    /// A connect or a command took longer than its bound.
    case timedOut = "timed out"
    /// The connection was open but the server sent nothing while a reply was owed, for
    /// longer than the liveness bound (a silent partition, a stopped process).
    case heartbeatMissed = "heartbeat missed"
    /// The server or the network closed the connection.
    case closed
    /// The server refused the credentials (`WRONGPASS`: a wrong password or user).
    case wrongPassword = "WRONGPASS"
    /// The server asks for credentials and none were given (`NOAUTH`).
    case noAuth = "NOAUTH"
    /// The server refused another part of the greeting (`HELLO 3`, `CLIENT TRACKING`, `SELECT`).
    case handshakeRefused = "handshake refused"
    /// The server sent something that is not RESP3, or a reply out of step.
    case protocolViolation = "protocol violation"

    /// Whether the server refused this client's credentials.
    public var isAuthentication: Bool { self == .wrongPassword || self == .noAuth }
}

// The one connection `halcyon loop` keeps across the commands it reads, and how it
// recovers when the daemon goes away.

/// `halcyon loop`'s connection and the defaults its lines inherit.
///
/// A command that was never sent never fails for a connection that died while the loop
/// was idle (a daemon restart between lines): it goes out on a new connection. A command
/// in flight when the connection broke fails with its reason (`connectionClosed`,
/// `timeout`), since nobody can tell whether the daemon applied it, and the next command
/// connects again. While the daemon is down each command fails with `cannotConnect`.
///
/// Threading: not thread-safe; the loop runs on the main thread only.
final class LoopSession {
    /// The socket every command of the loop talks to.
    let socketPath: String
    /// The loop's `--timeout`, for lines that give none.
    let timeout: Double
    /// The loop's `-v`, for every line.
    let verbose: Bool
    /// The live connection, if any.
    private var current: Connection?

    init(socketPath: String, timeout: Double, verbose: Bool) {
        self.socketPath = socketPath
        self.timeout = timeout
        self.verbose = verbose
    }

    /// The connection for the next request: the current one while it is sound, else a new one.
    /// - Parameter timeout: the inactivity limit for this command's requests.
    /// - Throws: `CLIError.transport` (`cannotConnect`) when the daemon cannot be reached.
    func connection(timeout: Double) throws(CLIError) -> Connection {
        if let current, !current.isBroken, !current.isClosedByPeer {
            current.timeout = timeout
            return current
        }
        current = nil
        let fresh = try Connection(path: socketPath, timeout: timeout)
        current = fresh
        return fresh
    }
}

// Where one connection is in its life: open, draining for a shutdown, closing, closed.

/// Sent down a connection's pipeline when the daemon begins to shut down.
enum ShutdownEvent: Sendable {
    /// Stop taking new requests; answer them `shuttingDown`. In-flight ones may finish.
    case drain
    /// The drain time is up: answer whatever is left `shuttingDown` and close.
    case close
}

/// The life of one connection, as a state machine with mutating transitions (in place of
/// separate draining and closing flags, which allowed combinations no connection is in).
///
/// - `open`: requests are started; back-pressure holds reads and held requests.
/// - `draining`: the daemon is shutting down. Nothing new starts: every request read, and
///   every one still in the socket, is answered `shuttingDown`, whatever the pressure, and
///   the connection closes once nothing waits and the client has been quiet for
///   `ConnectionHandler.drainQuietPeriod`. `reads` counts the reads since the drain
///   began, so a quiet-period timer can tell it is stale.
/// - `closing`: a close was asked for (the drain ended, the drain time is up, or the
///   client stopped reading its replies); no reply is written any more.
/// - `closed`: the channel is inactive.
///
/// Transitions go forward only: `open → draining → closing → closed`, any of them
/// skippable; an illegal one is refused (returns false) and never moves backwards.
///
/// Threading: a value owned by one `ConnectionHandler`, used only on its event loop.
enum ConnectionLifecycle: Equatable {
    case open
    case draining(reads: Int)
    case closing
    case closed

    /// Whether requests may start (otherwise they are answered `shuttingDown`).
    var isOpen: Bool { self == .open }

    /// Whether reply lines still go to the client.
    var writesReplies: Bool {
        switch self {
        case .open, .draining: return true
        case .closing, .closed: return false
        }
    }

    /// The reads since the drain began, while draining; nil in any other state.
    var drainReads: Int? {
        if case .draining(let reads) = self { return reads }
        return nil
    }

    /// Begins the drain; false (and no change) unless the connection is open.
    @discardableResult
    mutating func drain() -> Bool {
        guard self == .open else { return false }
        self = .draining(reads: 0)
        return true
    }

    /// Counts a read while draining (a quiet-period timer started before it is stale).
    mutating func noteRead() {
        if case .draining(let reads) = self { self = .draining(reads: reads &+ 1) }
    }

    /// Begins closing; false (and no change) when it is already closing or closed.
    @discardableResult
    mutating func close() -> Bool {
        switch self {
        case .open, .draining:
            self = .closing
            return true
        case .closing, .closed:
            return false
        }
    }

    /// The channel went inactive: the end, from any state.
    mutating func closed() {
        self = .closed
    }
}

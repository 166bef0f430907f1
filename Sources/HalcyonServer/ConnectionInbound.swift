// What one connection has read and not yet started, in arrival order.

import HalcyonRPC
import NIOCore

/// What one connection has read and not started: one ordered queue of long lines being
/// parsed off the loop, parsed lines waiting behind them, and request elements held by
/// back-pressure.
///
/// Release rule: entries leave from the head only, in arrival order.
/// - A line being parsed off the loop holds everything behind it until its parse comes
///   back (`parsed`); it then waits as a parsed line.
/// - A parsed line at the head is opened (`openHead`): its elements start, or are held in
///   its place at the head (`hold(_:at:)`), in their order.
/// - A held element at the head starts when back-pressure allows, and at once while the
///   connection drains or closes.
///
/// A line read while a line waits for or in a parse is queued behind it, parsed; anything
/// else read while only held elements wait is opened at once and its elements held behind
/// them. A cancel never waits (`ConnectionHandler` carries it out at once): `withdraw`
/// removes the held requests it names, to be answered as unstarted, and marks the lines
/// waiting, whose requests it names are answered so when their turn comes.
///
/// Threading: a value owned by one `ConnectionHandler`, used only on its event loop.
struct ConnectionInbound {
    /// A request element read but not started.
    struct Held {
        var element: RPCElement
        var batch: ConnectionOutbound.Batch?
        var slot: Int

        /// The id of the request this element carries, if it is a request with one.
        var requestID: RPCID? { element.requestID }
    }

    /// What may leave the head now.
    enum Ready {
        /// A parsed line, with the ids of its requests cancelled while it waited.
        case line(RPCIncoming, withdrawn: Set<RPCID>)
        /// A held element.
        case element(Held)
    }

    private enum Entry {
        /// A long line parsing off the loop; its bytes are kept for a `.close`, which
        /// parses it on the loop.
        case parsing(token: UInt64, bytes: ByteBuffer, withdrawn: Set<RPCID>)
        case line(RPCIncoming, withdrawn: Set<RPCID>)
        case element(Held)
    }

    private var entries = CircularBuffer<Entry>()
    private var nextToken: UInt64 = 0
    /// Parsing and parsed lines in `entries`.
    private(set) var linesWaiting = 0

    var isEmpty: Bool { entries.isEmpty }

    /// Queues a long line whose parse is starting off the loop; returns its token for
    /// `parsed`.
    mutating func appendParsing(_ bytes: ByteBuffer) -> UInt64 {
        let token = nextToken
        nextToken &+= 1
        entries.append(.parsing(token: token, bytes: bytes, withdrawn: []))
        linesWaiting += 1
        return token
    }

    /// Queues a line parsed on the loop behind the lines waiting.
    mutating func appendLine(_ incoming: RPCIncoming) {
        entries.append(.line(incoming, withdrawn: []))
        linesWaiting += 1
    }

    /// A long line came back parsed; false when it is no longer queued (the connection
    /// ended, or a `.close` parsed it meanwhile).
    mutating func parsed(_ token: UInt64, _ incoming: RPCIncoming) -> Bool {
        guard let index = entries.firstIndex(where: {
            if case .parsing(token, _, _) = $0 { return true }
            return false
        }), case .parsing(_, _, let withdrawn) = entries[index] else { return false }
        entries[index] = .line(incoming, withdrawn: withdrawn)
        return true
    }

    /// Parses every line still parsing off the loop here and now (a `.close` answers them
    /// all); their parses off the loop then find them gone.
    mutating func parseAll(using parse: (ByteBuffer) -> RPCIncoming) {
        for index in entries.indices {
            if case .parsing(_, let bytes, let withdrawn) = entries[index] {
                entries[index] = .line(parse(bytes), withdrawn: withdrawn)
            }
        }
    }

    /// Holds an element: at the tail, or at `index` while the head line is being opened
    /// (its elements take its place, in order: pass 0, 1, 2…).
    mutating func hold(_ held: Held, at index: Int? = nil) {
        guard let index else {
            entries.append(.element(held))
            return
        }
        // Clamped: a queue emptied meanwhile (the connection ended) cannot be indexed past its end.
        entries.insert(.element(held), at: entries.index(entries.startIndex, offsetBy: min(index, entries.count)))
    }

    /// Removes and returns the head if it may leave now: a parsed line always, a held
    /// element when `mayStart`; nil when the queue is empty or its head is still parsing.
    mutating func next(mayStart: Bool) -> Ready? {
        switch entries.first {
        case .line(let incoming, let withdrawn):
            entries.removeFirst()
            linesWaiting -= 1
            return .line(incoming, withdrawn: withdrawn)
        case .element(let held) where mayStart:
            entries.removeFirst()
            return .element(held)
        case .element, .parsing, nil:
            return nil
        }
    }

    /// Carries a cancel of `id` into the queue: removes and returns the held elements
    /// that carry a request with that id, with the place each had, and marks the waiting
    /// lines, whose request of that id will be answered as withdrawn.
    mutating func withdraw(_ id: RPCID) -> [(place: Int, held: Held)] {
        guard !entries.isEmpty else { return [] }
        var removed: [(place: Int, held: Held)] = []
        var kept = CircularBuffer<Entry>(initialCapacity: entries.count)
        for (place, entry) in entries.enumerated() {
            switch entry {
            case .element(let held) where held.requestID == id:
                removed.append((place, held))
            case .element:
                kept.append(entry)
            case .line(let incoming, var withdrawn):
                withdrawn.insert(id)
                kept.append(.line(incoming, withdrawn: withdrawn))
            case .parsing(let token, let bytes, var withdrawn):
                withdrawn.insert(id)
                kept.append(.parsing(token: token, bytes: bytes, withdrawn: withdrawn))
            }
        }
        entries = kept
        return removed
    }

    /// Empties the queue (the connection ended).
    mutating func removeAll() {
        entries.removeAll()
        linesWaiting = 0
    }
}

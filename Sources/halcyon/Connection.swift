// A small blocking client for the daemon's Unix socket: connect, write one request
// line, read lines until the reply with our id arrives. Every wait is a poll() bounded
// by `--timeout`: the command gives up when the daemon makes no progress for that long.

#if canImport(Glibc)
import Glibc
#endif
import HalcyonJSON

/// One connection to `halcyond`, used for one request at a time.
///
/// The socket is non-blocking and every wait goes through `poll`, because a plain
/// blocking `read` cannot honour a timeout without signals. The timeout is one of
/// inactivity, not a total: a 60 MiB value that streams steadily must not fail because
/// it takes longer than a ping, while a daemon that stops answering is caught. Writes use `MSG_NOSIGNAL`,
/// so a daemon that goes away yields EPIPE (an error line), not a silent SIGPIPE death.
///
/// Threading: not thread-safe; the CLI uses it only from the main thread.
final class Connection {
    /// The socket path, for error messages.
    let path: String
    /// The descriptor; closed in `deinit`.
    private let fd: Int32
    /// Bytes read past the end of the last line.
    private var pending: [UInt8] = []
    /// The `--timeout` in seconds: the longest wait for any progress. `halcyon loop`
    /// sets it per command, since each line may give its own `--timeout`.
    var timeout: Double
    /// The next request id.
    private var nextID: Int64 = 1
    /// Set when an exchange failed part way (a broken or timed-out connection, a reply
    /// that could not be read): what arrives next may answer an old request, so the
    /// connection must not carry another.
    private(set) var isBroken = false

    /// Connects to `path`.
    /// - Parameters:
    ///   - path: the socket file; must fit in `sockaddr_un.sun_path` (107 bytes).
    ///   - timeout: the longest the connect, or any step of a `call`, may wait for the
    ///     daemon.
    /// - Throws: `CLIError.transport` with the complete error line, e.g.
    ///   `cannotConnect: cannot connect to /tmp/x.sock: No such file or directory (daemon not running?)`.
    init(path: String, timeout: Double) throws(CLIError) {
        self.path = path
        self.timeout = timeout
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !pathBytes.isEmpty, pathBytes.count < capacity, !pathBytes.contains(0) else {
            throw .transport(line: "cannotConnect: cannot connect to \(path): the path must be 1 to \(capacity - 1) bytes without NUL")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .transport(line: "cannotConnect: cannot create a socket: \(Self.errnoText())") }
        self.fd = fd
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if result != 0 {
            // A Unix socket connects at once or fails at once, except EAGAIN when the
            // daemon's accept backlog is full: wait for it to become writable then.
            let code = errno
            if code == EAGAIN || code == EINPROGRESS {
                do { try wait(for: Int16(POLLOUT), doing: "connect") } catch { throw Self.connectError(path, ETIMEDOUT) }
                var soError: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
                if soError != 0 { throw Self.connectError(path, soError) }
            } else {
                throw Self.connectError(path, code)
            }
        }
    }

    deinit {
        close(fd)
    }

    /// Whether the daemon has closed this connection, or said something unasked (a
    /// notice before it closes), while no request was outstanding: either way the
    /// connection is not fit for the next request. Never blocks.
    var isClosedByPeer: Bool {
        guard pending.isEmpty else { return true }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) != 0
    }

    /// Sends one request and returns its `result`.
    /// - Parameters:
    ///   - method: the JSON-RPC method name.
    ///   - params: writes the members of the `params` object; nil sends no params.
    /// - Returns: the reply's `result` value.
    /// - Throws: `CLIError.rpc` for an error reply (with its `data.reason`),
    ///   `CLIError.transport` for timeouts and broken connections, `CLIError.badReply`
    ///   for a reply that is not a JSON-RPC response.
    func call(_ method: String, params: ((inout JSONWriter) -> Void)? = nil) throws(CLIError) -> JSONValue {
        guard let params else { return try request(method, params: nil) }
        return try request(method) { writer in
            writer.beginObject()
            params(&writer)
            writer.endObject()
        }
    }

    /// Sends one request whose params are given as parsed JSON (any JSON value, sent as
    /// is, so the daemon judges it) and returns its `result`. See `call(_:params:)`.
    func call(_ method: String, rawParams: JSONValue?) throws(CLIError) -> JSONValue {
        guard let rawParams else { return try request(method, params: nil) }
        return try request(method) { writer in writer.value(rawParams) }
    }

    /// The one place a request line is built, so both `call` forms number and frame
    /// requests alike: `params` writes the whole `params` value; nil leaves the member out.
    private func request(_ method: String, params: ((inout JSONWriter) -> Void)?) throws(CLIError) -> JSONValue {
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.key("jsonrpc"); writer.string("2.0")
        let id = nextID
        nextID += 1
        writer.key("id"); writer.int(id)
        writer.key("method"); writer.string(method)
        if let params {
            writer.key("params")
            params(&writer)
        }
        writer.endObject()
        writer.newline()
        return try exchange(line: writer.bytes, id: id)
    }

    /// Writes `line`, then reads lines until the reply for `id` (or an error with a null
    /// id, which is how the daemon refuses a whole connection or line) arrives.
    private func exchange(line: [UInt8], id: Int64) throws(CLIError) -> JSONValue {
        let reply: JSONValue
        do {
            reply = try receiveReply(after: line, id: id)
        } catch {
            isBroken = true
            throw error
        }
        return try Self.result(of: reply)
    }

    /// Sends `line` and returns the reply for `id` (or the null-id error that refuses it).
    private func receiveReply(after line: [UInt8], id: Int64) throws(CLIError) -> JSONValue {
        try send(line)
        while true {
            let replyLine = try readLine()
            if replyLine.isEmpty { continue }
            let reply: JSONValue
            switch JSONValue.parse(replyLine) {
            case .success(let value): reply = value
            case .failure(let error): throw .badReply("the daemon sent invalid JSON: \(error.message)")
            }
            guard let replyID = reply["id"] else { throw .badReply("a reply without an id: \(reply.compactText)") }
            if replyID.isNull || replyID.int64 == id {
                return reply
            }
            // A reply to something else (cannot happen with one request in flight): skip it.
        }
    }

    /// The `result` of a response, or its error as `CLIError.rpc`.
    private static func result(of reply: JSONValue) throws(CLIError) -> JSONValue {
        if let error = reply["error"] {
            let code = error["code"]?.int64 ?? 0
            let message = error["message"]?.string ?? "(no message)"
            let reason = error["data"]?["reason"]?.string ?? "error"
            throw .rpc(code: code, reason: reason, message: message)
        }
        guard let result = reply["result"] else { throw .badReply("a reply with neither result nor error: \(reply.compactText)") }
        return result
    }

    // MARK: Bytes

    private func send(_ bytes: [UInt8]) throws(CLIError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent >= 0 {
                offset += sent
                continue
            }
            switch errno {
            case EINTR: continue
            case EAGAIN: try wait(for: Int16(POLLOUT), doing: "send the request")
            case EPIPE, ECONNRESET: throw connectionClosed()
            default: throw .transport(line: "connectionLost: cannot send to \(path): \(Self.errnoText())")
            }
        }
    }

    /// Returns the next line without its `\n` (and a `\r` before it).
    private func readLine() throws(CLIError) -> [UInt8] {
        var searchFrom = 0
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            // memchr, not firstIndex: a large value's reply is tens of MiB of one line.
            let found: Int? = pending.withUnsafeBytes { raw in
                guard searchFrom < raw.count, let hit = memchr(raw.baseAddress! + searchFrom, 0x0A, raw.count - searchFrom) else { return nil }
                return raw.baseAddress!.distance(to: UnsafeRawPointer(hit))
            }
            if let newline = found {
                var line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                return line
            }
            searchFrom = pending.count
            let count = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                pending.append(contentsOf: chunk[0..<count])
                // Values can be large: grow the read size with the reply.
                if chunk.count < 4 << 20, pending.count > chunk.count * 4 {
                    chunk = [UInt8](repeating: 0, count: chunk.count * 4)
                }
                continue
            }
            if count == 0 { throw connectionClosed() }
            switch errno {
            case EINTR: continue
            case EAGAIN: try wait(for: Int16(POLLIN), doing: "read the reply")
            case ECONNRESET: throw connectionClosed()
            default: throw .transport(line: "connectionLost: cannot read from \(path): \(Self.errnoText())")
            }
        }
    }

    /// Polls for `events` for at most `timeout` seconds.
    private func wait(for events: Int16, doing what: String) throws(CLIError) {
        let deadline = Self.deadline(after: timeout)
        while true {
            let remaining = Self.millisecondsUntil(deadline)
            if remaining <= 0 {
                throw .transport(line: "timeout: could not \(what) within \(Durations.describe(timeout)) (\(path))")
            }
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(remaining, Int(Int32.max))))
            if ready > 0 { return }
            if ready < 0, errno != EINTR { throw .transport(line: "connectionLost: cannot poll \(path): \(Self.errnoText())") }
        }
    }

    private func connectionClosed() -> CLIError {
        .transport(line: "connectionClosed: the daemon closed the connection (\(path))")
    }

    // MARK: Helpers

    private static func connectError(_ path: String, _ code: Int32) -> CLIError {
        let hint = (code == ENOENT || code == ECONNREFUSED) ? " (daemon not running?)" : ""
        return .transport(line: "cannotConnect: cannot connect to \(path): \(String(cString: strerror(code)))\(hint)")
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }

    private static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return time
    }

    private static func deadline(after seconds: Double) -> timespec {
        var time = now()
        let whole = seconds.rounded(.down)
        time.tv_sec += Int(min(whole, 1e9))
        time.tv_nsec += Int((seconds - whole) * 1e9)
        if time.tv_nsec >= 1_000_000_000 { time.tv_sec += 1; time.tv_nsec -= 1_000_000_000 }
        return time
    }

    private static func millisecondsUntil(_ deadline: timespec) -> Int {
        let current = now()
        let nanos = (deadline.tv_sec - current.tv_sec) * 1_000_000_000 + (deadline.tv_nsec - current.tv_nsec)
        return nanos <= 0 ? 0 : (nanos + 999_999) / 1_000_000
    }
}

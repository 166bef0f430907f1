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

    /// The one place a request is sent and answered, so both `call` forms number and
    /// frame requests alike: `params` writes the whole `params` value; nil leaves the
    /// member out.
    private func request(_ method: String, params: ((inout JSONWriter) -> Void)?) throws(CLIError) -> JSONValue {
        let (line, id) = requestLine(method, params: params)
        return try exchange(line: line, id: id)
    }

    /// A request line for `method` and its id.
    private func requestLine(_ method: String, params: ((inout JSONWriter) -> Void)?) -> ([UInt8], Int64) {
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
        return (writer.bytes, id)
    }

    /// How a streamed call ended.
    enum StreamedReply {
        /// The value was found and written to the sink; `lastByte` is its last byte (nil
        /// for an empty value).
        case streamed(lastByte: UInt8?)
        /// The reply held no value to stream (a miss, say) and was read whole: its `result`.
        case whole(JSONValue)
    }

    /// Sends `method` (whose result is `{"found":true,"value":"<base64>",…}` on a hit)
    /// and hands the value's bytes to `sink`, decoded, as they arrive, so a large value
    /// is never held whole, neither encoded nor decoded.
    ///
    /// The bytes before the value are checked as a JSON-RPC reply to this request with
    /// `found: true` before anything reaches `sink`, and the bytes after it once the
    /// line is complete; a reply of any other shape is read whole as `call` reads it.
    /// - Throws: as `call`; `CLIError.badReply` for a value that is not strict base64
    ///   or a reply whose end is not JSON (then part of the value may have been written).
    func callStreamingValue(
        _ method: String, params: @escaping (inout JSONWriter) -> Void, sink: (UnsafeRawBufferPointer) -> Void
    ) throws(CLIError) -> StreamedReply {
        let (line, id) = requestLine(method) { writer in
            writer.beginObject()
            params(&writer)
            writer.endObject()
        }
        do throws(CLIError) {
            try send(line)
            while true {
                guard let head = try readHeadOfValue(id: id) else {
                    // A line without a value to stream: read and judged whole.
                    let replyLine = try readLine()
                    if replyLine.isEmpty { continue }
                    guard case .success(let reply) = JSONValue.parse(replyLine) else {
                        throw CLIError.badReply("the daemon sent invalid JSON")
                    }
                    guard let replyID = reply["id"] else { throw CLIError.badReply("a reply without an id: \(reply.compactText)") }
                    guard replyID.isNull || replyID.int64 == id else { continue }
                    return .whole(try Self.result(of: reply))
                }
                return .streamed(lastByte: try streamValue(head: head, sink: sink))
            }
        } catch {
            isBroken = true
            throw error
        }
    }

    /// `"value":"`, after which a streamed reply's base64 begins.
    private static let valueMarker = Array(#""value":""#.utf8)
    /// The most bytes a reply may hold before its value for it to be streamed.
    private static let longestHead = 4096

    /// Reads until the pending bytes hold either a whole line or the opening of a value
    /// after a head that is a reply to `id` with `found: true`. Returns that head
    /// (through `"value":`) with the pending bytes starting at the value's first
    /// character, or nil when the next line is to be read whole.
    private func readHeadOfValue(id: Int64) throws(CLIError) -> [UInt8]? {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let newline = pending.firstIndex(of: 0x0A)
            let marker = Self.firstIndex(of: Self.valueMarker, in: pending[..<(newline ?? pending.count)])
            if let marker {
                let head = Array(pending[..<(marker + Self.valueMarker.count - 1)])
                guard case .success(let reply) = JSONValue.parse(head + Array("null}}".utf8)),
                      reply["id"]?.int64 == id, reply["result"]?["found"]?.bool == true
                else { return nil }
                pending.removeSubrange(..<(marker + Self.valueMarker.count))
                return head
            }
            if newline != nil || pending.count > Self.longestHead { return nil }
            let count = try receive(into: &chunk)
            pending.append(contentsOf: chunk[0..<count])
        }
    }

    /// Where `needle` first occurs in `bytes` (a reply's short head), or nil.
    private static func firstIndex(of needle: [UInt8], in bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        for start in bytes.startIndex...(bytes.endIndex - needle.count)
        where bytes[start] == needle[0] && bytes[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }

    /// Decodes the base64 that starts the pending bytes, and every byte that arrives
    /// after them, into `sink`, four characters at a time, until the closing quote; then
    /// reads the rest of the line and checks that `head`, the value and it are one
    /// JSON reply. Returns the value's last byte.
    private func streamValue(head: [UInt8], sink: (UnsafeRawBufferPointer) -> Void) throws(CLIError) -> UInt8? {
        var padded = false
        var lastByte: UInt8?
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        // The characters not decoded yet: fewer than four left over, then what arrived.
        var text = pending
        pending = []
        text.reserveCapacity(chunk.count + 4)
        while true {
            let (quote, decoded) = text.withUnsafeBytes { raw -> (Int?, [UInt8]??) in
                guard let base = raw.baseAddress, raw.count > 0 else { return (nil, nil) }
                let quote = memchr(base, Int32(UInt8(ascii: "\"")), raw.count).map { base.distance(to: UnsafeRawPointer($0)) }
                let whole = (quote ?? raw.count) / 4 * 4
                guard whole > 0 else { return (quote, nil) }
                return (quote, .some(StrictBase64.decode(UnsafeRawBufferPointer(rebasing: raw[0..<whole]))))
            }
            let whole = (quote ?? text.count) / 4 * 4
            if let decoded {
                guard !padded, let bytes = decoded else { throw .badReply("the value is not base64") }
                padded = text[whole - 1] == UInt8(ascii: "=")
                if let last = bytes.last { lastByte = last }
                bytes.withUnsafeBytes { sink($0) }
            }
            if let quote {
                guard whole == quote else { throw .badReply("the value is not base64") }
                pending = Array(text[(quote + 1)...])
                break
            }
            text.removeSubrange(0..<whole)
            let count = try receive(into: &chunk)
            text.append(contentsOf: chunk[0..<count])
        }
        let tail = try readLine()
        guard case .success = JSONValue.parse(head + Array(#""""#.utf8) + tail) else {
            throw .badReply("the daemon sent invalid JSON after the value")
        }
        return lastByte
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
            let count = try receive(into: &chunk)
            pending.append(contentsOf: chunk[0..<count])
            // Values can be large: grow the read size with the reply.
            if chunk.count < 4 << 20, pending.count > chunk.count * 4 {
                chunk = [UInt8](repeating: 0, count: chunk.count * 4)
            }
        }
    }

    /// Receives at least one byte into the start of `chunk`, waiting up to `timeout`;
    /// returns how many.
    private func receive(into chunk: inout [UInt8]) throws(CLIError) -> Int {
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { return count }
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

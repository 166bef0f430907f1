// A plain blocking Unix-socket client for the end-to-end tests: it writes lines and reads
// lines, with no knowledge of the daemon beyond the wire protocol.

import Foundation
import HalcyonJSON
#if canImport(Glibc)
import Glibc
#endif

/// One connection to a daemon.
///
/// Threading: not thread-safe; one test thread uses it at a time.
public final class TestClient {
    private let fd: Int32
    private var pending: [UInt8] = []
    /// How many bytes of `pending` are known to hold no line feed.
    private var scanned = 0
    private var nextID = 1

    public init(path: String) throws {
        // The descriptor is stored only once connected: a throwing init of a class whose
        // properties are all set still runs deinit, which would close it a second time,
        // possibly under another thread that has just been given the same number.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            Glibc.close(fd)
            throw POSIXError(.ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let e = errno
            Glibc.close(fd)
            throw POSIXError(.init(rawValue: e) ?? .EIO)
        }
        self.fd = fd
    }

    deinit { Glibc.close(fd) }

    /// Shuts the connection down (the fd is closed when the client is released).
    public func close() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Writes raw bytes (a line's `\n` included by the caller).
    public func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
            offset += n
        }
    }

    public func send(_ line: String) throws { try sendRaw(Array((line + "\n").utf8)) }

    /// Bytes this client sent that the daemon has not read yet (`SIOCOUTQ`).
    public var unreadByPeer: Int {
        var queued: Int32 = 0
        // SIOCOUTQ (= TIOCOUTQ, 0x5411): for a Unix stream socket, what the peer has not
        // taken from the queue yet.
        return ioctl(fd, 0x5411, &queued) == 0 ? Int(queued) : -1
    }

    /// Whether reply bytes wait to be read, without waiting for any.
    public var hasReplyWaiting: Bool {
        if !pending.isEmpty { return true }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&pfd, 1, 0) > 0
    }

    /// Reads one reply line; nil on EOF or when nothing arrives within `timeout`.
    public func readLine(timeout: TimeInterval = 20) throws -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            // Only bytes not yet searched are scanned, so a long line costs one pass.
            if let newline = pending[scanned...].firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                scanned = 0
                return line
            }
            scanned = pending.count
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(min(remaining, 1) * 1000))
            if ready < 0, errno != EINTR { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            if ready <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return nil }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ECONNRESET { return nil }
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
            pending.append(contentsOf: chunk[..<n])
        }
    }

    /// Reads one reply line and parses it.
    public func readReply(timeout: TimeInterval = 20) throws -> JSONValue {
        guard let line = try readLine(timeout: timeout) else { throw TestClientError.noReply }
        return try JSONValue.parse(Array(line.utf8)).get()
    }

    /// Sends a request with a fresh numeric id and returns the id.
    @discardableResult
    public func request(_ method: String, _ params: String? = nil, id: Int? = nil) throws -> Int {
        let id = id ?? nextID
        nextID = max(nextID, id) + 1
        let paramsPart = params.map { ",\"params\":\($0)" } ?? ""
        try send("{\"jsonrpc\":\"2.0\",\"id\":\(id),\"method\":\"\(method)\"\(paramsPart)}")
        return id
    }

    /// Sends a request and reads replies until the one with its id arrives.
    public func call(_ method: String, _ params: String? = nil) throws -> JSONValue {
        let id = try request(method, params)
        while true {
            let reply = try readReply()
            if reply["id"]?.int64 == Int64(id) { return reply }
        }
    }

    /// The next `count` replies, keyed by id, for requests sent pipelined whose replies may
    /// come in any order. A reply without a numeric id fails the test.
    public func readReplies(_ count: Int) throws -> [Int64: JSONValue] {
        var replies: [Int64: JSONValue] = [:]
        for _ in 0..<count {
            let reply = try readReply()
            guard let id = reply["id"]?.int64 else { throw TestClientError.unexpected(reply) }
            replies[id] = reply
        }
        return replies
    }

    /// The `result` of a call that must succeed.
    public func result(_ method: String, _ params: String? = nil) throws -> JSONValue {
        let reply = try call(method, params)
        guard let result = reply["result"] else { throw TestClientError.unexpected(reply) }
        return result
    }
}

public enum TestClientError: Error {
    case noReply
    case unexpected(JSONValue)
}

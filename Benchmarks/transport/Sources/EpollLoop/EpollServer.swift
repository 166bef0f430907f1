// A line server on epoll, without SwiftNIO: one thread accepts, and each of `threads`
// workers owns an epoll set and the connections handed to it. A ready connection is read
// once; every complete line of what it read is answered by `answer`, and the replies of
// the read go out with one `write`. Level-triggered: what one read leaves is read on the
// next turn.

import CEpoll
import FloorReplies
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Answers one request line (its newline excluded) by appending the reply line to `reply`.
public typealias LineAnswer = @Sendable (_ line: UnsafeRawBufferPointer, _ reply: inout [UInt8]) -> Void

/// Listens on a Unix socket and serves lines with `answer` until the process ends.
public enum EpollServer {
    public static func run(path: String, threads: Int, answer: @escaping LineAnswer) -> Never {
        unlink(path)
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path.utf8.prefix(raw.count - 1))
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        precondition(bound == 0 && listen(listener, 256) == 0, "bind/listen \(path): \(errno)")
        let workers = (0..<max(1, threads)).map { _ in Worker(answer: answer) }
        for worker in workers {
            Thread { worker.run() }.start()
        }
        var next = 0
        while true {
            let fd = cepoll_accept(listener)
            if fd < 0 {
                if errno == EINTR { continue }
                fatalError("accept: \(errno)")
            }
            workers[next % workers.count].add(fd)
            next += 1
        }
    }
}

/// One connection's unfinished line. Threading: owned by one worker's thread.
final class Connection {
    var pending: [UInt8] = []
}

/// One thread's epoll set and its connections. Threading: `add` may be called from any
/// thread (it only calls `epoll_ctl`); everything else runs in `run`, on the worker's own
/// thread.
final class Worker: @unchecked Sendable {  // `connections` is touched only in `run`, on one thread.
    let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
    private let answer: LineAnswer
    private var connections: [Int32: Connection] = [:]

    init(answer: @escaping LineAnswer) {
        self.answer = answer
    }

    func add(_ fd: Int32) {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = fd
        precondition(epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0, "epoll_ctl: \(errno)")
    }

    func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        var input = [UInt8](repeating: 0, count: 65536)
        var reply: [UInt8] = []
        reply.reserveCapacity(65536)
        while true {
            let ready = epoll_wait(epollFD, &events, Int32(events.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                fatalError("epoll_wait: \(errno)")
            }
            for i in 0..<Int(ready) {
                let fd = events[i].data.fd
                let connection = connections[fd] ?? {
                    let made = Connection()
                    connections[fd] = made
                    return made
                }()
                let n = input.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 {
                    if n < 0, errno == EAGAIN || errno == EINTR { continue }
                    connections[fd] = nil
                    close(fd)
                    continue
                }
                reply.removeAll(keepingCapacity: true)
                input.withUnsafeBytes { answerLines(UnsafeRawBufferPointer(rebasing: $0[0..<n]), connection, into: &reply) }
                writeAll(fd, reply)
            }
        }
    }

    private func answerLines(_ bytes: UnsafeRawBufferPointer, _ connection: Connection, into reply: inout [UInt8]) {
        guard connection.pending.isEmpty else {
            let joined = connection.pending + bytes
            connection.pending.removeAll(keepingCapacity: true)
            joined.withUnsafeBytes { answerLines($0, connection, into: &reply) }
            return
        }
        let start = LineScan.forEachLine(bytes) { answer($0, &reply) }
        if start < bytes.count { connection.pending.append(contentsOf: bytes[start...]) }
    }

    /// Writes all of `bytes`; a full socket buffer is waited out with `poll`.
    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
                if n > 0 {
                    done += n
                    continue
                }
                if n < 0, errno == EAGAIN {
                    var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&pfd, 1, -1)
                    continue
                }
                if n < 0, errno == EINTR { continue }
                return
            }
        }
    }
}

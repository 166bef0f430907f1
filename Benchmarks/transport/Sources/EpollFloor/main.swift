// The epoll floor: the transport floor's server (see TransportFloor) without SwiftNIO. Each
// of its threads owns an epoll set and the connections handed to it; a connection's read
// burst is answered with one `write` of its replies, as halcyond and the SwiftNIO floor
// answer theirs. Set beside the SwiftNIO floor, it says how much of the floor is SwiftNIO's
// channel path and how much any Swift server on epoll pays.
//
// Usage: EpollFloor SOCKET-PATH [THREADS (default: the core count)]

import CEpoll
import FloorReplies
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One connection's unfinished line. Threading: owned by one worker's thread.
final class Connection {
    var pending: [UInt8] = []
}

/// One thread's epoll set and its connections. Threading: `add` may be called from any
/// thread (it only calls `epoll_ctl`); everything else runs in `run`, on the worker's own
/// thread.
final class Worker: @unchecked Sendable {  // `connections` is touched only in `run`, on one thread.
    let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
    private var connections: [Int32: Connection] = [:]

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
            if ready < 0 { if errno == EINTR { continue }; fatalError("epoll_wait: \(errno)") }
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
        let start = Replies.forEachLine(bytes) { line in
            Replies.answer(line) { reply.append(contentsOf: $0) }
        }
        if start < bytes.count { connection.pending.append(contentsOf: bytes[start...]) }
    }

    /// Writes all of `bytes`; a full socket buffer is waited out with `poll`.
    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
                if n > 0 { done += n; continue }
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

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    print("usage: EpollFloor SOCKET-PATH [THREADS]")
    exit(2)
}
let threads = arguments.count > 2 ? Int(arguments[2]) ?? ProcessInfo.processInfo.activeProcessorCount
    : ProcessInfo.processInfo.activeProcessorCount
let path = arguments[1]
unlink(path)
let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
var address = sockaddr_un()
address.sun_family = sa_family_t(AF_UNIX)
withUnsafeMutableBytes(of: &address.sun_path) { raw in
    raw.copyBytes(from: path.utf8.prefix(raw.count - 1))
}
let bound = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
}
precondition(bound == 0 && listen(listener, 256) == 0, "bind/listen \(path): \(errno)")
let workers = (0..<max(1, threads)).map { _ in Worker() }
for worker in workers {
    let thread = Thread { worker.run() }
    thread.start()
}
var next = 0
while true {
    let fd = cepoll_accept(listener)
    if fd < 0 { if errno == EINTR { continue }; fatalError("accept: \(errno)") }
    workers[next % workers.count].add(fd)
    next += 1
}

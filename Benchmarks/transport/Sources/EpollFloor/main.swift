// The epoll floor: the transport floor's server (see TransportFloor) without SwiftNIO, on
// `EpollServer`: one read of a ready connection, its lines answered with `Replies`, and one
// `write` of their replies, as halcyond and the SwiftNIO floor answer a read burst. Set
// beside the SwiftNIO floor, it says how much of the floor is SwiftNIO's channel path and
// how much any Swift server on epoll pays.
//
// Usage: EpollFloor SOCKET-PATH [THREADS (default: the core count)]

import EpollLoop
import FloorReplies
import Foundation

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    print("usage: EpollFloor SOCKET-PATH [THREADS]")
    exit(2)
}
let cores = ProcessInfo.processInfo.activeProcessorCount
EpollServer.run(path: arguments[1], threads: arguments.count > 2 ? Int(arguments[2]) ?? cores : cores) { line, reply in
    Replies.answer(line) { reply.append(contentsOf: $0) }
}

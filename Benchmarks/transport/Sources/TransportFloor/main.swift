// The transport floor: what SwiftNIO alone costs per request, on the same terms as
// halcyond. It listens on a Unix socket with as many event loops as it is told, frames
// newline-delimited requests, and answers each with the line halcyond would send for the
// same request (`Replies`). Replies of one read burst go out with one flush at
// `channelReadComplete`, as halcyond's do. No JSON is parsed and nothing is stored: the
// difference between this server's CPU per request and halcyond's is the cost of
// halcyond's own work.
//
// Usage: TransportFloor SOCKET-PATH [EVENT-LOOP-THREADS (default: the core count)]

import FloorReplies
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// One connection: the bytes of an unfinished line, and the replies of the current read
/// burst. Threading: confined to its channel's event loop.
final class FloorHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var pending: ByteBuffer?
    /// Kept across bursts, as the epoll floor keeps its reply array: once a burst's write
    /// has gone out its storage is this handler's alone again, and `clear()` reuses it.
    /// (halcyond copies each burst's replies into a new buffer: `ConnectionOutbound.emit`.)
    private var out: ByteBuffer?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var input = unwrapInboundIn(data)
        if var carried = pending {
            carried.writeBuffer(&input)
            input = carried
            pending = nil
        }
        var reply = out ?? context.channel.allocator.buffer(capacity: 4096)
        out = nil
        input.withUnsafeReadableBytes { bytes in
            let start = LineScan.forEachLine(bytes) { line in
                Replies.answer(line) { reply.writeBytes($0) }
            }
            if start < bytes.count {
                var rest = context.channel.allocator.buffer(capacity: bytes.count - start)
                rest.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[start...]))
                pending = rest
            }
        }
        out = reply
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard var reply = out, reply.readableBytes > 0 else { return }
        out = nil
        context.writeAndFlush(wrapOutboundOut(reply), promise: nil)
        reply.clear()
        out = reply
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    print("usage: TransportFloor SOCKET-PATH [EVENT-LOOP-THREADS]")
    exit(2)
}
let threads = arguments.count > 2 ? Int(arguments[2]) ?? System.coreCount : System.coreCount
unlink(arguments[1])
let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
let channel = try ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 256)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(FloorHandler())
        }
    }
    .bind(unixDomainSocketPath: arguments[1])
    .wait()
try channel.closeFuture.wait()

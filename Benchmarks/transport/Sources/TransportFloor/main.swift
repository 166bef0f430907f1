// The transport floor: what SwiftNIO alone costs per request, on the same terms as
// halcyond. It listens on a Unix socket with as many event loops as it is told, frames
// newline-delimited requests, and answers each with the line halcyond would send for the
// same request: a 100-byte memory hit for a get, a stored reply for a set, carrying the
// request's id. Replies of one read burst go out with one flush at `channelReadComplete`,
// as halcyond's do. No JSON is parsed and nothing is stored: the difference between this
// server's CPU per request and halcyond's is the cost of halcyond's own work.
//
// Usage: TransportFloor SOCKET-PATH [EVENT-LOOP-THREADS (default: the core count)]

import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// The reply pieces around a request's id.
enum Replies {
    static let head = Array(#"{"jsonrpc":"2.0","id":"#.utf8)
    static let hit = Array(
        (#","result":{"found":true,"value":""# + String(repeating: "x", count: 100)
            + #"","encoding":"utf8","cacheType":"memory","expiresAt":1796640890,"version":1796036089876611}}"# + "\n")
            .utf8)
    static let stored = Array(
        #","result":{"stored":true,"size":100,"expiresAt":1796640890,"version":1796036089876611}}"#.utf8 + [0x0A])
    static let idMember = Array(#""id":"#.utf8)
    static let setMethod = Array(#""cache.set""#.utf8)
}

/// One connection: the bytes of an unfinished line, and the replies of the current read
/// burst. Threading: confined to its channel's event loop.
final class FloorHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var pending: ByteBuffer?
    private var out: ByteBuffer?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var input = unwrapInboundIn(data)
        if var carried = pending {
            carried.writeBuffer(&input)
            input = carried
            pending = nil
        }
        var reply = out ?? context.channel.allocator.buffer(capacity: 4096)
        input.withUnsafeReadableBytes { bytes in
            var start = 0
            while let newline = bytes[start...].firstIndex(of: 0x0A) {
                Self.answer(UnsafeRawBufferPointer(rebasing: bytes[start..<newline]), into: &reply)
                start = newline + 1
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
        guard let reply = out, reply.readableBytes > 0 else { return }
        out = nil
        context.writeAndFlush(wrapOutboundOut(reply), promise: nil)
    }

    /// Appends the reply to one request line: its id copied as it stands.
    private static func answer(_ line: UnsafeRawBufferPointer, into reply: inout ByteBuffer) {
        reply.writeBytes(Replies.head)
        if let at = find(Replies.idMember, in: line) {
            var end = at + Replies.idMember.count
            while end < line.count, line[end] != UInt8(ascii: ","), line[end] != UInt8(ascii: "}") { end += 1 }
            reply.writeBytes(UnsafeRawBufferPointer(rebasing: line[(at + Replies.idMember.count)..<end]))
        } else {
            reply.writeBytes(Array("null".utf8))
        }
        reply.writeBytes(find(Replies.setMethod, in: line) == nil ? Replies.hit : Replies.stored)
    }

    private static func find(_ needle: [UInt8], in line: UnsafeRawBufferPointer) -> Int? {
        guard line.count >= needle.count else { return nil }
        var i = 0
        while i <= line.count - needle.count {
            if line[i] == needle[0], needle.indices.allSatisfy({ line[i + $0] == needle[$0] }) { return i }
            i += 1
        }
        return nil
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

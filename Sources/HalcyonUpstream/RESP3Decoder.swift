// Framing for a channel: bytes in, whole RESP3 values out, with the parser's limits.

import NIOCore

/// A `ByteToMessageDecoder` that emits one `RESP3Value` per complete value.
///
/// Threading: loop-bound, like every channel handler (`Sendable` unavailable).
public struct RESP3Decoder: ByteToMessageDecoder {
    public typealias InboundOut = RESP3Value

    private let parser: RESP3Parser

    public init(limits: RESP3Parser.Limits = .init()) {
        parser = RESP3Parser(limits: limits)
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        do throws(RESP3ParseError) {
            guard let value = try parser.next(from: &buffer) else { return .needMoreData }
            context.fireChannelRead(wrapInboundOut(value))
            return .continue
        } catch {
            throw RedisError.protocolViolation(error)
        }
    }

    public mutating func decodeLast(
        context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool
    ) throws -> DecodingState {
        try decode(context: context, buffer: &buffer)
    }
}

@available(*, unavailable)
extension RESP3Decoder: Sendable {}

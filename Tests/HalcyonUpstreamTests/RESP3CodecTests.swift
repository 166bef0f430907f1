// The RESP3 parser and writer: every type, streamed forms, RESP2 nulls, partial input,
// limits and malformed input; through EmbeddedChannel for the channel decoder.

import HalcyonUpstream
import NIOCore
import NIOEmbedded
import Testing

@Suite(.timeLimit(.minutes(1)))
struct RESP3CodecTests {
    /// One value of every RESP3 type, nested where a type nests.
    static let everyType: [RESP3Value] = [
        .simpleString(ByteBuffer(string: "OK")),
        .simpleError(ByteBuffer(string: "ERR wrong")),
        .integer(-9_223_372_036_854_775_808),
        .integer(42),
        .blob([0, 13, 10, 255]),
        .blob(""),
        .blobError(ByteBuffer(string: "SYNTAX invalid\r\nsyntax")),
        .null,
        .double(3.25), .double(-1e300), .double(.infinity), .double(-.infinity),
        .boolean(true), .boolean(false),
        .bigNumber("3492890328409238509324850943850943825024385"), .bigNumber("-1"),
        .verbatimString(format: "txt", text: ByteBuffer(string: "Some\r\nstring")),
        .array([.integer(1), .array([]), .blob("x"), .null]),
        .map([.init(.blob("a"), .integer(1)), .init(.simpleString(ByteBuffer(string: "b")), .map([]))]),
        .set([.boolean(true), .integer(100)]),
        .attributed([.init(.blob("ttl"), .integer(3))], .array([.integer(2039123)])),
        .push([.blob("invalidate"), .array([.blob("k1"), .blob("k2")])]),
    ]

    func parseAll(_ bytes: [UInt8], limits: RESP3Parser.Limits = .init()) throws -> [RESP3Value] {
        var buffer = ByteBuffer(bytes: bytes)
        var values: [RESP3Value] = []
        let parser = RESP3Parser(limits: limits)
        while let value = try parser.next(from: &buffer) { values.append(value) }
        #expect(buffer.readableBytes == 0, "bytes left over")
        return values
    }

    @Test func everyTypeRoundTrips() throws {
        var buffer = ByteBuffer()
        for value in Self.everyType { buffer.writeRESP3(value) }
        let parsed = try parseAll(Array(buffer: buffer))
        #expect(parsed == Self.everyType)
    }

    @Test func nanRoundTrips() throws {
        var buffer = ByteBuffer()
        buffer.writeRESP3(.double(.nan))
        #expect(String(buffer: buffer) == ",nan\r\n")
        guard case .double(let value) = try parseAll(Array(buffer: buffer)).first else {
            Issue.record("not a double")
            return
        }
        #expect(value.isNaN)
    }

    @Test func streamedFormsDecodeToPlainOnes() throws {
        let bytes = Array("$?\r\n;4\r\nHell\r\n;6\r\no worl\r\n;1\r\nd\r\n;0\r\n*?\r\n:1\r\n:2\r\n.\r\n%?\r\n+a\r\n:1\r\n.\r\n~?\r\n.\r\n".utf8)
        #expect(try parseAll(bytes) == [
            .blob("Hello world"), .array([.integer(1), .integer(2)]),
            .map([.init(.simpleString(ByteBuffer(string: "a")), .integer(1))]), .set([]),
        ])
    }

    @Test func resp2NullsAreNull() throws {
        #expect(try parseAll(Array("$-1\r\n*-1\r\n_\r\n".utf8)) == [.null, .null, .null])
    }

    @Test func partialInputWaitsWithoutConsuming() throws {
        var full = ByteBuffer()
        for value in Self.everyType { full.writeRESP3(value) }
        let bytes = Array(buffer: full)
        // Every prefix parses to the values wholly inside it, and leaves the rest in place.
        let parser = RESP3Parser()
        var buffer = ByteBuffer()
        var values: [RESP3Value] = []
        for byte in bytes {
            buffer.writeInteger(byte)
            let before = buffer.readableBytes
            if let value = try parser.next(from: &buffer) {
                values.append(value)
            } else {
                #expect(buffer.readableBytes == before)
            }
        }
        #expect(values == Self.everyType)
    }

    @Test(arguments: [
        ("@x\r\n", RESP3ParseError.unknownType(UInt8(ascii: "@"))),
        ("$3\r\nabcd\r\n", .missingCRLF),
        ("$01\r\na\r\n", .badLength),
        ("$-2\r\n", .badLength),
        ("*+1\r\n", .badLength),
        (":12a\r\n", .badInteger),
        (":+1\r\n", .badInteger),
        (":9223372036854775808\r\n", .badInteger),
        (",0x1p3\r\n", .badDouble),
        (",infinity\r\n", .badDouble),
        ("#x\r\n", .badBoolean),
        ("(12-3\r\n", .badBigNumber),
        ("=3\r\ntxt\r\n", .badVerbatim),
        ("$?\r\n:1\r\n", .badStream),
        (".\r\n", .badStream),
        ("_x\r\n", .missingCRLF),
        ("+ok\rx", .missingCRLF),
    ])
    func malformedInputIsRefused(input: String, reason: RESP3ParseError) {
        #expect(throws: reason) { try parseAll(Array(input.utf8)) }
    }

    @Test func limitsAreEnforcedBeforeAllocating() {
        var limits = RESP3Parser.Limits()
        limits.maxBlobLength = 10
        limits.maxAggregateLength = 5
        limits.maxDepth = 3
        limits.maxLineLength = 8
        #expect(throws: RESP3ParseError.blobTooLong) { try parseAll(Array("$11\r\n".utf8), limits: limits) }
        #expect(throws: RESP3ParseError.aggregateTooLong) { try parseAll(Array("*6\r\n".utf8), limits: limits) }
        #expect(throws: RESP3ParseError.aggregateTooLong) { try parseAll(Array("*1000000\r\n".utf8), limits: limits) }
        #expect(throws: RESP3ParseError.tooDeep) { try parseAll(Array("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n".utf8), limits: limits) }
        #expect(throws: RESP3ParseError.lineTooLong) { try parseAll(Array("+0123456789abcdef".utf8), limits: limits) }
        #expect(throws: RESP3ParseError.blobTooLong) {
            try parseAll(Array("$?\r\n;6\r\nabcdef\r\n;6\r\nabcdef\r\n;0\r\n".utf8), limits: limits)
        }
    }

    @Test func commandsAreArraysOfBlobs() {
        var buffer = ByteBuffer()
        buffer.writeRESP3Command(["SET", "k", "a b"].map { ByteBuffer(string: $0) })
        #expect(String(buffer: buffer) == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na b\r\n")
    }

    @Test func decoderFramesDripFedBytes() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(RESP3Decoder()))
        var full = ByteBuffer()
        for value in Self.everyType { full.writeRESP3(value) }
        for byte in Array(buffer: full) {
            try channel.writeInbound(ByteBuffer(bytes: [byte]))
        }
        var received: [RESP3Value] = []
        while let value = try channel.readInbound(as: RESP3Value.self) { received.append(value) }
        #expect(received == Self.everyType)
        #expect(try channel.finish().isClean)
    }

    @Test func decoderClosesOnGarbage() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(RESP3Decoder()))
        #expect(throws: RedisError.protocolViolation(.unknownType(UInt8(ascii: "?")))) {
            try channel.writeInbound(ByteBuffer(string: "?what\r\n"))
        }
        _ = try? channel.finish()
    }

    @Test func accessorsReadReplies() {
        let hello: RESP3Value = .map([.init(.blob("proto"), .integer(3)), .init(.blob("role"), .blob("master"))])
        #expect(hello[field: "proto"]?.int64 == 3)
        #expect(hello[field: "role"]?.string == "master")
        #expect(RESP3Value.array([.blob("a"), .integer(1)])[field: "a"]?.int64 == 1)
        #expect(RESP3Value.simpleError(ByteBuffer(string: "MOVED 1 h:1")).errorText == "MOVED 1 h:1")
        #expect(RESP3Value.attributed([], .blob("x")).string == "x")
    }
}

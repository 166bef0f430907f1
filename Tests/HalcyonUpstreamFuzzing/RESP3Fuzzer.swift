// One fuzz input through the RESP3 parser, with the checks that make a run fail: the
// same bytes give the same values and the same error whether they arrive whole or a few
// bytes at a time, and every value parsed re-encodes to bytes that parse back to the same
// canonical form. Shared by the libFuzzer entry point and the corpus replay test.

import HalcyonUpstream
import NIOCore

/// Checks RESP3 inputs.
///
/// Threading: stateless; `check` may be called from any thread.
public struct RESP3Fuzzer: Sendable {
    /// Small bounds, so inputs reach every limit.
    public static let limits: RESP3Parser.Limits = {
        var limits = RESP3Parser.Limits()
        limits.maxLineLength = 1024
        limits.maxBlobLength = 1 << 20
        limits.maxAggregateLength = 4096
        limits.maxDepth = 16
        return limits
    }()

    private let parser = RESP3Parser(limits: RESP3Fuzzer.limits)

    public init() {}

    /// What parsing a stream produced: the values (re-encoded, so NaN compares equal to
    /// itself) and how it ended.
    struct Outcome: Equatable {
        var encoded: [ByteBuffer] = []
        var error: RESP3ParseError?
        var leftover = 0
    }

    /// Parses `bytes` whole and in pieces.
    /// - Returns: nil when every check held, else what broke.
    public func check(_ bytes: UnsafeRawBufferPointer) -> String? {
        let whole = outcome(of: bytes, pieceSize: bytes.count)
        let pieceSize = bytes.count <= 2048 ? 1 : 7
        let pieces = outcome(of: bytes, pieceSize: pieceSize)
        if whole.encoded != pieces.encoded || whole.error != pieces.error {
            return "whole input gave \(whole.encoded.count) values and \(String(describing: whole.error)); "
                + "pieces of \(pieceSize) gave \(pieces.encoded.count) and \(String(describing: pieces.error))"
        }
        for encoded in whole.encoded {
            var again = encoded
            guard let reparsed = try? parser.next(from: &again), again.readableBytes == 0 else {
                return "a value's canonical form did not parse back: \(String(buffer: encoded).debugDescription)"
            }
            var canonical = ByteBuffer()
            canonical.writeRESP3(reparsed)
            if canonical != encoded {
                return "canonical form is not stable: \(String(buffer: encoded).debugDescription)"
            }
        }
        return nil
    }

    private func outcome(of bytes: UnsafeRawBufferPointer, pieceSize: Int) -> Outcome {
        var outcome = Outcome()
        var buffer = ByteBuffer()
        var offset = 0
        repeat {
            let end = min(bytes.count, offset + max(pieceSize, 1))
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
            offset = end
            do {
                while let value = try parser.next(from: &buffer) {
                    var encoded = ByteBuffer()
                    encoded.writeRESP3(value)
                    outcome.encoded.append(encoded)
                }
            } catch {
                outcome.error = error
                return outcome
            }
        } while offset < bytes.count
        outcome.leftover = buffer.readableBytes
        return outcome
    }
}

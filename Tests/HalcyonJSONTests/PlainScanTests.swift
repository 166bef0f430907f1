import CHalcyonSystem
@testable import HalcyonJSON
import Testing

/// The plain-string scan (`JSONWriter.isPlainASCII`, `hc_json_plain_ascii`) in each of
/// its variants against the byte rule it keeps: ASCII, nothing below 0x20, no `"`, no `\`.
@Suite struct PlainScanTests {
    typealias Scan = @Sendable (UnsafeRawPointer?, Int) -> Int32

    static let variants: [(name: String, scan: Scan)] = [
        ("chosen", { hc_json_plain_ascii($0, $1) }),
        ("sse2", { hc_json_plain_ascii_sse2($0, $1) }),
        ("portable", { hc_json_plain_ascii_portable($0, $1) }),
    ]

    static func isPlain(_ byte: Int) -> Bool { byte >= 0x20 && byte < 0x80 && byte != 0x22 && byte != 0x5C }

    /// Every byte value at every place of a 150-byte run: inside the 64-, 32- and
    /// 8-byte steps and in each variant's tail.
    @Test func everyByteAtEveryPlaceIsJudgedByTheRule() {
        let length = 150
        for byte in 0...255 {
            for at in 0..<length {
                var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                bytes[at] = UInt8(byte)
                let expected = Self.isPlain(byte)
                bytes.withUnsafeBytes { raw in
                    for variant in Self.variants where (variant.scan(raw.baseAddress, raw.count) != 0) != expected {
                        Issue.record("\(variant.name): byte \(byte) at \(at)")
                    }
                    if JSONWriter.isPlainASCII(raw) != expected { Issue.record("isPlainASCII: byte \(byte) at \(at)") }
                }
            }
        }
    }

    /// Every length from 0 up past two vector steps, plain and with its last byte not.
    @Test func everyLengthIsScannedToItsEnd() {
        for length in 0...140 {
            var bytes = [UInt8](repeating: UInt8(ascii: "~"), count: length)
            bytes.withUnsafeBytes { raw in
                for variant in Self.variants {
                    #expect(variant.scan(raw.baseAddress, raw.count) == 1, "\(variant.name), length \(length)")
                }
            }
            guard length > 0 else { continue }
            bytes[length - 1] = UInt8(ascii: "\\")
            bytes.withUnsafeBytes { raw in
                for variant in Self.variants {
                    #expect(variant.scan(raw.baseAddress, raw.count) == 0, "\(variant.name), length \(length)")
                }
            }
        }
    }
}

// CRC32C against the RFC 3720 (iSCSI) test vectors, and the SSE4.2 path against the
// portable tables on every length and alignment that matters.

import CHalcyonSystem
import Testing
@testable import HalcyonCache

@Suite("CRC32C")
struct CRC32CTests {
    @Test func rfc3720Vectors() {
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum((0..<32).map { UInt8(31 - $0) }) == 0x113F_DB5C)
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
    }

    @Test func hardwareAndPortableAgreeOnEveryLengthAndAlignmentAndInPieces() {
        var generator = SystemRandomNumberGenerator()
        let data = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }
        data.withUnsafeBytes { raw in
            for start in 0..<9 {
                for length in [0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 100, 1000, 4087 - start] {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[start..<start + length])
                    let fast = CRC32C.checksum(slice)
                    let portable = hc_crc32c_portable(0, slice.baseAddress, slice.count)
                    #expect(fast == portable, "start \(start) length \(length)")
                    // In two pieces, continuing from the first.
                    let cut = length / 3
                    let first = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: slice[slice.startIndex..<slice.startIndex + cut]))
                    #expect(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: slice[(slice.startIndex + cut)...]), continuing: first) == fast)
                }
            }
        }
    }
}

// CRC32C against the RFC 3720 (iSCSI) test vectors, and the SSE4.2 path against the
// portable tables on every length and alignment that matters: below, at and past the
// sizes where the hardware path switches to three chains of short and of long blocks.

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
        let data = (0..<20_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        data.withUnsafeBytes { raw in
            for start in 0..<9 {
                let lengths = [0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 100, 767, 768, 769, 1000, 1536, 1543, 2304, 4087 - start,
                               4096, 6143, 6144, 6145, 6144 + 768 + 9, 12_288, 19_991 - start]
                for length in lengths {
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

// The checksum shared by the disk tier's file format and the write-ahead journal:
// CRC32C (Castagnoli), computed in C with the SSE4.2 instruction when the CPU has it.

import CHalcyonSystem

/// CRC32C over bytes, in one go or in pieces.
///
/// ```swift
/// var crc = CRC32C.checksum(header)          // first piece
/// crc = CRC32C.checksum(value, continuing: crc)
/// ```
///
/// Threading: thread-safe (pure functions).
enum CRC32C {
    /// The CRC32C of `bytes`, continuing from `crc` (0 to start).
    @inline(__always)
    static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return crc }
        return hc_crc32c(crc, base, bytes.count)
    }

    /// The CRC32C of an array's bytes, continuing from `crc` (0 to start).
    @inline(__always)
    static func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, continuing: crc) }
    }

    /// True when the SSE4.2 instruction computes it; false on the portable tables.
    static var isHardwareAccelerated: Bool { hc_crc32c_is_hardware() != 0 }
}

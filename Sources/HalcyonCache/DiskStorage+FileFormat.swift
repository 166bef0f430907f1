// The bytes of a cache file: a fixed header, the key, the value. Format 2 keeps the key,
// the entry's version and its original time-to-live with the value, and a CRC32C over
// all of it, so a truncated, overlong or damaged file is found on read and the disk tier
// can list its keys after a restart. Format 1 files (8-byte header, flags only) are
// still read. `FileHeader` has the byte diagram.
//
// - The CRC32C (Castagnoli) is computed in C (Sources/CHalcyonSystem/crc32c.c) with the
//   SSE4.2 instruction when the CPU has it, slicing-by-8 tables otherwise.
// - Why the key and version are in the file: names are hashed, so without the key a
//   restarted daemon could not list its keys (`cache.keys`); the version must survive
//   restarts. Versions come from `VersionClock` (`max(last + 1, wall-clock microseconds)`):
//   increasing without a scan at start.
// - Damage (shorter than 8 bytes, an `HCY2` header with an unknown format, options or
//   header length, a size other than `48 + key len + value len`, a bad checksum) is a
//   miss, counted (`Backend.corruptionCount`, `diskCorruptions`), and the file is removed
//   if the name still points at the inode that was read. A meta-only read (`isCached`,
//   `meta`) checks the sizes, not the checksum (it does not read the value).
// - Format 1 (`"HCY1"` + flags, then the value) is still read: version 0, no key, no
//   checksum (its truncation cannot be detected). Never written; the next store of the key
//   rewrites it in format 2. `listKeys` cannot name its key and counts it
//   (`unlistableFiles`). No migration at start: reading both costs one byte comparison,
//   and a format-1 file holds no key to migrate it by. A file with a forced extension is
//   listed with its `forcedExtension`; `cache.keys` lists a key once (the first of its
//   files in name order), `removePrefix` removes each of its files.
// - Foreign entries: cache files are opened `O_NOFOLLOW | O_NONBLOCK`, so a symbolic link
//   fails (`ELOOP`) and a FIFO opens without waiting for a writer; `fstat` must say
//   "regular file" before anything is read or any time set. Such entries are misses,
//   counted (`foreignEntryCount`) and left alone; a symbolic link is a read error
//   (`cannotLoadDataFromDisk`, ELOOP) until a store renames a real file over it.

extension DiskStorage {
    /// The fixed 48-byte header of a format-2 cache file, all fields little-endian:
    ///
    /// ```
    ///  0      4        6         8       12        16        24         32          40       44      48
    ///  +------+--------+---------+-------+---------+---------+----------+-----------+--------+-------+----------+---------+
    ///  | HCY2 | format | hdr len | flags | options | version | TTL (ns) | value len | key len| CRC32C| key ...  | value...|
    ///  |      | u16 =2 | u16 =48 |  u32  | u32 = 0 |   u64   |   i64    |    u64    |  u32   |  u32  |          |         |
    ///  +------+--------+---------+-------+---------+---------+----------+-----------+--------+-------+----------+---------+
    /// ```
    ///
    /// - `flags`: the opaque word stored with the value (the daemon's wire encoding).
    /// - `options`: reserved for header-level flags (compression, say); 0, and a reader
    ///   refuses a file with bits it does not know.
    /// - `TTL`: the time-to-live the entry was stored with, in nanoseconds; -1 for
    ///   never. Sliding expiration normally recovers it from the file times (see
    ///   `FileTimes`); this copy is the fallback when those were changed by hand. (For
    ///   an absolute lifetime, the span that was left at the store; such a lifetime does
    ///   not slide, see `FileTimes.isAbsolute`.)
    /// - `CRC32C`: over bytes 0..<44 of the header, then the key, then the value.
    ///
    /// Invariant: a well-formed file is exactly `48 + key len + value len` bytes long.
    /// Expiration and last access stay in the file's mtime and atime, outside the
    /// checksum, so a touch or a sliding read never rewrites the file.
    struct FileHeader: Equatable, Sendable {
        static let size = 48
        static let magic: (UInt8, UInt8, UInt8, UInt8) = (0x48, 0x43, 0x59, 0x32)  // "HCY2"
        static let formatVersion: UInt16 = 2
        /// The offset of the checksum, which covers every byte before it.
        static let checksumOffset = 44
        /// Keys longer than this are refused by the format (a sanity bound on reading).
        static let maximumKeyLength = 1 << 20

        var flags: UInt32
        var version: UInt64
        /// Nanoseconds; -1 for never.
        var ttlNanos: Int64
        var valueLength: UInt64
        var keyLength: UInt32
        var checksum: UInt32 = 0

        /// The expected size of the whole file.
        var fileSize: UInt64 { UInt64(Self.size) + UInt64(keyLength) + valueLength }

        /// The header bytes for `key` and `value`, with the checksum over all three.
        static func encode(flags: UInt32, version: UInt64, ttlNanos: Int64, key: [UInt8], value: UnsafeRawBufferPointer) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: size)
            bytes[0] = magic.0; bytes[1] = magic.1; bytes[2] = magic.2; bytes[3] = magic.3
            LittleEndian.put(UInt64(formatVersion), into: &bytes, at: 4, width: 2)
            LittleEndian.put(UInt64(size), into: &bytes, at: 6, width: 2)
            LittleEndian.put(UInt64(flags), into: &bytes, at: 8, width: 4)
            LittleEndian.put(version, into: &bytes, at: 16, width: 8)
            LittleEndian.put(UInt64(bitPattern: ttlNanos), into: &bytes, at: 24, width: 8)
            LittleEndian.put(UInt64(value.count), into: &bytes, at: 32, width: 8)
            LittleEndian.put(UInt64(key.count), into: &bytes, at: 40, width: 4)
            var crc = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<checksumOffset])) }
            crc = CRC32C.checksum(key, continuing: crc)
            crc = CRC32C.checksum(value, continuing: crc)
            LittleEndian.put(UInt64(crc), into: &bytes, at: checksumOffset, width: 4)
            return bytes
        }

        /// What the first bytes of a file say it is.
        enum Decoded: Equatable {
            /// A format-2 header (not yet checked against the file's size or checksum).
            case v2(FileHeader)
            /// A format-1 file: 8-byte header, then the value; no key, version or checksum.
            case v1(flags: UInt32)
            /// Our magic, but fields that cannot be right (unknown format or options,
            /// wrong header length, absurd key length): a damaged file.
            case corrupt
            /// Not a file this tier wrote (another magic, or shorter than any header).
            case foreign
        }

        /// Decodes the start of a file (`bytes` holds its first bytes, as many as were read).
        static func decode(_ bytes: UnsafeRawBufferPointer) -> Decoded {
            guard bytes.count >= 4, bytes[0] == 0x48, bytes[1] == 0x43, bytes[2] == 0x59 else { return .foreign }
            switch bytes[3] {
            case 0x31:  // "HCY1"
                guard let flags = DiskFileHeader.decodeFlags(bytes) else { return .foreign }
                return .v1(flags: flags)
            case 0x32:  // "HCY2"
                guard bytes.count >= size else { return .corrupt }
                guard LittleEndian.get(bytes, at: 4, width: 2) == UInt64(formatVersion),
                      LittleEndian.get(bytes, at: 6, width: 2) == UInt64(size),
                      LittleEndian.get(bytes, at: 12, width: 4) == 0
                else { return .corrupt }
                let keyLength = LittleEndian.get(bytes, at: 40, width: 4)
                guard keyLength <= UInt64(maximumKeyLength) else { return .corrupt }
                return .v2(FileHeader(
                    flags: UInt32(LittleEndian.get(bytes, at: 8, width: 4)),
                    version: LittleEndian.get(bytes, at: 16, width: 8),
                    ttlNanos: Int64(bitPattern: LittleEndian.get(bytes, at: 24, width: 8)),
                    valueLength: LittleEndian.get(bytes, at: 32, width: 8),
                    keyLength: UInt32(keyLength),
                    checksum: UInt32(LittleEndian.get(bytes, at: checksumOffset, width: 4))))
            default:
                return .foreign
            }
        }

        /// The checksum of `header` (its first 44 bytes), `key` and `value`, for
        /// comparing with `checksum`.
        static func computeChecksum(header: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> UInt32 {
            var crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: header[0..<checksumOffset]))
            crc = CRC32C.checksum(key, continuing: crc)
            return CRC32C.checksum(value, continuing: crc)
        }
    }
}

/// Little-endian integer fields in byte buffers, shared by the file format and the journal.
enum LittleEndian {
    @inline(__always)
    static func put(_ value: UInt64, into bytes: inout [UInt8], at offset: Int, width: Int) {
        for i in 0..<width { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
    }

    @inline(__always)
    static func append(_ value: UInt64, to bytes: inout [UInt8], width: Int) {
        for i in 0..<width { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    @inline(__always)
    static func get(_ bytes: UnsafeRawBufferPointer, at offset: Int, width: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<width { value |= UInt64(bytes[offset + i]) << (8 * UInt64(i)) }
        return value
    }
}

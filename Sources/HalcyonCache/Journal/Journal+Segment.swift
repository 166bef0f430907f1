// Segment files: their names, their header (magic, format, sequence, salt), and finding
// them in the journal folder.
//
// Segments are files `journal-<sequence>.log` (sequence zero-padded to 16 digits), always
// new (`O_CREAT|O_EXCL`): a writer starts one past the largest sequence present, so it
// never appends after a tail a crash may have torn. A segment closes after
// `segmentSizeLimit` bytes (a group is never split). The header, 24 bytes:
//
//   0      4        6         8          16     20       24
//   +------+--------+---------+----------+------+--------+-----------
//   | HCYJ | format | hdr len | sequence | salt | CRC32C | records...
//   |      | u16 =1 | u16 =24 |   u64    | u32  |  u32   |
//   +------+--------+---------+----------+------+--------+-----------
//
// The salt (random per segment) makes a record from another segment, or one left at the
// same offset by an older file, fail its check.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Journal {
    /// A segment file's 24-byte header, little-endian:
    ///
    /// ```
    ///  0      4        6         8          16     20       24
    ///  +------+--------+---------+----------+------+--------+-------------
    ///  | HCYJ | format | hdr len | sequence | salt | CRC32C | records ...
    ///  |      | u16 =1 | u16 =24 |   u64    | u32  |  u32   |
    ///  +------+--------+---------+----------+------+--------+-------------
    /// ```
    ///
    /// The CRC32C covers bytes 0..<20. `sequence` must match the file name; `salt` is
    /// random per segment and mixed into every record's checksum.
    struct SegmentHeader: Equatable {
        static let size = 24
        static let formatVersion: UInt16 = 1
        static let magic: [UInt8] = [0x48, 0x43, 0x59, 0x4A]  // "HCYJ"

        var sequence: UInt64
        var salt: UInt32

        func encode() -> [UInt8] {
            var bytes = Self.magic
            LittleEndian.append(UInt64(Self.formatVersion), to: &bytes, width: 2)
            LittleEndian.append(UInt64(Self.size), to: &bytes, width: 2)
            LittleEndian.append(sequence, to: &bytes, width: 8)
            LittleEndian.append(UInt64(salt), to: &bytes, width: 4)
            let crc = CRC32C.checksum(bytes)
            LittleEndian.append(UInt64(crc), to: &bytes, width: 4)
            return bytes
        }

        /// The header at the start of `bytes`, or nil when it is missing or damaged.
        static func decode(_ bytes: UnsafeRawBufferPointer) -> SegmentHeader? {
            guard bytes.count >= size, Array(bytes[0..<4]) == magic,
                  LittleEndian.get(bytes, at: 4, width: 2) == UInt64(formatVersion),
                  LittleEndian.get(bytes, at: 6, width: 2) == UInt64(size),
                  CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<20])) == UInt32(LittleEndian.get(bytes, at: 20, width: 4))
            else { return nil }
            return SegmentHeader(sequence: LittleEndian.get(bytes, at: 8, width: 8),
                                 salt: UInt32(LittleEndian.get(bytes, at: 16, width: 4)))
        }
    }

    /// Segment file names: `journal-<sequence>.log`, the sequence zero-padded to 16
    /// digits so that name order is sequence order.
    enum SegmentName {
        static let prefix = "journal-"
        static let suffix = ".log"

        static func name(_ sequence: UInt64) -> String {
            let digits = String(sequence)
            return prefix + String(repeating: "0", count: max(0, 16 - digits.count)) + digits + suffix
        }

        static func sequence(of name: String) -> UInt64? {
            guard name.hasPrefix(prefix), name.hasSuffix(suffix) else { return nil }
            return UInt64(name.dropFirst(prefix.count).dropLast(suffix.count))
        }

        /// The sequences of the segment files in `directory`, ascending.
        static func list(in directory: String) throws(CacheError) -> [UInt64] {
            switch POSIX.listDirectory(directory) {
            case .success(let names): return names.compactMap(sequence(of:)).sorted()
            case .failure(let e):
                if e.code == ENOENT { return [] }
                throw .cannotLoadDataFromDisk(path: directory, errno: e.code)
            }
        }
    }

    /// fsyncs a folder so that a file created or renamed in it survives a power loss.
    static func syncDirectory(_ path: String) throws(CacheError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .cannotWriteJournal(path: path, errno: errno) }
        defer { close(fd) }
        if fsync(fd) != 0 { throw .cannotWriteJournal(path: path, errno: errno) }
    }

    /// Reads a whole file (segments are bounded); nil when it does not exist.
    static func readWholeFile(_ path: String) throws(CacheError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw .cannotLoadDataFromDisk(path: path, errno: errno)
        }
        defer { close(fd) }
        guard case .success(let status) = POSIX.fstat(fd), status.isRegular else {
            throw .cannotLoadDataFromDisk(path: path, errno: EINVAL)
        }
        var readError: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: Int(status.fileSize)) { buffer, initialized in
            switch POSIX.readFully(fd, into: UnsafeMutableRawBufferPointer(buffer), from: 0) {
            case .success(let n): initialized = n
            case .failure(let e): initialized = 0; readError = e.code
            }
        }
        if readError != 0 { throw .cannotLoadDataFromDisk(path: path, errno: readError) }
        return bytes
    }
}

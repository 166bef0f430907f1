// The checkpoint: the durable note of the position up to which every journal record is
// in the per-key files, so recovery replays only what follows and older segments can go.
//
// The file `checkpoint` ("HCYK", format, segment u64, offset u64, CRC32C; 28 bytes) is
// written to `checkpoint.tmp`, fsynced, renamed, and the folder fsynced; a missing or
// damaged checkpoint means "replay everything left" (replay is idempotent). Once it is
// durable, `Writer.deleteSegments(before:)` removes the segments wholly before it.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Journal {
    /// The file `checkpoint` in the journal folder, 28 bytes, little-endian:
    /// `"HCYK"`, format u16 = 1, 2 zero bytes, segment u64, offset u64, then a CRC32C
    /// (u32) over the 24 bytes before it.
    ///
    /// Written to `checkpoint.tmp`, fsynced, renamed over `checkpoint`, and the folder
    /// fsynced: a crash leaves the old checkpoint or the new one, never a torn one. A
    /// missing or damaged checkpoint means "replay everything", which is always safe
    /// because replay is idempotent.
    public enum Checkpoint {
        static let fileName = "checkpoint"
        static let size = 28
        static let magic: [UInt8] = [0x48, 0x43, 0x59, 0x4B]  // "HCYK"

        static func encode(_ position: Position) -> [UInt8] {
            var bytes = magic
            LittleEndian.append(1, to: &bytes, width: 2)
            LittleEndian.append(0, to: &bytes, width: 2)
            LittleEndian.append(position.segment, to: &bytes, width: 8)
            LittleEndian.append(position.offset, to: &bytes, width: 8)
            LittleEndian.append(UInt64(CRC32C.checksum(bytes)), to: &bytes, width: 4)
            return bytes
        }

        static func decode(_ bytes: [UInt8]) -> Position? {
            guard bytes.count == size, Array(bytes[0..<4]) == magic else { return nil }
            return bytes.withUnsafeBytes { raw in
                guard LittleEndian.get(raw, at: 4, width: 2) == 1,
                      CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[0..<24])) == UInt32(LittleEndian.get(raw, at: 24, width: 4))
                else { return nil }
                return Position(segment: LittleEndian.get(raw, at: 8, width: 8), offset: LittleEndian.get(raw, at: 16, width: 8))
            }
        }

        /// Records durably that everything before `position` is materialized.
        /// - Throws: `.cannotWriteJournal` with errno.
        public static func write(_ position: Position, directory: String) throws(CacheError) {
            let path = directory + "/" + fileName
            let temporary = path + ".tmp"
            let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw .cannotWriteJournal(path: temporary, errno: errno) }
            var failure: Int32 = 0
            if let e = encode(position).withUnsafeBytes({ POSIX.writeAll(fd, $0) }) {
                failure = e.code
            } else if fsync(fd) != 0 {
                failure = errno
            }
            close(fd)
            if failure == 0, rename(temporary, path) != 0 { failure = errno }
            if failure != 0 {
                unlink(temporary)
                throw .cannotWriteJournal(path: path, errno: failure)
            }
            try syncDirectory(directory)
        }

        /// The checkpoint in `directory`; nil when there is none or it is damaged.
        public static func read(directory: String) throws(CacheError) -> Position? {
            guard let bytes = try readWholeFile(directory + "/" + fileName) else { return nil }
            return decode(bytes)
        }
    }
}

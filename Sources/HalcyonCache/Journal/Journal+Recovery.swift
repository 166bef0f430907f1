// Reading the journal back at start: every record past the checkpoint, in order; a torn
// or invalid tail of the newest segment cut off (the end of the log, as in LevelDB and
// Redis); damage anywhere before it reported, never silently skipped.
//
// A record whose frame runs past the end of the file is torn; a complete frame with a bad
// checksum is invalid. An invalid record followed by a valid one is damage in the middle:
// reported (`Corruption.invalidRecord`) and skipped. A torn or invalid record with nothing
// valid after it is the end of the log: in the newest segment the expected trace of a
// crash mid-write, cut off (`truncate`) and reported as `tail`; in an older segment
// reported as damage. A segment whose header is damaged or names another sequence than
// its file is skipped and reported. Zeros to the end of a segment, from the first place no
// record could be read, are reserved space a writer had not filled (a mapped segment not
// yet cut back to its records, as after a crash): a clean end, in any segment, also cut
// off when `cutTail` is set.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Journal {
    /// One record read back, with where it starts and ends.
    public struct RecoveredRecord: Equatable, Sendable {
        public var record: Record
        public var start: Position
        public var end: Position
    }

    /// Damage found before the tail (or in a segment other than the newest).
    public struct Corruption: Equatable, Sendable {
        public enum Kind: Equatable, Sendable {
            /// A complete frame with a bad checksum or impossible fields, followed by a
            /// valid record: skipped, recovery went on after it.
            case invalidRecord(bytes: Int)
            /// An older segment ends in a torn or invalid record: the rest of that
            /// segment (`bytes`) was dropped, recovery went on with the next segment.
            case damagedSegmentEnd(bytes: Int)
            /// The segment header is missing or damaged: the whole segment was skipped.
            case badSegmentHeader
            /// The header names another sequence than the file name (a stale or moved
            /// segment): skipped.
            case staleSegment(headerSequence: UInt64)
        }

        public var position: Position
        public var kind: Kind
    }

    /// What `recover` found.
    public struct Recovery: Sendable {
        /// The checkpoint read (nil: none, replay from the first segment).
        public var checkpoint: Position?
        /// Every valid record past the checkpoint, oldest first: replay them in order.
        public var records: [RecoveredRecord] = []
        /// Damage before the tail; empty after a clean run or a clean crash.
        public var corruptions: [Corruption] = []
        /// Where the newest segment's torn or invalid tail began and how many bytes it
        /// had (cut off from the file when `cutTail` was true); nil when it ended cleanly.
        public var tail: (position: Position, bytes: Int)?
        /// The segments present, ascending.
        public var segments: [UInt64] = []
    }

    /// Reads every segment in `directory` past the checkpoint.
    ///
    /// Rules: segments are read in sequence order; one before the checkpoint's is
    /// skipped whole, the checkpoint's own from the checkpoint's offset. In a segment, a
    /// record whose frame runs past the end of the file is torn; a complete frame with a
    /// bad checksum (the segment's salt mixed in) is invalid. An invalid record followed
    /// by a valid one is damage in the middle: reported and skipped. A torn or invalid
    /// record with nothing valid after it is the end: in the newest segment that is the
    /// expected result of a crash during a write (`tail`); in an older one it is
    /// reported as damage.
    ///
    /// Call it at start, before a `Writer` opens the folder (the writer then starts a new
    /// segment after the ones read). Threading: any thread; it touches only the files.
    /// - Parameters:
    ///   - directory: the journal folder (a missing folder is an empty journal).
    ///   - cutTail: truncate the newest segment at the end of its last valid record
    ///     (default true), so the torn bytes are not met again after a later crash, and
    ///     any segment ending in zeros at the end of its records.
    /// - Throws: `.cannotLoadDataFromDisk` when a segment cannot be read,
    ///   `.cannotWriteJournal` when the tail cannot be cut.
    public static func recover(directory: String, cutTail: Bool = true) throws(CacheError) -> Recovery {
        var result = Recovery()
        result.checkpoint = try Checkpoint.read(directory: directory)
        result.segments = try SegmentName.list(in: directory)
        let checkpoint = result.checkpoint ?? Position(segment: 0, offset: 0)

        for (index, sequence) in result.segments.enumerated() where sequence >= checkpoint.segment {
            let isNewest = index == result.segments.count - 1
            let path = directory + "/" + SegmentName.name(sequence)
            guard let bytes = try readWholeFile(path) else { continue }
            let header = bytes.withUnsafeBytes { SegmentHeader.decode($0) }
            guard let header else {
                if isNewest && bytes.count < SegmentHeader.size {
                    // Created, header not yet whole: a crash right at rotation.
                    result.tail = (Position(segment: sequence, offset: 0), bytes.count)
                } else {
                    result.corruptions.append(Corruption(position: Position(segment: sequence, offset: 0), kind: .badSegmentHeader))
                }
                continue
            }
            guard header.sequence == sequence else {
                result.corruptions.append(Corruption(position: Position(segment: sequence, offset: 0),
                                                     kind: .staleSegment(headerSequence: header.sequence)))
                continue
            }
            var offset = SegmentHeader.size
            if sequence == checkpoint.segment { offset = max(offset, Int(min(checkpoint.offset, UInt64(bytes.count)))) }

            let end: Int? = bytes.withUnsafeBytes { raw in
                while offset < raw.count {
                    switch RecordCodec.decode(raw, at: offset, salt: header.salt) {
                    case .record(let record, let size):
                        result.records.append(RecoveredRecord(
                            record: record, start: Position(segment: sequence, offset: UInt64(offset)),
                            end: Position(segment: sequence, offset: UInt64(offset + size))))
                        offset += size
                    case .invalid(let size):
                        if offset + size < raw.count,
                           case .record = RecordCodec.decode(raw, at: offset + size, salt: header.salt) {
                            result.corruptions.append(Corruption(position: Position(segment: sequence, offset: UInt64(offset)),
                                                                 kind: .invalidRecord(bytes: size)))
                            offset += size
                        } else {
                            return offset
                        }
                    case .truncated:
                        return offset
                    }
                }
                return nil
            }
            guard let end else { continue }
            if bytes[end...].allSatisfy({ $0 == 0 }) {
                // Space reserved for records that never came (a mapped segment not cut
                // back, `Journal+Writer.swift`): a clean end, cut off like a tail.
                if cutTail, truncate(path, off_t(end)) != 0 {
                    throw .cannotWriteJournal(path: path, errno: errno)
                }
                continue
            }
            let position = Position(segment: sequence, offset: UInt64(end))
            if isNewest {
                result.tail = (position, bytes.count - end)
                if cutTail, truncate(path, off_t(end)) != 0 {
                    throw .cannotWriteJournal(path: path, errno: errno)
                }
            } else {
                result.corruptions.append(Corruption(position: position, kind: .damagedSegmentEnd(bytes: bytes.count - end)))
            }
        }
        return result
    }
}

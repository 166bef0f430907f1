// The write-ahead journal: what makes a write durable against kill -9 with one `write`
// per group of writes, before the per-key files are written behind it. This folder holds
// the component alone (records, segments, the writer, recovery, the checkpoint); the
// hybrid cache's write path appends to it and materializes from it.
// Records keep absolute times (nanoseconds since 1970, -1 never), as Redis propagates
// `EX` as `PXAT`, so a record means the same whenever it is replayed. The record format is
// in Journal+Record.swift, the segment header in Journal+Segment.swift. Measurements
// (appends singly and in groups, `write` against `writev`, where a large value is better
// written straight to its file): Benchmarks/RESULTS.md, "Journal I/O".

/// The journal's namespace.
///
/// ```swift
/// let writer = try Journal.Writer(directory: folder, config: .init(fsync: .everysec))
/// let end = try writer.append([.set(key: "k", flags: 0, version: 1, expiresAtNanos: -1, ttlNanos: -1, value: [1])])
/// // ... later, once the per-key files hold everything up to `end`:
/// try Journal.Checkpoint.write(end, directory: folder)
/// try writer.deleteSegments(before: end)
/// // at restart:
/// let recovered = try Journal.recover(directory: folder)   // records past the checkpoint
/// ```
public enum Journal {}

extension Journal {
    /// A place in the journal: a segment's sequence number and a byte offset in it.
    /// Ordered by segment, then offset. `append` returns the position just past its
    /// group; a checkpoint at a position says every record before it is in the files.
    public struct Position: Comparable, Hashable, Sendable, CustomStringConvertible {
        public var segment: UInt64
        public var offset: UInt64

        public init(segment: UInt64, offset: UInt64) {
            self.segment = segment
            self.offset = offset
        }

        public static func < (a: Position, b: Position) -> Bool {
            (a.segment, a.offset) < (b.segment, b.offset)
        }

        public var description: String { "\(segment):\(offset)" }
    }

    /// When appended bytes are flushed to the device (`--fsync`).
    public enum FsyncPolicy: String, Sendable, CaseIterable {
        /// `fdatasync` before `append` returns: a reply waits for the device.
        case always
        /// A background `fdatasync` at most about a second behind (the default).
        case everysec
        /// Never explicitly: the kernel writes back when it likes.
        case never
    }

    /// How a `Writer` behaves.
    public struct Config: Sendable {
        /// Default `.everysec`.
        public var fsync: FsyncPolicy
        /// A segment is closed and a new one started once it holds this many bytes
        /// (a group is never split, so a segment may exceed it by one group).
        /// Default 64 MiB.
        public var segmentSizeLimit: UInt64
        /// The interval of the background sync under `.everysec`, in seconds. Default 1.
        public var syncInterval: Double

        public init(fsync: FsyncPolicy = .everysec, segmentSizeLimit: UInt64 = 64 << 20, syncInterval: Double = 1) {
            self.fsync = fsync
            self.segmentSizeLimit = segmentSizeLimit
            self.syncInterval = syncInterval
        }
    }
}

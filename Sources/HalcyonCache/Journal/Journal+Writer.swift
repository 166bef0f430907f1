// Appending to the journal: groups of records copied into a mapped segment or written
// with one `writev`, segment rotation, the fsync policy (with a background sync for
// `everysec`), segment deletion, and counters.
//
// Group commit: `append([Record]) -> Position` frames the group, then copies it into the
// segment's mapping (below) or writes it with one `writev`: values under 4 KiB are copied
// into the frame buffer (for groups of 100-byte records one `write` of a copied buffer
// beat a `writev` of two buffers per record by 15-35 %), larger values go as buffers of
// their own, uncopied (`IOV_MAX` splits only groups over 500 records). A failed write
// (ENOSPC, EIO) throws `cannotWriteJournal` (wire -32002) and the partial group is cut off
// with `ftruncate`, so later groups never follow a torn one (if that fails, the next group
// opens a new segment).
//
// fsync: `always` syncs before `append` returns. `everysec`: a timer on the writer's own
// queue syncs a `dup` of the descriptor at most a second after the oldest unsynced
// append, outside the writer's lock, and records the lag (oldest unsynced append to the
// end of its sync); a segment that fills is handed to that queue too (synced, then
// closed) and a new segment's folder entry is synced by the next tick, so a rotation
// inside a group costs its caller (an event loop, on the direct path) an `open` and a
// header write, not an `fdatasync` and a folder `fsync` (Benchmarks/RESULTS.md, "Journal
// rotation"). `sync()` waits for those background syncs first. `never`: the kernel's choice.
//
// Mapped segments. A new segment's space is reserved up front (`fallocate` of the segment
// size) and mapped shared; a group that fits is copied into the mapping, with no system
// call: the pages are the file's page cache, so a kill -9 loses none of it, and `fdatasync`
// (the background sync, `.always`, a rotation) writes them as it writes `write`'s. A
// group's payloads are copied first and its frame headers (length and checksum) after
// them, behind a release fence: a process killed mid-copy leaves a run of valid records
// and then a zero or half-written frame header, which recovery reads as the end, never a
// record of the group after one it lost. A segment whose space cannot be reserved (a
// full disk, a file system without `fallocate`) is written with `writev` as before, and
// so is the rest of a segment once a group does not fit in its mapping (the file is cut
// back to its records first). A closed segment is cut back to its records; a crash
// leaves the reserved zeros after them, which recovery reads as a clean end
// (`Journal+Recovery.swift`). Nothing else may cut a live segment (a recovery of the same
// folder would, and end the mapping under the writer): the daemon's folder lock keeps a
// second daemon out. What the copy saves against a `writev` per group is in
// Benchmarks/RESULTS.md, "Mapped journal segments".
//
// The folder deleted under the daemon: an open segment whose folder is gone still takes
// writes, into a file no restart will find. So the writer looks at the segment's link
// count after each group (one `fstat` per group) and, when a segment must be opened in a
// folder that is gone, makes the folder again; either way it reports the loss once
// (`takeLoss`), and the write path journals the unwritten table again before any reply
// of the group (`LocalStore.WriteBehind.rebuild`). The materializer's tick asks the
// writer to look too (`checkSegment`), so a deletion while no write comes is repaired
// within a tick.

import CHalcyonSystem
import Dispatch
import HalcyonSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Journal {
    /// Counters of a `Writer`, for `cache.stats`.
    public struct Stats: Sendable, Equatable {
        /// Bytes appended since start (frames and segment headers).
        public var bytesWritten: UInt64 = 0
        /// `append` calls that wrote (groups) and records in them.
        public var groups: Int = 0
        public var records: Int = 0
        /// The largest group so far.
        public var largestGroup: Int = 0
        /// Groups by size: 1, 2–4, 5–16, 17–64, 65 and more.
        public var groupSizes: [Int] = [0, 0, 0, 0, 0]
        /// Segments created and deleted since start, and how many are in the folder now.
        public var segmentsCreated: Int = 0
        public var segmentsDeleted: Int = 0
        public var liveSegments: Int = 0
        /// fdatasync calls made, and how many failed (the latest errno in `lastSyncErrno`).
        public var syncs: Int = 0
        public var syncFailures: Int = 0
        public var lastSyncErrno: Int32 = 0
        /// Time from the oldest unsynced append to the end of the fdatasync that covered
        /// it, in nanoseconds: the last one and the largest one.
        public var lastSyncLagNanos: UInt64 = 0
        public var maxSyncLagNanos: UInt64 = 0
        /// Appends that failed (ENOSPC and the like).
        public var failedAppends: Int = 0
        /// Times the current segment or the whole folder was found removed under the
        /// daemon (see `Writer.takeLoss`).
        public var segmentsLost: Int = 0
        /// Segments whose space was reserved and mapped, and groups copied into a
        /// mapping (the others went out with `writev`).
        public var mappedSegments: Int = 0
        public var mappedGroups: Int = 0

        mutating func countGroup(_ size: Int) {
            groups += 1
            records += size
            largestGroup = max(largestGroup, size)
            let bucket = size <= 1 ? 0 : size <= 4 ? 1 : size <= 16 ? 2 : size <= 64 ? 3 : 4
            groupSizes[bucket] += 1
        }
    }

    /// Appends records to the journal folder's newest segment.
    ///
    /// Every `Writer` starts a new segment (a sequence one past the largest in the folder),
    /// so it never appends after a tail a crash may have torn. A group of records is
    /// copied into the segment's mapping, or, where the segment has none (see "Mapped
    /// segments" above), goes out with one `writev` (values of 4 KiB and more are not
    /// copied); a failed write is cut off again (`ftruncate`) so later groups never follow
    /// a torn one, or, if that fails too, the next group starts a new segment.
    ///
    /// Threading: thread-safe; `state` (a `Locked`) guards the descriptor, the position
    /// and the counters and is held across each append's system calls, so appends are
    /// ordered. The hybrid cache calls `append` from its ioQueue only. Under `.everysec`
    /// a timer on the private `syncQueue` ("com.halcyon.Journal.Writer.sync") runs
    /// `fdatasync` on a duplicate of the descriptor, outside the lock, so a sync never
    /// delays an append; a full segment, and the folder after a new segment's creation,
    /// are synced there too, and `sync()` waits for them.
    // @unchecked Sendable: the `state` lock guards all mutable state; the timer is a `let`
    // set in init and only cancelled afterwards.
    public final class Writer: @unchecked Sendable {
        private struct State {
            var fd: Int32 = -1
            var sequence: UInt64 = 0
            var salt: UInt32 = 0
            /// Bytes in the current segment (the next record's offset).
            var offset: UInt64 = 0
            /// The current segment must be replaced before the next append (a failed
            /// write could not be cut off).
            var broken = false
            /// Records appended earlier are gone: their segment was unlinked, or the
            /// folder vanished (see `takeLoss`).
            var lost = false
            /// The current (broken) segment was found unlinked and reported: the folder
            /// missing when its successor opens is the same loss, not a second one.
            var unlinkedReported = false
            var closed = false
            /// When (monotonic ns) the oldest append not yet covered by a sync was made.
            var dirtySince: UInt64?
            /// A segment was created since the folder was last synced (`.everysec` leaves
            /// that to the background sync, like the records in it).
            var directoryUnsynced = false
            /// The current segment's mapping, the segment's reserved space (see "Mapped
            /// segments" above); nil when its groups go out with `writev`.
            var mapping: UnsafeMutableRawBufferPointer?
            var stats = Stats()
        }

        public let directory: String
        public let config: Config
        /// Whether groups go out with `writev` (default) or are first copied into one
        /// buffer for a single `write`; the latter exists to measure the difference.
        let vectored: Bool
        /// Values shorter than this are copied into the frame buffer; longer ones go to
        /// `writev` as buffers of their own, uncopied.
        static let inlineValueLimit = 4096
        private let state: Locked<State>
        private let syncQueue = DispatchQueue(label: "com.halcyon.Journal.Writer.sync", qos: .utility)
        private let timer: DispatchSourceTimer?

        /// Opens a new segment in `directory` (created if missing, mode 0700).
        /// - Throws: `.cannotWriteJournal` with errno.
        public init(directory: String, config: Config = Config(), vectored: Bool = true) throws(CacheError) {
            self.directory = directory
            self.config = config
            self.vectored = vectored
            if let e = POSIX.makeDirectories(directory) { throw .cannotWriteJournal(path: directory, errno: e.code) }
            let existing = try SegmentName.list(in: directory)
            var initial = State()
            initial.sequence = (existing.last ?? 0)
            initial.stats.liveSegments = existing.count
            state = Locked(initial)
            if config.fsync == .everysec {
                let timer = DispatchSource.makeTimerSource(queue: syncQueue)
                let interval = DispatchTimeInterval.nanoseconds(Int(config.syncInterval * 1e9))
                timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(20))
                self.timer = timer
            } else {
                timer = nil
            }
            try locked { (s: inout State) throws(CacheError) in try openNextSegment(&s) }
            timer?.setEventHandler { [weak self] in self?.syncInBackground() }
            timer?.resume()
        }

        deinit {
            timer?.cancel()
            state.withLock { s in
                if s.fd >= 0 {
                    Self.unmap(&s)
                    Glibc.close(s.fd)
                }
            }
        }

        /// Appends a group of records with one `writev` (more only past `IOV_MAX`
        /// buffers or on a short write), then syncs if the policy is `.always`.
        /// - Returns: the position just past the group's last record.
        /// - Throws: `.cannotWriteJournal` with errno (ENOSPC, EIO, ...); then none of
        ///   the group is in the journal.
        @discardableResult
        public func append(_ records: [Record]) throws(CacheError) -> Position {
            try locked { (s: inout State) throws(CacheError) -> Position in
                guard !s.closed else { throw .cannotWriteJournal(path: directory, errno: EBADF) }
                if s.fd < 0 || s.broken || s.offset >= config.segmentSizeLimit {
                    // Under `.everysec` a full segment is synced and closed in the
                    // background: a rotation inside a group would otherwise hold the
                    // caller (an event loop, for the direct path) for an `fdatasync`.
                    if config.fsync == .everysec, !s.broken { retireInBackground(&s) } else { try closeSegment(&s) }
                    try openNextSegment(&s)
                }
                guard !records.isEmpty else { return Position(segment: s.sequence, offset: s.offset) }

                var heads: [UInt8] = []
                heads.reserveCapacity(records.count * 64)
                var pieces: [(head: Range<Int>, value: [UInt8])] = []
                pieces.reserveCapacity(records.count)
                for record in records {
                    let start = heads.count
                    let value = RecordCodec.appendHead(record, salt: s.salt, to: &heads)
                    if value.count < Self.inlineValueLimit {
                        // Copying a small value is cheaper than one more iovec for the
                        // kernel to walk (Benchmarks/RESULTS.md, "Journal I/O").
                        heads.append(contentsOf: value)
                        pieces.append((start..<heads.count, []))
                    } else {
                        pieces.append((start..<heads.count, value))
                    }
                }
                let total = heads.count + pieces.reduce(0) { $0 + $1.value.count }
                var failure: POSIX.Errno?
                if let mapping = s.mapping, s.offset + UInt64(total) <= UInt64(mapping.count) {
                    Self.copy(heads: heads, pieces: pieces, into: mapping, at: Int(s.offset))
                    s.stats.mappedGroups += 1
                } else {
                    if s.mapping != nil {
                        // The group does not fit in the mapping: the rest of the segment
                        // is written, after its records (`O_APPEND` writes at the end).
                        guard Self.unmap(&s) else {
                            s.broken = true
                            throw .cannotWriteJournal(path: segmentPath(s.sequence), errno: errno)
                        }
                    }
                    failure = write(heads: heads, pieces: pieces, fd: s.fd)
                }
                if let failure {
                    s.stats.failedAppends += 1
                    // Cut off whatever part of the group reached the file, so that the
                    // next group does not follow a torn record.
                    if ftruncate(s.fd, off_t(s.offset)) != 0 { s.broken = true }
                    throw .cannotWriteJournal(path: segmentPath(s.sequence), errno: failure.code)
                }
                s.offset += UInt64(total)
                s.stats.bytesWritten += UInt64(total)
                s.stats.countGroup(records.count)
                // A segment unlinked under us (its folder deleted) still takes writes, but
                // they would not survive a crash: one fstat per group tells.
                if Self.isUnlinked(s.fd) { noteLoss(&s) }
                switch config.fsync {
                case .always:
                    let started = MonotonicClock.nanoseconds()
                    if fdatasync(s.fd) != 0 {
                        let code = errno
                        s.stats.syncFailures += 1
                        s.stats.lastSyncErrno = code
                        throw .cannotWriteJournal(path: segmentPath(s.sequence), errno: code)
                    }
                    s.stats.syncs += 1
                    let lag = MonotonicClock.nanoseconds() - started
                    s.stats.lastSyncLagNanos = lag
                    s.stats.maxSyncLagNanos = max(s.stats.maxSyncLagNanos, lag)
                case .everysec:
                    if s.dirtySince == nil { s.dirtySince = MonotonicClock.nanoseconds() }
                case .never:
                    break
                }
                return Position(segment: s.sequence, offset: s.offset)
            }
        }

        /// True (once) when records appended before are no longer in the folder: the
        /// current segment was found unlinked after an append (the folder, or the segment,
        /// deleted under the daemon) or the folder was gone when a segment had to be
        /// opened (and was made again). The next append goes to a new segment in a folder
        /// that exists; the caller must append again whatever must survive a crash, the
        /// group just appended included if it went to the unlinked segment. Checked
        /// after every `append`.
        public func takeLoss() -> Bool {
            state.withLock { s in
                defer { s.lost = false }
                return s.lost
            }
        }

        /// Looks whether the current segment is still linked (for callers that have not
        /// appended for a while); a removed one is noted for `takeLoss`.
        public func checkSegment() {
            state.withLock { s in
                if s.fd >= 0, !s.broken, Self.isUnlinked(s.fd) { noteLoss(&s) }
            }
        }

        /// The position the next record will be written at (the current end).
        public var position: Position {
            state.withLock { Position(segment: $0.sequence, offset: $0.offset) }
        }

        public var stats: Stats { state.withLock { $0.stats } }

        /// Flushes the current segment to the device now (any policy).
        /// - Throws: `.cannotWriteJournal` with errno.
        public func sync() throws(CacheError) {
            // Full segments still being synced in the background come first.
            syncQueue.sync {}
            try locked { (s: inout State) throws(CacheError) in
                guard s.fd >= 0 else { return }
                try syncDirectoryIfNeeded(&s)
                let since = s.dirtySince
                let ok = fdatasync(s.fd) == 0
                let code = errno
                noteSync(ok: ok, errno: code, since: since, in: &s.stats)
                guard ok else { throw .cannotWriteJournal(path: segmentPath(s.sequence), errno: code) }
                s.dirtySince = nil
            }
        }

        /// Deletes every segment that lies wholly before `checkpoint` (sequence lower
        /// than the checkpoint's). Call after `Checkpoint.write(checkpoint, …)` has
        /// returned, never before: a segment goes only once the checkpoint past it is durable.
        /// - Returns: how many segments were deleted.
        /// - Throws: `.cannotRemoveCacheFile` with errno.
        @discardableResult
        public func deleteSegments(before checkpoint: Position) throws(CacheError) -> Int {
            let (current, isOpen) = state.withLock { ($0.sequence, $0.fd >= 0) }
            var deleted = 0
            for sequence in try SegmentName.list(in: directory)
            where sequence < checkpoint.segment && (sequence < current || !isOpen) {
                let path = segmentPath(sequence)
                if unlink(path) != 0, errno != ENOENT { throw .cannotRemoveCacheFile(path: path, errno: errno) }
                deleted += 1
            }
            let count = deleted
            state.withLock {
                $0.stats.segmentsDeleted += count
                $0.stats.liveSegments -= count
            }
            return deleted
        }

        /// Starts a new segment now, so that everything before can be checkpointed away.
        public func rotate() throws(CacheError) {
            try locked { (s: inout State) throws(CacheError) in
                try closeSegment(&s)
                try openNextSegment(&s)
            }
        }

        /// Closes the current segment (synced unless the policy is `.never`) without
        /// opening the next: the next append does. Until then the closed segment can be
        /// deleted like an older one, which is how a full disk gets its space back (a new
        /// segment could not be created before the old one goes).
        /// - Returns: the position just past the closed segment (the next one's start).
        @discardableResult
        public func retire() throws(CacheError) -> Position {
            try locked { (s: inout State) throws(CacheError) -> Position in
                try closeSegment(&s)
                return Position(segment: s.sequence + 1, offset: 0)
            }
        }

        /// Syncs (unless the policy is `.never`) and closes; later appends fail with EBADF.
        public func close() throws(CacheError) {
            timer?.cancel()
            try locked { (s: inout State) throws(CacheError) in
                guard !s.closed else { return }
                s.closed = true
                try closeSegment(&s)
            }
        }

        // MARK: - Internals (under `state`)

        /// `state.withLock` for a body with typed throws.
        private func locked<T>(_ body: (inout State) throws(CacheError) -> T) throws(CacheError) -> T {
            try state.withLock { s -> Result<T, CacheError> in
                do throws(CacheError) { return .success(try body(&s)) } catch { return .failure(error) }
            }.get()
        }

        private func segmentPath(_ sequence: UInt64) -> String { directory + "/" + SegmentName.name(sequence) }

        private func noteLoss(_ s: inout State) {
            s.lost = true
            s.broken = true
            s.unlinkedReported = true
            s.stats.segmentsLost += 1
        }

        /// Reserves `size` bytes (rounded up to whole pages) for the segment `fd` and maps
        /// them shared; nil, with the file as it was (`used` bytes), when either fails.
        private static func reserveAndMap(_ fd: Int32, size: UInt64, used: Int) -> UnsafeMutableRawBufferPointer? {
            let page = UInt64(sysconf(Int32(_SC_PAGESIZE)))
            let length = Int((size + page - 1) / page * page)
            guard hc_reserve(fd, Int64(length)) == 0 else {
                _ = ftruncate(fd, off_t(used))
                return nil
            }
            let base = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            guard let base, base != MAP_FAILED else {
                _ = ftruncate(fd, off_t(used))
                return nil
            }
            return UnsafeMutableRawBufferPointer(start: base, count: length)
        }

        /// Unmaps the current segment and cuts it back to its records, so that `O_APPEND`
        /// writes follow them. False when the cut failed (errno set); unmapped either way.
        @discardableResult
        private static func unmap(_ s: inout State) -> Bool {
            guard let mapping = s.mapping else { return true }
            munmap(mapping.baseAddress, mapping.count)
            s.mapping = nil
            return ftruncate(s.fd, off_t(s.offset)) == 0
        }

        /// Copies a framed group into `mapping` at `offset`: every payload first, then,
        /// behind a release fence, every frame header (see "Mapped segments"). The space
        /// is zero until then (reserved, never written), so until its header is stored
        /// a record reads as the end of the segment.
        private static func copy(
            heads: [UInt8], pieces: [(head: Range<Int>, value: [UInt8])], into mapping: UnsafeMutableRawBufferPointer,
            at offset: Int
        ) {
            let header = RecordCodec.frameHeaderSize
            heads.withUnsafeBytes { heads in
                var at = offset
                for piece in pieces {
                    let head = UnsafeRawBufferPointer(rebasing: heads[piece.head])
                    let body = UnsafeRawBufferPointer(rebasing: head[header...])
                    (mapping.baseAddress! + at + header).copyMemory(from: body.baseAddress!, byteCount: body.count)
                    at += head.count
                    piece.value.withUnsafeBytes { value in
                        if !value.isEmpty { (mapping.baseAddress! + at).copyMemory(from: value.baseAddress!, byteCount: value.count) }
                    }
                    at += piece.value.count
                }
                atomicMemoryFence(ordering: .releasing)
                at = offset
                for piece in pieces {
                    (mapping.baseAddress! + at).copyMemory(from: heads.baseAddress! + piece.head.lowerBound, byteCount: header)
                    at += piece.head.count + piece.value.count
                }
            }
        }

        private static func isUnlinked(_ fd: Int32) -> Bool {
            var st = stat()
            return fstat(fd, &st) == 0 && st.st_nlink == 0
        }

        private func openNextSegment(_ s: inout State) throws(CacheError) {
            let sequence = s.sequence + 1
            let path = segmentPath(sequence)
            // Read and write: a shared writable mapping needs both.
            var fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
            if fd < 0, errno == ENOENT, POSIX.makeDirectories(directory) == nil {
                // The folder vanished, with every segment in it: make it again, and tell
                // the caller (`takeLoss`) that what those segments held must be appended anew.
                if !s.unlinkedReported {
                    s.lost = true
                    s.stats.segmentsLost += 1
                }
                s.stats.liveSegments = 0
                fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
            }
            guard fd >= 0 else { throw .cannotWriteJournal(path: path, errno: errno) }
            let header = SegmentHeader(sequence: sequence, salt: UInt32.random(in: .min ... .max))
            if let e = header.encode().withUnsafeBytes({ POSIX.writeAll(fd, $0) }) {
                Glibc.close(fd)
                unlink(path)
                throw .cannotWriteJournal(path: path, errno: e.code)
            }
            switch config.fsync {
            case .always:
                // The new name must survive a power loss before records in it are trusted.
                try syncDirectory(directory)
            case .everysec:
                // As its records: within a second, by the background sync.
                s.directoryUnsynced = true
            case .never:
                break
            }
            s.fd = fd
            s.sequence = sequence
            s.salt = header.salt
            s.offset = UInt64(SegmentHeader.size)
            s.mapping = Self.reserveAndMap(fd, size: config.segmentSizeLimit, used: SegmentHeader.size)
            if s.mapping != nil { s.stats.mappedSegments += 1 }
            s.broken = false
            s.unlinkedReported = false
            s.stats.bytesWritten += UInt64(SegmentHeader.size)
            s.stats.segmentsCreated += 1
            s.stats.liveSegments += 1
        }

        /// Hands the current segment to `syncQueue`, which syncs and closes it: the next
        /// background sync's guarantee (a second at most) covers its last records, and
        /// `sync()` waits for it.
        private func retireInBackground(_ s: inout State) {
            guard s.fd >= 0 else { return }
            let fd = s.fd
            let since = s.dirtySince
            // The mapping goes now; the reserved space after the records goes with the
            // sync (a crash before leaves zeros, a clean end to recovery).
            let reserved = s.mapping != nil
            let end = off_t(s.offset)
            if let mapping = s.mapping { munmap(mapping.baseAddress, mapping.count) }
            s.mapping = nil
            s.fd = -1
            s.dirtySince = nil
            syncQueue.async { [weak self] in
                if reserved { _ = ftruncate(fd, end) }
                let ok = fdatasync(fd) == 0
                let code = errno
                Glibc.close(fd)
                guard let self else { return }
                state.withLock { s in noteSync(ok: ok, errno: code, since: since, in: &s.stats) }
            }
        }

        private func closeSegment(_ s: inout State) throws(CacheError) {
            guard s.fd >= 0 else { return }
            // A failed cut leaves zeros after the records: a clean end to recovery.
            Self.unmap(&s)
            let fd = s.fd
            s.fd = -1
            if config.fsync != .never {
                let since = s.dirtySince
                if fdatasync(fd) != 0 {
                    let code = errno
                    Glibc.close(fd)
                    throw .cannotWriteJournal(path: segmentPath(s.sequence), errno: code)
                }
                noteSync(ok: true, errno: 0, since: since, in: &s.stats)
                s.dirtySince = nil
                Glibc.close(fd)
                // A closed segment's records are synced only once its name is; a broken
                // one (unlinked with its folder, or not cut back) is abandoned, its name
                // of no use.
                if !s.broken { try syncDirectoryIfNeeded(&s) }
                return
            }
            Glibc.close(fd)
        }

        /// Syncs the folder when a segment was created in it since it was last synced
        /// (`.everysec` leaves that to the background sync; a caller who needs it now
        /// does it here). Under the lock.
        private func syncDirectoryIfNeeded(_ s: inout State) throws(CacheError) {
            guard s.directoryUnsynced else { return }
            do throws(CacheError) {
                try syncDirectory(directory)
            } catch {
                s.stats.syncFailures += 1
                throw error
            }
            s.directoryUnsynced = false
        }

        /// Counts an `fdatasync` that covered the appends made since `since` (nil: none
        /// were pending): a sync and its lag, or a failure and its errno.
        private func noteSync(ok: Bool, errno code: Int32, since: UInt64?, in stats: inout Stats) {
            if ok {
                stats.syncs += 1
                if let since { recordLag(since: since, in: &stats) }
            } else {
                stats.syncFailures += 1
                stats.lastSyncErrno = code
            }
        }

        private func write(heads: [UInt8], pieces: [(head: Range<Int>, value: [UInt8])], fd: Int32) -> POSIX.Errno? {
            heads.withUnsafeBytes { (headBytes) -> POSIX.Errno? in
                if !vectored {
                    var joined = [UInt8]()
                    joined.reserveCapacity(heads.count + pieces.reduce(0) { $0 + $1.value.count })
                    for piece in pieces {
                        joined.append(contentsOf: headBytes[piece.head])
                        joined.append(contentsOf: piece.value)
                    }
                    return joined.withUnsafeBytes { POSIX.writeAll(fd, $0) }
                }
                // One writev per chunk of records (IOV_MAX is 1024 buffers, two per record).
                var first = 0
                while first < pieces.count {
                    let chunk = pieces[first..<min(pieces.count, first + 500)]
                    var collected: [UnsafeRawBufferPointer] = []
                    collected.reserveCapacity(chunk.count * 2)
                    if let failure = Self.withBuffers(chunk[...], headBytes, &collected, { POSIX.writevAll(fd, $0) }) {
                        return failure
                    }
                    first += chunk.count
                }
                return nil
            }
        }

        /// Calls `body` with each piece's head and value as buffers, nesting one
        /// `withUnsafeBytes` per value so every pointer is valid for the whole call.
        private static func withBuffers(
            _ pieces: ArraySlice<(head: Range<Int>, value: [UInt8])>, _ heads: UnsafeRawBufferPointer,
            _ collected: inout [UnsafeRawBufferPointer], _ body: ([UnsafeRawBufferPointer]) -> POSIX.Errno?
        ) -> POSIX.Errno? {
            guard let piece = pieces.first else { return body(collected) }
            return piece.value.withUnsafeBytes { value in
                collected.append(UnsafeRawBufferPointer(rebasing: heads[piece.head]))
                collected.append(value)
                return withBuffers(pieces.dropFirst(), heads, &collected, body)
            }
        }

        /// The `.everysec` timer: syncs a duplicate descriptor outside the lock.
        private func syncInBackground() {
            let taken = state.withLock { s -> (fd: Int32, since: UInt64, directory: Bool)? in
                guard !s.closed, s.fd >= 0, let since = s.dirtySince else { return nil }
                s.dirtySince = nil
                defer { s.directoryUnsynced = false }
                return (dup(s.fd), since, s.directoryUnsynced)
            }
            guard let taken, taken.fd >= 0 else { return }
            let (fd, since, directory) = taken
            if directory {
                // The segment's name first: its records are trusted only once it is there.
                do throws(CacheError) { try syncDirectory(self.directory) } catch {
                    state.withLock { s in
                        s.stats.syncFailures += 1
                        s.directoryUnsynced = true
                    }
                }
            }
            let ok = fdatasync(fd) == 0
            let code = errno
            Glibc.close(fd)
            state.withLock { s in
                noteSync(ok: ok, errno: code, since: since, in: &s.stats)
                if !ok, s.dirtySince == nil { s.dirtySince = since }  // try again next tick
            }
        }

        private func recordLag(since: UInt64, in stats: inout Stats) {
            let lag = MonotonicClock.nanoseconds() &- since
            stats.lastSyncLagNanos = lag
            stats.maxSyncLagNanos = max(stats.maxSyncLagNanos, lag)
        }
    }
}

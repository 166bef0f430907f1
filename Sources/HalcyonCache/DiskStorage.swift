// The disk tier: one key -> one file in one folder, with the entry's expiration, last
// access, flags, key and version kept in the file itself, so they survive restarts
// without a database.
// Writes are atomic (temp file + rename), except the write-behind's rewrites in place
// (DiskStorage+InPlace.swift), which a checksum and the journal make safe instead.
// One folder, `<root>/<name>` (default root `$XDG_CACHE_HOME/halcyon`, else
// `~/.cache/halcyon`); C shims in Sources/CHalcyonSystem.
//
// Atomic writes. `store` writes `<folder>/.tmp-<instance token>-<counter>` with
// `O_CREAT|O_EXCL` (mode 0600), writes header, key and value, sets atime/mtime with
// `futimens` after the last write (a write would move mtime), optionally `fsync`s,
// closes, and `rename`s it over the target; with `synchronousWrites` it also `fsync`s the
// folder so the rename is durable. A reader opens the old inode or the new one, never a
// part; a kill mid-write leaves the old value plus a temp file.
// - Temp names cannot collide with cache names: hashed names are hex, and
//   `validate(key:)` refuses plain keys starting with `.tmp-`. The start-up scan deletes
//   every `.tmp-*` whose token is not this instance's (another live process sharing the
//   folder would see its rename fail with ENOENT and take the retry below).
// - A folder deleted under a running process: an `open` or `rename` failing with ENOENT
//   makes `store` recreate the folder (`mkdir -p`, mode 0700) and retry once. Reads of
//   a vanished folder are misses; `count`/`totalSize` are 0.
// - Errors carry errno and the target path (`.cannotCreateCacheFile` for open, write,
//   fsync, close, rename: ENOSPC, EACCES, EROFS...; `.cannotSetCacheFileAttribute` for
//   futimens); the temp file is removed on every failure.
// - A `rename` over an existing file dominates a store (ext4's `auto_da_alloc` starts
//   writeback of the new file when it replaces another), and an `fsync` costs several
//   times a whole store (Benchmarks/RESULTS.md, "Disk stores: rename and fsync"). Hence
//   `synchronousWrites` is off by default: a cache may lose the last values on power
//   loss, never get a torn one.
//
// Reads. Every read goes through `value(forKey:referenceDate:actuallyLoad:
// extendingExpiration:forcedExtension:)`: maybeCached check, `open(O_NOATIME|O_NOFOLLOW|
// O_NONBLOCK)`, `fstat` (regular file? size, mtime, atime), expired at `referenceDate`
// (expiration <= reference) is a miss, one `pread` of header and key (up to 208 key
// bytes), sizes and key checked, with `actuallyLoad` a `pread` of the value straight into
// its array and the CRC32C checked, the extension, close. `isCached` and `meta` pass
// `actuallyLoad: false` and `.none`.
//
// Sliding `cacheTime`: new expiration = now + (stored expiration - stored last access),
// rounded up, last access = now (+ shift); an absolute lifetime stays (see `FileTimes`).
// Applied with one `futimens` on the descriptor the read already holds, right after the
// bytes are in memory, not through a deferred queue: it costs one syscall (Benchmarks/
// RESULTS.md, "Disk reads: the sliding extension inside the read") and no
// pending-extension map every reader would consult under a lock; it changes the inode,
// so every later lookup from any thread sees it (test
// `slidingCacheTimeKeepsTheOriginalTimeToLive`); and it touches only the inode that was
// read, never a new value a store renamed over the key meanwhile. The hybrid cache reads
// with `.none` and keeps extensions in memory (written back lazily); the in-read
// extension serves direct users of the disk tier. A failed extension is dropped.
// `.expirationTime(e)` with an `e` already over sets mtime to 1970 on that inode (the
// value is returned, later reads miss, `removeExpiredValues` deletes it) rather than
// unlinking by name, which could delete a value a concurrent store just put there.
// `touch` is the same without reading the value; it counts as an access; an expiration
// already over removes the file and returns the meta with `Date.distantPast`.
//
// Not ready. At init the backend creates `<root>/<name>` (and missing parents) and
// checks `access(W_OK|X_OK)`. If that fails (a file in its place or in place of a
// parent, no permission, a read-only or immutable folder), `isReady` is false for the
// backend's lifetime, nothing crashes, and every call throws `.diskStorageIsNotReady`.
// Tests run as root, which ignores `chmod 000`: the permission case is tested with an
// immutable folder (`chattr +i`), skipped with a message where `chattr` is missing.
//
// Locks: `configBox` and the maybeCached lock are `Locked` (pthread mutexes, which
// ThreadSanitizer sees, so `swift test --sanitize=thread` proves something here).

import CHalcyonSystem
import Dispatch
import Foundation
import HalcyonSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The disk tier's namespace: `Backend` does the I/O, `Config` describes it, `FileMeta`
/// is what it knows about an entry.
///
/// ```swift
/// let disk = DiskStorage.Backend(config: .init(name: "main", sizeLimit: 1 << 30))
/// try disk.store(value: Array("hi".utf8), flags: 1, forKey: "greeting", expiration: .seconds(60), version: 7)
/// let entry = try disk.value(forKey: "greeting")   // CacheEntry(bytes: "hi", flags: 1, version: 7)
/// ```
public enum DiskStorage {}

extension DiskStorage {
    /// The disk tier's engine: synchronous, blocking file I/O on the caller's thread.
    ///
    /// Threading: every method may be called from any thread at once. The hybrid cache
    /// calls it on its serial ioQueue, and readers call it directly for
    /// `loadDiskFileSynchronously`; nothing here calls back. Shared state is guarded as
    /// follows, which is what makes the `@unchecked Sendable` true: `configBox` guards
    /// the configuration; `knownNames` guards itself with its own lock (the maybeCached lock);
    /// every other stored property is an immutable `let` or atomic.
    /// Files are replaced by `rename`, so a reader holding an open file sees one whole
    /// value, except when a caller asks for `FileReplacement.inPlace`: then a reader that
    /// opens the file during the rewrite may see a part, and the caller must keep such
    /// readers away (the local store does: see `LocalStore.WriteBehind.materializeSlice`).
    ///
    /// Invariants: `directoryURL` is fixed at init. If the folder could not be created or
    /// used then, `isReady` is false for the backend's lifetime and every call throws
    /// `.diskStorageIsNotReady` (`isCached` answers false). A folder deleted later is
    /// recreated by the next store.
    // @unchecked Sendable: configBox and the maybeCached lock guard all mutable state.
    public final class Backend: @unchecked Sendable {
        /// The configuration `config` reads and replaces, behind its own lock.
        private let configBox: Locked<Config>
        /// The cache folder, `<root>/<name>`, fixed at init.
        public let directoryURL: URL
        let directoryPath: String
        /// Why the folder is unusable (errno), or nil when it is ready.
        private let notReadyErrno: Int32?
        /// The maybeCached set; see `KnownFileNames` for its lock and invariants.
        let knownNames = KnownFileNames()
        /// Marks this instance's temporary files so its start-up scan spares them.
        private let instanceToken: String
        private let temporaryCounter = Atomic<UInt64>(0)
        /// How many times a lookup went to the disk (open of a cache file); tests read
        /// it to prove that the maybeCached shortcut answered a miss without a syscall.
        let diskLookups = Atomic<Int>(0)
        /// Files found damaged on read (wrong length, bad checksum, impossible header):
        /// each was a miss and was removed.
        let corruptions = Atomic<Int>(0)
        /// Non-regular entries (FIFO, socket, device, folder) met where a
        /// cache file was looked up: each was a miss and was left alone.
        let foreignEntries = Atomic<Int>(0)

        /// How many damaged cache files reads have found and removed (`diskCorruptions`).
        public var corruptionCount: Int { corruptions.load(ordering: .relaxed) }
        /// How many non-regular entries lookups have met and skipped.
        public var foreignEntryCount: Int { foreignEntries.load(ordering: .relaxed) }
        /// Runs the initial scan; one per backend so that a held scan (test hook) cannot
        /// delay another backend's.
        private let scanQueue: DispatchQueue

        /// The configuration. Reads and writes are thread-safe (`configBox`); a new
        /// `name` or `directory` is ignored, as the folder is fixed at init.
        public var config: Config {
            get { configBox.withLock { $0 } }
            set { configBox.withLock { $0 = newValue } }
        }

        /// The configuration's clock, read alone: a read that asks the time copied the whole
        /// `Config` for it, a counted reference for each of its strings, URLs and closures.
        var clock: any CacheClock { configBox.withLock { $0.clock } }

        /// `checkedFileName(forKey:forcedExtension:config:)` under the configuration as it
        /// is, read in place for the same reason as `clock`.
        func checkedFileName(forKey key: CacheKey, forcedExtension: String?) throws(CacheError) -> String {
            try configBox.withLock { config in
                Result { () throws(CacheError) in
                    try checkedFileName(forKey: key, forcedExtension: forcedExtension, config: config)
                }
            }.get()
        }

        /// `cacheFileName(forKey:forcedExtension:config:)` under the configuration as it is,
        /// read in place for the same reason as `clock`. Does not check the key.
        func cacheFileName(forKey key: CacheKey, forcedExtension: String?) -> String {
            configBox.withLock { cacheFileName(forKey: key, forcedExtension: forcedExtension, config: $0) }
        }

        /// What a file write reads of the configuration, read together with the file's name
        /// (`checkedFileName`) under one hold of its lock: the whole `Config` copied counts
        /// a reference for each of its strings, URLs and closures.
        struct WriteSettings {
            let clock: any CacheClock
            let expiration: StorageExpiration
            let synchronousWrites: Bool
        }

        /// The checked file name of `key` and the write settings, under one hold of the
        /// configuration's lock.
        func namedWithSettings(forKey key: CacheKey, forcedExtension: String?) throws(CacheError) -> (String, WriteSettings) {
            try configBox.withLock { config in
                Result { () throws(CacheError) in
                    let name = try checkedFileName(forKey: key, forcedExtension: forcedExtension, config: config)
                    return (name, WriteSettings(
                        clock: config.clock, expiration: config.expiration, synchronousWrites: config.synchronousWrites))
                }
            }.get()
        }

        /// The configured expiration alone. Every store without one of its own reads it,
        /// and a copy of the whole configuration (its strings and closures retained, then
        /// released) costs more than the lock.
        public var defaultExpiration: StorageExpiration { configBox.withLock { $0.expiration } }

        /// False when the folder could not be created or used at init.
        public var isReady: Bool { notReadyErrno == nil }

        /// Why the folder could not be used at init (its errno); nil when ready.
        public var notReadyError: Int32? { notReadyErrno }

        /// True once the start-up scan has built the maybeCached set; until then every
        /// lookup goes to the disk.
        public var isInitialScanComplete: Bool { knownNames.isScanComplete }

        /// Creates the folder if needed and starts the background scan that builds the
        /// maybeCached set and deletes stale temporary files. Never throws and never
        /// blocks on the scan: a folder it cannot use makes the backend not ready.
        /// - Parameter config: the configuration; see `DiskStorage.Config` for defaults.
        public init(config: Config) {
            configBox = Locked(config)
            directoryURL = config.resolvedRoot.appendingPathComponent(config.name, isDirectory: true)
            directoryPath = directoryURL.path
            instanceToken = String(UInt64.random(in: .min ... .max), radix: 16)
            scanQueue = DispatchQueue(label: "com.halcyon.DiskStorage.Backend.initialScan", qos: .utility)

            if let failure = POSIX.makeDirectories(directoryPath) {
                notReadyErrno = failure.code
            } else if access(directoryPath, W_OK | X_OK) != 0 {
                notReadyErrno = errno  // read-only file system, immutable folder, no permission
            } else {
                notReadyErrno = nil
            }

            guard notReadyErrno == nil else {
                knownNames.abandonScan()
                return
            }
            let (path, token, names, hook) = (directoryPath, instanceToken, knownNames, config.initialScanWillStart)
            scanQueue.async {
                Backend.initialScan(path: path, keepingTemporaryToken: token, into: names, hook: hook)
            }
        }

        /// Blocks until the start-up scan has finished. For tests and for callers that
        /// want the shortcut warm before serving; requests never need to wait.
        public func waitForInitialScan() {
            knownNames.waitForScan()
        }

        // MARK: - Store

        /// Writes a value and its metadata atomically: readers see the old value or the
        /// new one, never a part.
        ///
        /// - Parameters:
        ///   - value: the bytes to keep.
        ///   - flags: opaque word stored with them (default 0).
        ///   - key: the key; named by `cacheFileURL(forKey:forcedExtension:)`.
        ///   - expiration: default `config.expiration`; rounded up to a whole second.
        ///   - forcedExtension: overrides `config.pathExtension` for this file.
        ///   - referenceDate: "now" for the expiration; default `config.clock.now()`.
        ///   - version: the entry's version, kept in the file (default 0); the write path
        ///     takes it from a `VersionClock`.
        /// - Returns: the stored entry's meta, or nil when `expiration` is already over
        ///   (nothing is written and an existing value is left as it is).
        /// - Throws: `.diskStorageIsNotReady`, `.invalidKey`, `.cannotCreateCacheFile`
        ///   (with errno: ENOSPC, EACCES, ...), `.cannotSetCacheFileAttribute`.
        @discardableResult
        public func store(
            value: [UInt8], flags: UInt32 = 0, forKey key: CacheKey, expiration: StorageExpiration? = nil,
            forcedExtension: String? = nil, referenceDate: Date? = nil, version: UInt64 = 0
        ) throws(CacheError) -> FileMeta? {
            try store(value: value, flags: flags, forKey: key, expiration: expiration, forcedExtension: forcedExtension,
                      referenceDate: referenceDate, version: version, replacing: .rename)
        }

        /// `store`, choosing how an existing file is replaced (see `FileReplacement`):
        /// `.inPlace` only for callers that can vouch for what a torn file would cost.
        /// Keeps `knownNames` and `synchronousWrites` exactly as `.rename` does.
        /// `absolute`: whether the lifetime ends at a fixed instant (see
        /// `FileTimes.planned`); nil derives it from the expiration (`.date`).
        @discardableResult
        func store(
            value: [UInt8], flags: UInt32, forKey key: CacheKey, expiration: StorageExpiration?,
            forcedExtension: String?, referenceDate: Date?, version: UInt64, replacing: FileReplacement,
            absolute: Bool? = nil
        ) throws(CacheError) -> FileMeta? {
            try checkReady()
            let (name, settings) = try namedWithSettings(forKey: key, forcedExtension: forcedExtension)
            let now = referenceDate ?? settings.clock.now()
            guard let times = FileTimes.planned(expiration ?? settings.expiration, now: now, absolute: absolute)
            else { return nil }
            let keyBytes = Array(key.utf8)
            guard keyBytes.count <= FileHeader.maximumKeyLength else { throw .invalidKey(key: key) }
            let header = value.withUnsafeBytes {
                FileHeader.encode(flags: flags, version: version, ttlNanos: times.ttlNanos, key: keyBytes, value: $0)
            }
            let contents = FileContents(header: header, key: keyBytes, value: value)

            let synchronous = settings.synchronousWrites
            func write() throws(CacheError) -> Bool {
                switch replacing {
                case .rename: try writeFile(named: name, contents: contents, times: times, synchronous: synchronous)
                case .inPlace: try rewriteFile(named: name, contents: contents, times: times, synchronous: synchronous)
                }
            }
            if try !write() {
                // The folder was deleted under us: recreate it and retry once.
                if let failure = POSIX.makeDirectories(directoryPath) {
                    throw .cannotCreateCacheFile(path: path(of: name), errno: failure.code)
                }
                if try !write() {
                    throw .cannotCreateCacheFile(path: path(of: name), errno: ENOENT)
                }
            }
            knownNames.insert(name)
            return FileMeta(folder: directoryURL, name: name, size: UInt64(value.count), flags: flags,
                            expiration: times.expirationDate, lastAccess: times.lastAccessDate,
                            fileSize: UInt64(header.count + keyBytes.count + value.count), version: version,
                            isAbsolute: times.isAbsolute)
        }

        /// The three pieces of a cache file, written with one `writev`.
        struct FileContents {
            var header: [UInt8]
            var key: [UInt8]
            var value: [UInt8]

            var fileSize: Int { header.count + key.count + value.count }

            /// Writes all three at the descriptor's offset (0 on a fresh descriptor).
            func write(to fd: Int32) -> POSIX.Errno? {
                header.withUnsafeBytes { header in
                    key.withUnsafeBytes { key in
                        value.withUnsafeBytes { value in POSIX.writevAll(fd, [header, key, value]) }
                    }
                }
            }
        }

        /// Writes a temporary file, dates it, and renames it over the target. Returns
        /// false when the folder is missing (ENOENT), so the caller can recreate it.
        func writeFile(
            named name: String, contents: FileContents, times: FileTimes, synchronous: Bool
        ) throws(CacheError) -> Bool {
            let finalPath = path(of: name)
            let sequence = temporaryCounter.add(1, ordering: .relaxed).newValue
            let temporaryPath = path(of: DiskStorage.temporaryPrefix + instanceToken + "-" + String(sequence))

            let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd < 0 {
                let code = errno
                if code == ENOENT { return false }
                throw .cannotCreateCacheFile(path: finalPath, errno: code)
            }
            if let failure = fill(fd, with: contents, times: times, synchronous: synchronous, path: finalPath) {
                unlink(temporaryPath)
                throw failure
            }
            if rename(temporaryPath, finalPath) != 0 {
                let code = errno
                unlink(temporaryPath)
                if code == ENOENT { return false }
                throw .cannotCreateCacheFile(path: finalPath, errno: code)
            }
            if synchronous {
                // The rename itself is durable only once the folder is flushed.
                try syncFolder(for: finalPath)
            }
            return true
        }

        /// Flushes the folder, so that a new name in it survives a power cut.
        func syncFolder(for finalPath: String) throws(CacheError) {
            let dirfd = open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard dirfd >= 0 else { return }
            let ok = fsync(dirfd) == 0
            let code = errno
            close(dirfd)
            if !ok { throw .cannotCreateCacheFile(path: finalPath, errno: code) }
        }

        /// Writes `contents` at the start of the open file `fd`, cuts what an older, longer
        /// file left beyond them (`truncatingFrom`: the old size), dates the file (after the
        /// last write: a write would move mtime again), fsyncs it if `synchronous`, and closes
        /// it. Returns the first failure; `fd` is closed either way.
        func fill(
            _ fd: Int32, with contents: FileContents, times: FileTimes, synchronous: Bool, path: String,
            truncatingFrom oldSize: Int = 0
        ) -> CacheError? {
            var failure: CacheError?
            if let e = contents.write(to: fd) {
                failure = .cannotCreateCacheFile(path: path, errno: e.code)
            } else if oldSize > contents.fileSize, ftruncate(fd, off_t(contents.fileSize)) != 0 {
                failure = .cannotCreateCacheFile(path: path, errno: errno)
            } else if let e = POSIX.setTimes(fd, times) {
                failure = .cannotSetCacheFileAttribute(path: path, errno: e.code)
            } else if synchronous, fsync(fd) != 0 {
                failure = .cannotCreateCacheFile(path: path, errno: errno)
            }
            if close(fd) != 0, failure == nil {
                failure = .cannotCreateCacheFile(path: path, errno: errno)
            }
            return failure
        }

        // MARK: - Read

        /// Loads a value, extending its expiration as asked.
        /// - Parameters:
        ///   - key: the key.
        ///   - forcedExtension: must match the one it was stored with.
        ///   - extendingExpiration: default `.cacheTime` (sliding).
        /// - Returns: the entry, or nil when missing or expired.
        /// - Throws: `.diskStorageIsNotReady`, `.invalidKey`, `.cannotLoadDataFromDisk`.
        public func value(
            forKey key: CacheKey, forcedExtension: String? = nil, extendingExpiration: ExpirationExtending = .cacheTime
        ) throws(CacheError) -> CacheEntry? {
            try value(forKey: key, referenceDate: clock.now(), actuallyLoad: true,
                      extendingExpiration: extendingExpiration, forcedExtension: forcedExtension)?.entry
        }

        /// Loads a value and its meta (after any extension); nil when missing or expired.
        /// `referenceDate` defaults to `config.clock.now()`.
        public func valueAndMeta(
            forKey key: CacheKey, referenceDate: Date? = nil, extendingExpiration: ExpirationExtending = .cacheTime,
            forcedExtension: String? = nil
        ) throws(CacheError) -> (entry: CacheEntry, meta: FileMeta)? {
            guard let found = try value(forKey: key, referenceDate: referenceDate ?? clock.now(), actuallyLoad: true,
                                        extendingExpiration: extendingExpiration, forcedExtension: forcedExtension),
                  let entry = found.entry
            else { return nil }
            return (entry, found.meta)
        }

        /// Whether an unexpired entry exists at `referenceDate` (default now). Never
        /// loads the value and never extends; false on any error, not-ready included.
        public func isCached(forKey key: CacheKey, referenceDate: Date? = nil, forcedExtension: String? = nil) -> Bool {
            let found = try? value(forKey: key, referenceDate: referenceDate ?? clock.now(), actuallyLoad: false,
                                   extendingExpiration: .none, forcedExtension: forcedExtension)
            return found != nil
        }

        /// The meta of an unexpired entry at `referenceDate` (default now), without
        /// loading the value or extending it; nil when missing or expired.
        public func meta(forKey key: CacheKey, referenceDate: Date? = nil, forcedExtension: String? = nil) throws(CacheError) -> FileMeta? {
            try value(forKey: key, referenceDate: referenceDate ?? clock.now(), actuallyLoad: false,
                      extendingExpiration: .none, forcedExtension: forcedExtension)?.meta
        }

        /// The one lookup every read goes through.
        ///
        /// The sliding extension is applied with one `futimens` on the descriptor the
        /// read already holds, right after the bytes are in memory: it changes the inode
        /// itself, so every later lookup from any thread sees it, with no pending state
        /// to consult, and a value replaced meanwhile by a store (a new inode) is not
        /// touched. An extension that fails is dropped: the read has succeeded.
        ///
        /// - Returns: nil on a miss (absent from maybeCached, no file, expired at
        ///   `referenceDate`, or not a file this tier wrote); otherwise the entry (nil
        ///   unless `actuallyLoad`) and the meta after extension.
        func value(
            forKey key: CacheKey, referenceDate: Date, actuallyLoad: Bool, extendingExpiration: ExpirationExtending,
            forcedExtension: String?
        ) throws(CacheError) -> (entry: CacheEntry?, meta: FileMeta)? {
            try checkReady()
            let name = try checkedFileName(forKey: key, forcedExtension: forcedExtension)
            guard knownNames.mayContain(name) else { return nil }
            let path = path(of: name)

            diskLookups.add(1, ordering: .relaxed)
            let fd = hc_open_cache_file(path, 0)
            if fd < 0 {
                let code = errno
                if code == ENOENT || code == ENOTDIR { return nil }
                if code == ENXIO {
                    // A socket: not ours.
                    foreignEntries.add(1, ordering: .relaxed)
                    return nil
                }
                // ELOOP is a symbolic link, never followed: an error the operator sees
                // (`cannotLoadDataFromDisk`, errno ELOOP) until a store of the key
                // renames a real file over it.
                throw .cannotLoadDataFromDisk(path: path, errno: code)
            }
            defer { close(fd) }
            let status: POSIX.Status
            switch POSIX.fstat(fd) {
            case .success(let s): status = s
            case .failure(let e): throw .cannotLoadDataFromDisk(path: path, errno: e.code)
            }
            guard status.isRegular else {
                // A FIFO or device opened without blocking (O_NONBLOCK); never read from it.
                foreignEntries.add(1, ordering: .relaxed)
                return nil
            }
            if status.times.isExpired(atNanos: FileTimes.nanos(referenceDate)) { return nil }

            var file: OpenedFile?
            var entry: CacheEntry?
            if actuallyLoad {
                switch try readExpected(fd: fd, path: path, status: status, key: key) {
                case .loaded(let found, let bytes):
                    file = found
                    entry = CacheEntry(bytes: bytes, flags: found.flags, version: found.version)
                case .miss:
                    return nil
                case .corrupt:
                    discardCorrupt(name: name, status: status)
                    return nil
                case .otherLayout:
                    break
                }
            }
            if file == nil {
                switch try readHeader(fd: fd, path: path, status: status, key: key) {
                case .found(let found): file = found
                case .miss: return nil
                case .corrupt:
                    discardCorrupt(name: name, status: status)
                    return nil
                }
            }
            guard let file else { return nil }

            if actuallyLoad && entry == nil {
                let valueSize = file.valueSize
                var readError: Int32 = 0
                var complete = true
                let bytes = [UInt8](unsafeUninitializedCapacity: valueSize) { buffer, initialized in
                    switch POSIX.readFully(fd, into: UnsafeMutableRawBufferPointer(buffer), from: file.valueOffset) {
                    case .success(let n): initialized = n; complete = n == valueSize
                    case .failure(let e): initialized = 0; readError = e.code
                    }
                }
                if readError != 0 { throw .cannotLoadDataFromDisk(path: path, errno: readError) }
                if let expected = file.checksum {
                    let actual = file.headerBytes.withUnsafeBytes { header in
                        file.keyBytes.withUnsafeBytes { key in
                            bytes.withUnsafeBytes { FileHeader.computeChecksum(header: header, key: key, value: $0) }
                        }
                    }
                    complete = complete && actual == expected
                }
                guard complete else {
                    // Shrunk under us, or damaged: either way not the value that was stored.
                    discardCorrupt(name: name, status: status)
                    return nil
                }
                entry = CacheEntry(bytes: bytes, flags: file.flags, version: file.version)
            }

            var times = status.times
            switch extendingExpiration {
            case .none:
                break
            case .cacheTime:
                times = times.slid(to: referenceDate, recordedTTLNanos: file.ttlNanos)
            case .expirationTime(let expiration):
                // An expiration already over expires the entry in place (mtime in 1970)
                // rather than unlinking by name, which could delete a value a
                // concurrent store has just renamed over this one.
                times = FileTimes.planned(expiration, now: referenceDate)
                    ?? FileTimes(expirationSeconds: 0, lastAccessNanos: FileTimes.nanos(referenceDate))
            }
            if times != status.times, POSIX.setTimes(fd, times) != nil {
                times = status.times
            }
            let meta = FileMeta(folder: directoryURL, name: name, size: UInt64(file.valueSize), flags: file.flags,
                                expiration: times.expirationDate,
                                lastAccess: times.lastAccessDate,
                                fileSize: status.fileSize, version: file.version, isAbsolute: times.isAbsolute)
            return (entry, meta)
        }

        // MARK: - Touch and remove

        /// Gives an existing entry a new expiration counted from now, without reading or
        /// rewriting its value; counts as an access.
        /// - Parameters:
        ///   - expiration: default `config.expiration`; `.expired` (or any already over)
        ///     removes the entry.
        ///   - keepingAbsolute: true when `expiration` is only a default: an entry whose
        ///     lifetime is absolute (`FileMeta.isAbsolute`) then keeps it, and the touch
        ///     counts as an access only.
        /// - Returns: the meta after the touch (for a removal, with `expiration` set to
        ///   `Date.distantPast`), or nil when the entry is missing or already expired.
        /// - Throws: `.diskStorageIsNotReady`, `.invalidKey`, `.cannotLoadDataFromDisk`,
        ///   `.cannotSetCacheFileAttribute`, `.cannotRemoveCacheFile`.
        public func touch(
            forKey key: CacheKey, expiration: StorageExpiration? = nil, forcedExtension: String? = nil,
            keepingAbsolute: Bool = false
        ) throws(CacheError) -> FileMeta? {
            let now = clock.now()
            guard let found = try value(forKey: key, referenceDate: now, actuallyLoad: false,
                                        extendingExpiration: .none, forcedExtension: forcedExtension)
            else { return nil }
            var meta = found.meta
            let (name, settings) = try namedWithSettings(forKey: key, forcedExtension: forcedExtension)
            let kept = keepingAbsolute && meta.isAbsolute
                ? FileTimes(expirationSeconds: Int64(meta.expiration.timeIntervalSince1970),
                            lastAccessNanos: FileTimes.nanos(now), isAbsolute: true)
                : nil
            guard let times = kept ?? FileTimes.planned(expiration ?? settings.expiration, now: now) else {
                _ = try removeFile(named: name)
                meta.expiration = .distantPast
                return meta
            }
            let path = path(of: name)
            // Times are set on the open descriptor: never through a link, never on a FIFO.
            let fd = hc_open_cache_file(path, 0)
            if fd < 0 {
                let code = errno
                if code == ENOENT || code == ENXIO { return nil }
                throw .cannotLoadDataFromDisk(path: path, errno: code)
            }
            defer { close(fd) }
            guard case .success(let status) = POSIX.fstat(fd), status.isRegular else { return nil }
            if let e = POSIX.setTimes(fd, times) {
                throw .cannotSetCacheFileAttribute(path: path, errno: e.code)
            }
            meta.expiration = times.expirationDate
            meta.lastAccess = times.lastAccessDate
            meta.isAbsolute = times.isAbsolute
            return meta
        }

        /// Removes one entry.
        /// - Returns: true when a file was removed.
        /// - Throws: `.diskStorageIsNotReady`, `.invalidKey`, `.cannotRemoveCacheFile`.
        @discardableResult
        public func remove(forKey key: CacheKey, forcedExtension: String? = nil) throws(CacheError) -> Bool {
            try checkReady()
            let name = try checkedFileName(forKey: key, forcedExtension: forcedExtension)
            guard knownNames.mayContain(name) else { return false }
            return try removeFile(named: name)
        }

        /// Unlinks one cache file and keeps maybeCached current. True when it existed.
        func removeFile(named name: String) throws(CacheError) -> Bool {
            let path = path(of: name)
            var removed = true
            if unlink(path) != 0 {
                let code = errno
                guard code == ENOENT || code == EISDIR else { throw .cannotRemoveCacheFile(path: path, errno: code) }
                removed = false
            }
            knownNames.eraseIfAbsent(name) { POSIX.exists(path) }
            return removed
        }

        // MARK: - Names

        /// The URL of the file a key is (or would be) stored in. Does not check the key.
        public func cacheFileURL(forKey key: CacheKey, forcedExtension: String? = nil) -> URL {
            url(of: cacheFileName(forKey: key, forcedExtension: forcedExtension))
        }

        /// Which keys this tier can name files with (see `DiskStorage.KeyRule`).
        public var keyRule: DiskStorage.KeyRule { DiskStorage.KeyRule(config) }

        /// Checks that a key can name a file.
        /// - Throws: `.invalidKey` when `usesHashedFileName` is false and the key is not a
        ///   safe single file name: empty, `.`, `..`, containing `/` or NUL, longer than
        ///   255 bytes (with the path extension, if any), or starting with the reserved
        ///   temporary prefix `.tmp-`.
        public func validate(key: CacheKey) throws(CacheError) {
            try keyRule.check(key)
        }

        func checkReady() throws(CacheError) {
            if let notReadyErrno { throw .diskStorageIsNotReady(path: directoryPath, errno: notReadyErrno) }
        }

        func path(of name: String) -> String { directoryPath + "/" + name }

        func url(of name: String) -> URL { directoryURL.appendingPathComponent(name, isDirectory: false) }
    }
}

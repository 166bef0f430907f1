// How an entry's metadata lives on disk: expiration in mtime, last access in atime,
// flags, key and version in a header at the start of the file (DiskStorage+FileFormat.swift). Also the arithmetic that turns
// expirations into file times (rounding up, sliding, the "never" sentinel).
//
// Where each fact lives, and why. Linux cannot set a file's creation time, so
// Kingfisher's trick (creation date = last access) does not carry over. Everything is
// kept in the file and its inode, with no database, so it survives restarts and `cp -a`:
// - expiration: mtime, whole seconds rounded UP; mtime's nanoseconds are 0, or
//   `FileTimes.absoluteMarkNanos` for a lifetime that ends at a fixed instant.
// - never expires: mtime = 8,000,000,000 s (year 2223); anything at or past it reads as
//   `Date.distantFuture`. ext4 stores times only up to 2446 (writing year 4001 fails or
//   wraps); the sentinel is far past any real expiration, inside ext4's range, and small
//   enough that nanosecond arithmetic on it fits in Int64. A finite expiration beyond it
//   (`.days(10_000_000)`) is kept as never.
// - last access: atime, nanoseconds (with the shift `FileTimes` describes).
// - flags, key, version, original TTL, CRC32C: the 48-byte header and the key at offset
//   0 (format 2); the value size is in the header and must equal the file size - 48 -
//   key length.
//
// Both times are set explicitly with `futimens` (C shim `hc_futimens`; `UTIME_NOW` and
// `UTIME_OMIT` are shimmed as `hc_utime_now/omit`): `FileManager.setAttributes` sets
// atime and mtime to the same value.
//
// relatime: the root file system here is ext4 `relatime`, which updates atime on a read
// whenever atime < mtime, always true when mtime holds a future expiration, so ordinary
// reads would overwrite our last access. Every read therefore opens with `O_NOATIME`
// (shim `hc_open_noatime`, retrying without it on `EPERM`, which the kernel returns to
// non-owners), and the folder walks use `fstatat`, which never changes atime (test
// `readsDoNotLetTheKernelMoveAtime`: atime unchanged after three reads).
//
// Flags live in a header rather than an xattr (`user.halcyon.flags`): the flags arrive
// with the value, one syscall fewer per hit, and a store costs no more (Benchmarks/
// RESULTS.md, "Disk format: flags in a header, not an xattr"); and the header survives
// `cp`, `tar`, rsync without `-X`, and file systems without user xattrs (tmpfs before
// Linux 6.6, some overlays, NFS). Consequence:
// `totalSize()` and the size trim count file bytes (value + key + 48), while
// `FileMeta.size` is the value's byte count. A file without the magic is not ours: it
// reads as a miss (it is still counted and trimmed).

import Foundation

extension DiskStorage {
    /// What the disk tier knows about one stored entry without loading its value;
    /// what `cache.describe` reports.
    public struct FileMeta: Sendable, Equatable {
        /// The entry's file. A meta the tier made names it by folder and file name, and
        /// the URL is built only when asked for: a disk hit never uses it, and building
        /// a Foundation URL (parsing and validating the path) costs more than the hit's
        /// own bookkeeping.
        public var url: URL {
            get { location.url }
            set { location = .url(newValue) }
        }
        private var location: Location
        /// The value's byte count (the file holds more: header and key).
        public var size: UInt64
        /// The whole file's byte count, header and key included: what the size limit counts.
        public var fileSize: UInt64
        /// The entry's version as stored (0 for files of format 1, which kept none).
        public var version: UInt64
        /// The opaque flags stored with the value.
        public var flags: UInt32
        /// When the entry expires, a whole second; `Date.distantFuture` for never.
        public var expiration: Date
        /// The last store, read or touch (see `FileTimes` for the sub-second shift).
        public var lastAccess: Date
        /// True when the lifetime ends at a fixed instant (stored or touched with
        /// `.date`): no sliding read moves it. Then `lastAccess` says nothing of a TTL.
        public var isAbsolute: Bool

        /// - Parameters:
        ///   - fileSize: the file's size; default `size` plus a format-2 header.
        ///   - version: default 0.
        ///   - isAbsolute: default false.
        public init(url: URL, size: UInt64, flags: UInt32, expiration: Date, lastAccess: Date,
                    fileSize: UInt64? = nil, version: UInt64 = 0, isAbsolute: Bool = false) {
            self.init(location: .url(url), size: size, flags: flags, expiration: expiration, lastAccess: lastAccess,
                      fileSize: fileSize, version: version, isAbsolute: isAbsolute)
        }

        /// A meta of the file `name` in `folder` (see `url`).
        init(folder: URL, name: String, size: UInt64, flags: UInt32, expiration: Date, lastAccess: Date,
             fileSize: UInt64? = nil, version: UInt64 = 0, isAbsolute: Bool = false) {
            self.init(location: .inFolder(folder, name), size: size, flags: flags, expiration: expiration,
                      lastAccess: lastAccess, fileSize: fileSize, version: version, isAbsolute: isAbsolute)
        }

        private init(location: Location, size: UInt64, flags: UInt32, expiration: Date, lastAccess: Date,
                     fileSize: UInt64?, version: UInt64, isAbsolute: Bool) {
            self.location = location
            self.size = size
            self.fileSize = fileSize ?? size + UInt64(DiskStorage.FileHeader.size)
            self.version = version
            self.flags = flags
            self.expiration = expiration
            self.lastAccess = lastAccess
            self.isAbsolute = isAbsolute
        }

        /// Where the file is: a URL, or a folder and a name to build it from.
        private enum Location: Sendable, Equatable {
            case url(URL)
            case inFolder(URL, String)

            var url: URL {
                switch self {
                case .url(let url): url
                case .inFolder(let folder, let name): folder.appendingPathComponent(name, isDirectory: false)
                }
            }

            /// Two locations are equal when they name the same file, however given.
            static func == (a: Location, b: Location) -> Bool { a.url == b.url }
        }
    }
}

/// The fixed 8-byte header of format 1, still read (never written): `"HCY1"` then the
/// flags as a little-endian UInt32. A header rather than an xattr: it comes back in the same
/// `read` as the value (one syscall fewer per hit), survives `cp`/`tar` and file
/// systems without user xattrs, and costs no more on store.
enum DiskFileHeader {
    static let size = 8
    static let magic: [UInt8] = [0x48, 0x43, 0x59, 0x31]  // "HCY1"

    static func encode(flags: UInt32) -> [UInt8] {
        magic + [UInt8(truncatingIfNeeded: flags), UInt8(truncatingIfNeeded: flags >> 8),
                 UInt8(truncatingIfNeeded: flags >> 16), UInt8(truncatingIfNeeded: flags >> 24)]
    }

    /// The flags in `bytes` (at least `size` long), or nil when it is not our header.
    static func decodeFlags(_ bytes: UnsafeRawBufferPointer) -> UInt32? {
        guard bytes.count >= size, bytes[0] == magic[0], bytes[1] == magic[1],
              bytes[2] == magic[2], bytes[3] == magic[3] else { return nil }
        return UInt32(bytes[4]) | UInt32(bytes[5]) << 8 | UInt32(bytes[6]) << 16 | UInt32(bytes[7]) << 24
    }
}

/// An entry's two file times, as the kernel keeps them.
///
/// - `expirationSeconds` is mtime: the expiration instant rounded up to a whole second
///   (nanoseconds always 0). Any value at or past `neverSentinel` means "never": ext4
///   stores times only up to 2446, so `Date.distantFuture` cannot be written.
/// - `lastAccessNanos` is atime, in nanoseconds since 1970. It is the access instant
///   shifted later by exactly the amount the expiration was rounded up by, so that
///   `mtime - atime` is the exact time-to-live that was asked for. Sliding
///   expiration recovers the TTL from that difference; without the shift every slide
///   would add up to a second of rounding to the TTL, and a hot key would drift.
/// - `isAbsolute` is mtime's nanoseconds: `absoluteMarkNanos` there (never written
///   otherwise, since the expiration is a whole second) marks a lifetime that ends at a
///   fixed instant (`.date`): a slide leaves it alone. Files of older builds have 0 there
///   and slide as before. The mark lives with the times, not in the header, because a
///   touch or a write-back changes the lifetime (and its kind) without rewriting the file.
///   A file system that keeps whole seconds only drops the mark, and the lifetime then
///   slides as it did before the mark existed.
struct FileTimes: Equatable, Sendable {
    var expirationSeconds: Int64
    var lastAccessNanos: Int64
    var isAbsolute: Bool = false

    /// mtime's nanoseconds in the file of an absolute lifetime. Half a second, so that a
    /// file system with a coarser clock than nanoseconds (down to tenths) keeps it.
    static let absoluteMarkNanos: Int64 = 500_000_000

    /// 8,000,000,000 s is in 2223: far beyond any real expiration, well inside what ext4
    /// stores, and small enough that nanosecond arithmetic on it fits in Int64.
    static let neverSentinel: Int64 = 8_000_000_000
    static let nanosPerSecond: Int64 = 1_000_000_000

    var isNever: Bool { expirationSeconds >= Self.neverSentinel }

    var expirationDate: Date {
        isNever ? .distantFuture : Date(timeIntervalSince1970: TimeInterval(expirationSeconds))
    }

    var lastAccessDate: Date {
        Date(timeIntervalSince1970: TimeInterval(lastAccessNanos) / 1e9)
    }

    /// True when the entry is expired at `nowNanos` (an expiration equal to now is past).
    func isExpired(atNanos nowNanos: Int64) -> Bool {
        !isNever && expirationSeconds * Self.nanosPerSecond <= nowNanos
    }

    /// A date as nanoseconds since 1970, via whole microseconds (a Double holds no
    /// more), clamped to the range the arithmetic here is safe in.
    static func nanos(_ date: Date) -> Int64 {
        let seconds = date.timeIntervalSince1970
        guard seconds > 0 else { return 0 }
        guard seconds < TimeInterval(neverSentinel) else { return neverSentinel * nanosPerSecond }
        return Int64((seconds * 1e6).rounded()) * 1000
    }

    /// The times for an entry stored or touched at `now` with `expiration`; nil when
    /// that expiration is already over (nothing should be stored).
    /// - Parameter absolute: whether the lifetime ends at a fixed instant; default
    ///   `expiration.isAbsolute`. False for a `.date` that only carries the instant a
    ///   sliding lifetime has reached (a write-back, a journaled value reaching its file).
    static func planned(_ expiration: StorageExpiration, now: Date, absolute: Bool? = nil) -> FileTimes? {
        guard var times = plannedTimes(expiration, now: now) else { return nil }
        times.isAbsolute = !times.isNever && (absolute ?? expiration.isAbsolute)
        return times
    }

    private static func plannedTimes(_ expiration: StorageExpiration, now: Date) -> FileTimes? {
        if expiration.isExpired { return nil }
        let nowNanos = nanos(now)
        if expiration == .never { return .never(at: nowNanos) }
        // Decide "too far to represent" in Double first, so the Int64 nanosecond sums
        // below cannot overflow.
        let end = expiration.estimatedExpirationSince(now).timeIntervalSince1970
        guard end < TimeInterval(neverSentinel) else { return .never(at: nowNanos) }
        let endNanos: Int64
        switch expiration {
        case .seconds(let seconds):
            // Added as a span, not converted from `end`, so a whole-second TTL stays exact.
            endNanos = nowNanos + Int64((seconds * 1e6).rounded()) * 1000
        case .days(let days):
            endNanos = nowNanos + Int64(days) * 86_400 * nanosPerSecond
        case .date(let instant):
            endNanos = nanos(instant)
        case .never, .expired:
            return nil
        }
        return rounded(endNanos: endNanos, nowNanos: nowNanos)
    }

    /// The time-to-live these times encode, in nanoseconds; -1 for never. (For an
    /// absolute lifetime, what was left of it at the last access.)
    var ttlNanos: Int64 {
        isNever ? -1 : expirationSeconds * Self.nanosPerSecond - lastAccessNanos
    }

    /// Sliding expiration: the same time-to-live, counted again from `now`.
    /// - Parameter recordedTTLNanos: the TTL kept in the file header, used only when the
    ///   times themselves hold none (changed by hand or by a tool that did not keep
    ///   `mtime - atime`); nil or not positive means none.
    func slid(to now: Date, recordedTTLNanos: Int64? = nil) -> FileTimes {
        let nowNanos = Self.nanos(now)
        if isNever { return FileTimes(expirationSeconds: Self.neverSentinel, lastAccessNanos: nowNanos) }
        // An absolute lifetime stays where it is; the read still counts as an access.
        if isAbsolute { return FileTimes(expirationSeconds: expirationSeconds, lastAccessNanos: nowNanos, isAbsolute: true) }
        var ttl = expirationSeconds * Self.nanosPerSecond - lastAccessNanos
        if ttl <= 0, let recordedTTLNanos, recordedTTLNanos > 0 { ttl = recordedTTLNanos }
        guard ttl > 0 else { return self }  // no recoverable TTL (times set by hand): leave as is
        guard ttl < Self.neverSentinel * Self.nanosPerSecond - nowNanos else { return .never(at: nowNanos) }
        return Self.rounded(endNanos: nowNanos + ttl, nowNanos: nowNanos) ?? self
    }

    private static func never(at nowNanos: Int64) -> FileTimes {
        FileTimes(expirationSeconds: neverSentinel, lastAccessNanos: nowNanos)
    }

    /// Rounds the end instant up to a whole second and shifts the access instant by the
    /// same amount; nil when the end is not after now.
    private static func rounded(endNanos: Int64, nowNanos: Int64) -> FileTimes? {
        guard endNanos > nowNanos else { return nil }
        var seconds = endNanos / nanosPerSecond
        if endNanos % nanosPerSecond != 0 { seconds += 1 }
        if seconds >= neverSentinel { return .never(at: nowNanos) }
        let shift = seconds * nanosPerSecond - endNanos
        return FileTimes(expirationSeconds: seconds, lastAccessNanos: nowNanos + shift)
    }
}

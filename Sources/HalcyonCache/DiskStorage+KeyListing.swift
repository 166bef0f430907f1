// Listing the disk tier's keys from the files alone (after a restart too), page by page,
// reading only headers and keys: what `cache.keys` needs from this tier.

import CHalcyonSystem
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DiskStorage {
    /// One live key found in the folder.
    public struct ListedKey: Sendable, Equatable {
        public var key: CacheKey
        public var version: UInt64
        public var flags: UInt32
        /// When the entry expires; `Date.distantFuture` for never.
        public var expiration: Date
        /// The value's byte count.
        public var size: UInt64
        /// The extension of its file when it is not the one the configuration gives the
        /// key (it was stored with a `forcedExtension`); nil otherwise.
        public var forcedExtension: String? = nil
    }

    /// One page of a listing.
    public struct KeyPage: Sendable, Equatable {
        /// The keys found on this page, in file-name order (not key order: names are hashed).
        public var keys: [ListedKey]
        /// Pass to the next call to continue; nil when the folder has been walked to its end.
        /// Opaque: a file name, so a page never repeats or skips a file that stays in place.
        public var nextCursor: String?
        /// Files of format 1 met on this page: they hold no key, so they cannot be listed
        /// (they are still read by key, and a store rewrites them in format 2).
        public var unlistableFiles: Int
    }
}

extension DiskStorage.Backend {
    /// A page of the keys held in the folder whose key starts with `prefix`, unexpired at
    /// `referenceDate`. Reads each file's header and key only (one `pread` for keys up to
    /// 208 bytes), never a value, and never changes a time or a file, except that a
    /// damaged file is counted and removed as a read would.
    ///
    /// A page examines at most `limit` files (plus one listing of the folder), so a page
    /// with fewer than `limit` keys does not mean the end: `nextCursor` nil does. A key
    /// stored or removed during a walk may or may not appear; every key present for the
    /// whole walk appears exactly once.
    ///
    /// Threading: any thread (like every backend method); cheap to interleave with other
    /// work on the ioQueue page by page.
    /// - Parameters:
    ///   - prefix: default "" (all keys).
    ///   - cursor: nil for the first page, else the previous page's `nextCursor`.
    ///   - limit: the most files to examine (at least 1; default 1,000).
    ///   - referenceDate: default `config.clock.now()`.
    ///   - skipping: file names not to open (default none): the caller answers for them
    ///     (they still count towards `limit` and the cursor).
    ///   - everyFile: list a key once per file it has (default false: once in all, for a
    ///     key stored with and without forced extensions); each then names its
    ///     `forcedExtension`.
    /// - Throws: `.diskStorageIsNotReady`, `.cannotLoadDataFromDisk`.
    public func listKeys(
        prefix: CacheKey = "", after cursor: String? = nil, limit: Int = 1000, referenceDate: Date? = nil,
        skipping: Set<CacheKey> = [], everyFile: Bool = false
    ) throws(CacheError) -> DiskStorage.KeyPage {
        try checkReady()
        let now = FileTimes.nanos(referenceDate ?? config.clock.now())
        var names: [String]
        switch POSIX.listDirectory(directoryPath) {
        case .success(let listed): names = listed
        case .failure(let e):
            if e.code == ENOENT { return DiskStorage.KeyPage(keys: [], nextCursor: nil, unlistableFiles: 0) }
            throw .cannotLoadDataFromDisk(path: directoryPath, errno: e.code)
        }
        names.removeAll { $0.utf8.starts(with: DiskStorage.temporaryPrefix.utf8) }
        // Sorted by bytes so the cursor order is total and stable across calls.
        names.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        // Every name, for `isSecondFile`; then only those after the cursor.
        let allNames = names
        if let cursor {
            names.removeAll { !cursor.utf8.lexicographicallyPrecedes($0.utf8) }  // at or before the cursor
        }
        let slice = names.prefix(max(1, limit))

        var page = DiskStorage.KeyPage(keys: [], nextCursor: nil, unlistableFiles: 0)
        for name in slice where !skipping.contains(CacheKey(name)) {
            let path = path(of: name)
            let fd = hc_open_cache_file(path, 0)
            if fd < 0 { continue }  // gone meanwhile, a link, a socket: not a key
            defer { close(fd) }
            guard case .success(let status) = POSIX.fstat(fd), status.isRegular,
                  !status.times.isExpired(atNanos: now)
            else { continue }
            switch try readHeader(fd: fd, path: path, status: status, key: nil) {
            case .miss:
                continue
            case .corrupt:
                discardCorrupt(name: name, status: status)
            case .found(let file):
                guard file.hasKey else { page.unlistableFiles += 1; continue }
                let key = CacheKey(utf8: file.keyBytes)
                guard key.hasPrefix(prefix) else { continue }
                let forced = forcedExtension(ofFile: name, key: key)
                // A key with several files (stored with and without forced extensions) is
                // listed once, from the first of them in name order, on whichever page.
                if !everyFile, forced != nil, isSecondFile(name, key: key, in: allNames) { continue }
                page.keys.append(DiskStorage.ListedKey(
                    key: key, version: file.version, flags: file.flags,
                    expiration: status.times.expirationDate, size: UInt64(file.valueSize),
                    forcedExtension: forced))
            }
        }
        if slice.count < names.count, let last = slice.last { page.nextCursor = last }
        return page
    }

    /// Whether another file of `key` comes right before `name` in `sorted` (all the folder's
    /// names, sorted by bytes): the files of one key are neighbours there, as a key's
    /// base name is followed by a dot, which sorts before every hex digit.
    private func isSecondFile(_ name: String, key: CacheKey, in sorted: [String]) -> Bool {
        var low = 0
        var high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if sorted[mid].utf8.lexicographicallyPrecedes(name.utf8) { low = mid + 1 } else { high = mid }
        }
        guard low > 0 else { return false }
        let previous = sorted[low - 1]
        let base = config.usesHashedFileName ? DiskStorage.sha256Hex(key) : key.string
        return previous.utf8.elementsEqual(base.utf8) || previous.utf8.starts(with: (base + ".").utf8)
    }

    /// The extension `name` carries beyond the key's own file name (the one a store
    /// without `forcedExtension` picks), when it is not that name: a file some store gave
    /// a `forcedExtension`, which only that extension reaches.
    func forcedExtension(ofFile name: String, key: CacheKey) -> String? {
        let config = self.config
        guard !name.utf8.elementsEqual(cacheFileName(forKey: key, forcedExtension: nil, config: config).utf8) else { return nil }
        let base = config.usesHashedFileName ? DiskStorage.sha256Hex(key) : key.string
        guard name.utf8.starts(with: (base + ".").utf8) else { return nil }
        return String(decoding: name.utf8.dropFirst(base.utf8.count + 1), as: UTF8.self)
    }
}

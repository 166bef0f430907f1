// Whole-folder work: the start-up scan, removing everything, removing expired entries,
// trimming to the size limit, and counting. Each walks the folder; temporary files
// (`.tmp-*`) are never counted as entries.
//
// The walks use `readdir` + `fstatat` (no open, so atime is untouched) and skip anything
// that is not a regular file. `removeExpiredValues` and `removeSizeExceededValues` return
// the URLs they removed, so callers count expirations and evictions. The trim runs only
// when the total exceeds `sizeLimit` (0 = unlimited) and removes the least recently
// accessed (atime) first until the total is at most `sizeLimit / 2`. `removeAll` unlinks
// every cache file (in-flight temp files are left to their writers) and keeps the folder,
// so concurrent stores need not recreate it. These walks race with single-key writes only
// benignly (they may remove a file a concurrent store just replaced); the hybrid cache
// runs them on its ordered queue.

import CHalcyonSystem
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DiskStorage.Backend {
    /// One cache file found by a folder walk.
    struct CacheFile {
        var name: String
        var status: POSIX.Status
    }

    /// The start-up scan, on the backend's `scanQueue`: lists the folder once, deletes
    /// temporary files left by earlier processes (a crash mid-write), and hands the
    /// remaining names to maybeCached. It captures no backend, so it never keeps one alive.
    static func initialScan(
        path: String, keepingTemporaryToken token: String, into names: DiskStorage.KnownFileNames,
        hook: (@Sendable () -> Void)?
    ) {
        hook?()
        guard case .success(let entries) = POSIX.listDirectory(path) else {
            names.abandonScan()
            return
        }
        let ours = DiskStorage.temporaryPrefix + token + "-"
        var cacheNames: [String] = []
        cacheNames.reserveCapacity(entries.count)
        for name in entries {
            if name.utf8.starts(with: DiskStorage.temporaryPrefix.utf8) {
                // Another instance's temp file: stale debris at start. (Were it a live
                // writer sharing the folder, its rename fails with ENOENT and it retries.)
                if !name.utf8.starts(with: ours.utf8) { unlink(path + "/" + name) }
            } else {
                cacheNames.append(name)
            }
        }
        names.finishScan(with: cacheNames)
    }

    /// Every regular, non-temporary file in the folder, with its times and size.
    /// A missing folder is an empty cache.
    func cacheFiles() throws(CacheError) -> [CacheFile] {
        try checkReady()
        let names: [String]
        switch POSIX.listDirectory(directoryPath) {
        case .success(let listed): names = listed
        case .failure(let e):
            if e.code == ENOENT { return [] }
            throw .cannotLoadDataFromDisk(path: directoryPath, errno: e.code)
        }
        let dirfd: Int32
        switch POSIX.openDirectory(directoryPath) {
        case .success(let fd): dirfd = fd
        case .failure(let e):
            if e.code == ENOENT { return [] }
            throw .cannotLoadDataFromDisk(path: directoryPath, errno: e.code)
        }
        defer { close(dirfd) }
        var files: [CacheFile] = []
        files.reserveCapacity(names.count)
        for name in names where !name.utf8.starts(with: DiskStorage.temporaryPrefix.utf8) {
            // fstatat reads the inode without opening the file: atime stays as it is.
            guard case .success(let status) = POSIX.fstatat(dirfd, name), status.isRegular else { continue }
            files.append(CacheFile(name: name, status: status))
        }
        return files
    }

    /// Removes every entry (temporary files of writes in flight are left alone).
    /// - Returns: how many entries were removed.
    /// - Throws: `.diskStorageIsNotReady`, `.cannotLoadDataFromDisk` (listing),
    ///   `.cannotRemoveCacheFile`.
    @discardableResult
    public func removeAll() throws(CacheError) -> Int {
        try checkReady()
        let names: [String]
        switch POSIX.listDirectory(directoryPath) {
        case .success(let listed): names = listed
        case .failure(let e):
            if e.code == ENOENT { return 0 }
            throw .cannotLoadDataFromDisk(path: directoryPath, errno: e.code)
        }
        var removed = 0
        for name in names where !name.utf8.starts(with: DiskStorage.temporaryPrefix.utf8) {
            if try removeFile(named: name) { removed += 1 }
        }
        return removed
    }

    /// Removes the entries expired at `referenceDate` (default `config.clock.now()`).
    ///
    /// - Parameter liveLifetimes: lifetimes the caller knows better than the files (file
    ///   name -> the entry's lifetime): a file named there is judged by that lifetime,
    ///   so an entry whose extension has not reached its file yet is never deleted.
    /// - Returns: the URLs of the removed files, so callers can count expirations.
    @discardableResult
    public func removeExpiredValues(referenceDate: Date? = nil, liveLifetimes: [CacheKey: Date] = [:]) throws(CacheError) -> [URL] {
        let date = referenceDate ?? config.clock.now()
        let nowNanos = FileTimes.nanos(date)
        var removed: [URL] = []
        for file in try cacheFiles() where file.status.times.isExpired(atNanos: nowNanos) {
            if let lifetime = liveLifetimes[CacheKey(file.name)], lifetime > date { continue }
            if try removeFile(named: file.name) { removed.append(url(of: file.name)) }
        }
        return removed
    }

    /// When the folder holds more than `config.sizeLimit` bytes (file bytes, headers
    /// included: the measure `totalSize` reports), removes the least recently accessed
    /// entries until it holds at most half the limit, so that the next trims are not one
    /// store away. Does nothing when the limit is 0.
    ///
    /// - Parameter recentAccess: last accesses the caller knows better than the files
    ///   (file name -> instant; reads answered from memory do not touch the file).
    /// - Returns: the URLs of the removed files, so callers can count evictions.
    @discardableResult
    public func removeSizeExceededValues(recentAccess: [CacheKey: Date] = [:]) throws(CacheError) -> [URL] {
        try checkReady()
        let limit = config.sizeLimit
        guard limit > 0 else { return [] }
        var files = try cacheFiles()
        var total = files.reduce(UInt64(0)) { $0 + $1.status.fileSize }
        guard total > limit else { return [] }
        func lastAccess(_ file: CacheFile) -> Int64 {
            max(file.status.times.lastAccessNanos, recentAccess[CacheKey(file.name)].map(FileTimes.nanos) ?? 0)
        }
        files.sort { lastAccess($0) < lastAccess($1) }
        let target = limit / 2
        var removed: [URL] = []
        for file in files {
            if total <= target { break }
            if try removeFile(named: file.name) { removed.append(url(of: file.name)) }
            total -= file.status.fileSize
        }
        return removed
    }

    /// One file whose key begins with a namespace (`CacheKey.namespacePrefixLength`).
    struct NamespacedFile {
        /// The namespace's prefix (its name and the separator).
        var prefix: CacheKey
        var name: String
        var size: UInt64
        var lastAccessNanos: Int64
    }

    /// Every file whose key names a namespace, read from the files' headers (one read of
    /// a header and key per file). Files of format 1, which hold no key, are not among them.
    func namespacedFiles() throws(CacheError) -> [NamespacedFile] {
        var out: [NamespacedFile] = []
        for file in try cacheFiles() {
            let path = path(of: file.name)
            let fd = hc_open_cache_file(path, 0)
            if fd < 0 { continue }  // gone meanwhile
            defer { close(fd) }
            guard case .found(let header) = try readHeader(fd: fd, path: path, status: file.status, key: nil),
                  header.hasKey
            else { continue }
            let key = CacheKey(utf8: header.keyBytes)
            guard let length = key.namespacePrefixLength else { continue }
            out.append(NamespacedFile(
                prefix: key.leading(length), name: file.name, size: file.status.fileSize,
                lastAccessNanos: file.status.times.lastAccessNanos))
        }
        return out
    }

    /// The bytes the entries' files hold (each value plus its 8-byte header).
    public func totalSize() throws(CacheError) -> UInt64 {
        try cacheFiles().reduce(0) { $0 + $1.status.fileSize }
    }

    /// How many entries the folder holds, expired ones included until removed.
    public func count() throws(CacheError) -> Int {
        try cacheFiles().count
    }
}

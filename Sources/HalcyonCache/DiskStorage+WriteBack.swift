// What the hybrid cache needs from the disk tier to own an entry's lifetime: writing a
// lifetime that memory extended back into a file's times (metadata only: the value is
// neither read nor rewritten), a maybeCached answer with no system call, and the file
// name a key maps to (so that maintenance can spare the files of live entries).

import CHalcyonSystem
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DiskStorage.Backend {
    /// Gives the file of `writeBack.key` the lifetime memory knows: expiration
    /// `writeBack.expiresAt` (as the disk tier rounds it), last access
    /// `writeBack.extendedAt`, so that the file keeps `writeBack.timeToLive` for its own
    /// slides. Sets the times even when the file's own expiration has passed (memory
    /// kept the entry alive meanwhile); never creates a file. A record without a
    /// `timeToLive` and with an end gives the file an absolute lifetime (see `FileTimes`).
    ///
    /// - Parameter keepingAbsolute: true when the lifetime is only a default (a journaled
    ///   touch without an expiration, replayed): a file whose lifetime is absolute keeps it.
    /// - Returns: false when there is no such file (removed, trimmed, never written).
    /// - Throws: `.diskStorageIsNotReady`, `.invalidKey`, `.cannotLoadDataFromDisk`,
    ///   `.cannotSetCacheFileAttribute`.
    public func writeBack(_ writeBack: MemoryStorage.WriteBack, keepingAbsolute: Bool = false) throws(CacheError) -> Bool {
        try checkReady()
        let name = try checkedFileName(forKey: writeBack.key, forcedExtension: writeBack.forcedExtension)
        guard knownNames.mayContain(name) else { return false }
        // The instant itself, not `extendedAt + timeToLive` added up again: a record rebuilt
        // from the journal at start (`timeToLive` = what is left of it) would otherwise come
        // out a few hundred nanoseconds late and round up to the next whole second.
        let expiration: StorageExpiration = writeBack.expiresAt == .distantFuture ? .never : .date(writeBack.expiresAt)
        // A lifetime over before it began (an extension to an expiration already past)
        // expires the file in place, as a read asking for it would.
        let times = writeBack.expiresAt <= writeBack.extendedAt
            ? FileTimes(expirationSeconds: 0, lastAccessNanos: FileTimes.nanos(writeBack.extendedAt))
            : FileTimes.planned(expiration, now: writeBack.extendedAt, absolute: writeBack.timeToLive == nil)
                ?? FileTimes(expirationSeconds: 0, lastAccessNanos: FileTimes.nanos(writeBack.extendedAt))
        let path = path(of: name)
        let fd = hc_open_noatime(path)
        if fd < 0 {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return false }
            throw .cannotLoadDataFromDisk(path: path, errno: code)
        }
        defer { close(fd) }
        if keepingAbsolute, case .success(let status) = POSIX.fstat(fd), status.times.isAbsolute { return true }
        if let e = POSIX.setTimes(fd, times) {
            throw .cannotSetCacheFileAttribute(path: path, errno: e.code)
        }
        return true
    }

    /// False only when `key` certainly has no file (the maybeCached set says so): no
    /// system call, safe to ask under a lock on a caller's thread.
    public func mayHold(key: CacheKey, forcedExtension: String?) -> Bool {
        guard isReady, let name = try? checkedFileName(forKey: key, forcedExtension: forcedExtension)
        else { return false }
        return knownNames.mayContain(name)
    }

    /// The name of the file `key` is (or would be) stored in.
    func fileName(forKey key: CacheKey, forcedExtension: String?) -> String {
        cacheFileName(forKey: key, forcedExtension: forcedExtension)
    }
}

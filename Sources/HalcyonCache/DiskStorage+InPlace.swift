// Rewriting a cache file in place: the second way to replace a file, for the
// write-behind only. On ext4 a temporary file and a rename over the old name cost a new
// inode and a flush of the data before the rename replaces a file, dozens of times what
// writing into the existing file costs (Benchmarks/RESULTS.md, "Rewriting a cache file in
// place"). The price is that a crash or a
// concurrent reader can meet a part-written file, so only a caller that can answer for
// both may ask for it (see `LocalStore.WriteBehind.materializeSlice`).
//
// How: open the name (`O_RDWR|O_NOFOLLOW|O_NONBLOCK|O_NOATIME`), `fstat`, `writev` header +
// key + value at offset 0, `ftruncate` when the old file was longer, `futimens` after the
// last write, `fsync` under `synchronousWrites`, close. A missing file is created at its
// final name (`O_CREAT|O_EXCL|O_NOFOLLOW`; the folder fsynced too under
// `synchronousWrites`); if another appears first, the open is tried once more; a missing
// folder is recreated as for any store. Anything at the name that is not a lone format-2
// regular file (a FIFO or socket, a symbolic link, a file with other hard links, a format-1
// or foreign file, one the open is refused on) is replaced by the rename path instead,
// never written through: a hard link or symlink to a file outside the folder keeps its
// contents. A failure after the open removes the file (if the name still points at it).

import CHalcyonSystem
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DiskStorage {
    /// How `Backend.store` replaces the file a key already has.
    enum FileReplacement {
        /// A temporary file, dated, then renamed over the name: readers and crashes see
        /// the old value or the new one. Every write but the materializer's.
        case rename
        /// The existing file is overwritten from offset 0, cut to length and dated; a
        /// missing one is created at its final name. A crash or a reader during the write
        /// can meet a torn file, which the format-2 length and CRC32C checks find (a
        /// miss, then removed). Anything at the name that is not a lone format-2 regular
        /// file (a FIFO, a symbolic link, a file with other hard links, a format-1 file)
        /// is replaced by `.rename` instead, never written through.
        case inPlace
    }
}

extension DiskStorage.Backend {
    /// Writes `contents` into the file at `name` in place (see
    /// `DiskStorage.FileReplacement.inPlace`), or creates it there when there is none.
    /// Falls back to `writeFile` (temp + rename) for anything it must not write into.
    ///
    /// Times are set on the descriptor after the last write (a write or a truncation
    /// would move mtime again), then the file is flushed when `synchronous` (and the
    /// folder too when the name is new), as `writeFile` does. A failure after the file
    /// was opened removes it, if the name still points at it: a file cut short is of no
    /// use, and the caller keeps the value to write again.
    ///
    /// - Returns: false when the folder is missing (ENOENT), so the caller can recreate it.
    func rewriteFile(
        named name: String, contents: FileContents, times: FileTimes, synchronous: Bool
    ) throws(CacheError) -> Bool {
        let finalPath = path(of: name)
        var created = false
        var fd = openForRewrite(finalPath)
        if fd < 0, errno == ENOENT {
            // No file yet: create it at its final name. O_EXCL never follows or reuses
            // whatever may appear there meanwhile.
            fd = open(finalPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            if fd >= 0 {
                created = true
            } else if errno == ENOENT {
                return false  // the folder is gone
            } else if errno == EEXIST {
                fd = openForRewrite(finalPath)  // someone created it first: once more
            }
        }
        guard fd >= 0 else {
            // ELOOP (a symbolic link), ENXIO (a socket), EISDIR, EACCES, ...: the rename
            // path replaces what it can and reports what it cannot, as for any store.
            return try writeFile(named: name, contents: contents, times: times, synchronous: synchronous)
        }

        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let code = errno
            close(fd)
            throw .cannotCreateCacheFile(path: finalPath, errno: code)
        }
        var formatTwo = created
        if !created, (st.st_mode & S_IFMT) == S_IFREG, st.st_nlink == 1 {
            // Only over a format-2 file: a format-1 header carries no checksum, so a
            // rewrite torn by a power cut (old first page, new later ones) could pass a
            // read. The probe does not touch atime (the descriptor has O_NOATIME).
            var magic: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
            let got = withUnsafeMutableBytes(of: &magic) { pread(fd, $0.baseAddress!, 4, 0) }
            formatTwo = got == 4 && magic == DiskStorage.FileHeader.magic
        }
        guard formatTwo else {
            // A FIFO or device (opened without blocking), a file linked elsewhere, a
            // format-1 or foreign file: replaced whole, never written through.
            close(fd)
            return try writeFile(named: name, contents: contents, times: times, synchronous: synchronous)
        }
        let oldSize = created ? 0 : Int(st.st_size)

        if let failure = fill(
            fd, with: contents, times: times, synchronous: synchronous, path: finalPath, truncatingFrom: oldSize)
        {
            removeIfStill(name: name, device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
            throw failure
        }
        if synchronous, created {
            // A new name is durable only once the folder is flushed.
            try syncFolder(for: finalPath)
        }
        return true
    }

    /// Opens an existing cache file for rewriting: read-write (to check its format), no
    /// symbolic link followed, a FIFO opened without waiting, atime left alone.
    private func openForRewrite(_ path: String) -> Int32 {
        hc_open_cache_file(path, 1)
    }

    /// Unlinks the file `device`/`inode` if the name still points at it, and keeps
    /// maybeCached current.
    private func removeIfStill(name: String, device: UInt64, inode: UInt64) {
        let path = path(of: name)
        var st = stat()
        guard lstat(path, &st) == 0, UInt64(st.st_dev) == device, UInt64(st.st_ino) == inode else { return }
        unlink(path)
        knownNames.eraseIfAbsent(name) { POSIX.exists(path) }
    }
}

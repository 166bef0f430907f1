// The few POSIX calls the disk tier is built on, wrapped so each returns a Swift value
// or an errno. Foundation's FileManager is not used on the hot paths: it cannot open
// with O_NOATIME, set atime and mtime apart, or report errno.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CHalcyonSystem

/// Thin wrappers over system calls. Every function is thread-safe (it touches only its
/// arguments and the calling thread's errno).
enum POSIX {
    /// What `fstat`/`stat` tell the disk tier about a file.
    struct Status {
        var fileSize: UInt64
        var isRegular: Bool
        var times: FileTimes
        /// Device and inode: whether a name still points at the file a descriptor holds.
        var device: UInt64
        var inode: UInt64

        init(_ st: stat) {
            fileSize = UInt64(max(0, st.st_size))
            device = UInt64(st.st_dev)
            inode = UInt64(st.st_ino)
            isRegular = (st.st_mode & S_IFMT) == S_IFREG
            times = FileTimes(
                expirationSeconds: Int64(st.st_mtim.tv_sec),
                lastAccessNanos: Int64(st.st_atim.tv_sec) * FileTimes.nanosPerSecond + Int64(st.st_atim.tv_nsec),
                isAbsolute: Int64(st.st_mtim.tv_nsec) == FileTimes.absoluteMarkNanos)
        }
    }

    static func fstat(_ fd: Int32) -> Result<Status, Errno> {
        var st = stat()
        guard Glibc.fstat(fd, &st) == 0 else { return .failure(Errno.current) }
        return .success(Status(st))
    }

    /// `stat` relative to a folder, not following a final symlink; never touches atime.
    static func fstatat(_ dirfd: Int32, _ name: String) -> Result<Status, Errno> {
        var st = stat()
        guard Glibc.fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return .failure(Errno.current) }
        return .success(Status(st))
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return Glibc.lstat(path, &st) == 0
    }

    /// Writes all of `bytes`, retrying short writes and EINTR.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Errno? {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return Errno.current
            }
            offset += n
        }
        return nil
    }

    /// Reads exactly `count` bytes from `offset` into `buffer` (EOF early: returns how
    /// many were read), retrying short reads and EINTR.
    static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, from offset: Int) -> Result<Int, Errno> {
        var done = 0
        while done < buffer.count {
            let n = Glibc.pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(Errno.current)
            }
            if n == 0 { break }
            done += n
        }
        return .success(done)
    }

    /// Writes all of several buffers with as few `writev` calls as the kernel allows
    /// (one, unless it writes short), retrying EINTR. At most `IOV_MAX` (1024) buffers.
    static func writevAll(_ fd: Int32, _ buffers: [UnsafeRawBufferPointer]) -> Errno? {
        var vectors = buffers.filter { !$0.isEmpty }.map {
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress!), iov_len: $0.count)
        }
        var first = 0
        while first < vectors.count {
            let n = vectors[first...].withUnsafeBufferPointer { Glibc.writev(fd, $0.baseAddress!, Int32($0.count)) }
            if n < 0 {
                if errno == EINTR { continue }
                return Errno.current
            }
            var left = n
            while first < vectors.count, left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base = vectors[first].iov_base! + left
                vectors[first].iov_len -= left
            }
        }
        return nil
    }

    /// Sets mtime to the expiration (its nanoseconds: the absolute mark, see `FileTimes`)
    /// and atime to the last access on an open file.
    static func setTimes(_ fd: Int32, _ times: FileTimes) -> Errno? {
        let la = times.lastAccessNanos
        let (aSec, aNsec) = (la / FileTimes.nanosPerSecond, la % FileTimes.nanosPerSecond)
        let mNsec = times.isAbsolute ? Int(FileTimes.absoluteMarkNanos) : 0
        return hc_futimens(fd, aSec, Int(aNsec), times.expirationSeconds, mNsec) == 0 ? nil : Errno.current
    }

    /// `mkdir -p`: creates the folder and its missing parents (mode 0700: a cache may
    /// hold private values). Returns nil when the folder exists afterwards.
    static func makeDirectories(_ path: String) -> Errno? {
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            if Glibc.mkdir(prefix, 0o700) != 0 {
                let e = errno
                if e == EEXIST { continue }
                return Errno(e)
            }
        }
        var st = stat()
        guard Glibc.fstatat(AT_FDCWD, path, &st, 0) == 0 else { return Errno.current }  // follows a symlinked folder
        return (st.st_mode & S_IFMT) == S_IFDIR ? nil : Errno(ENOTDIR)
    }

    /// Lists a folder's entry names (without `.` and `..`).
    static func listDirectory(_ path: String) -> Result<[String], Errno> {
        guard let dir = Glibc.opendir(path) else { return .failure(Errno.current) }
        defer { Glibc.closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = Glibc.readdir(dir) else {
                if errno != 0 { return .failure(Errno.current) }
                break
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return .success(names)
    }

    /// Opens a folder for the `*at` calls.
    static func openDirectory(_ path: String) -> Result<Int32, Errno> {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        return fd >= 0 ? .success(fd) : .failure(Errno.current)
    }

    /// An errno value, as an Error so it can ride in a `Result`.
    struct Errno: Error, Equatable {
        var code: Int32
        init(_ code: Int32) { self.code = code }
        static var current: Errno { Errno(errno) }
    }
}

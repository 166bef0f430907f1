// The `<socket>.lock` file: an exclusive flock(2) that makes "is another halcyond using
// this socket path?" a question the kernel answers atomically, so two daemons starting
// together cannot both decide the socket is stale and both bind.

import Glibc
import HalcyonSupport

/// An exclusive, non-blocking `flock` on `<socket path>.lock`, held for the daemon's life.
///
/// The kernel drops a flock when its holder dies, however it dies, so a crashed daemon
/// never leaves a lock behind; only the (harmless) file stays, and the next daemon
/// reuses it. The file holds the holder's pid and a newline, for operators.
///
/// Thread-safe: `release(removingFile:)` may be called from any thread, any number of
/// times; the first call does the work (a `Locked` box guards the descriptor).
public final class SocketLock: Sendable {
    /// The lock file's path.
    public let path: String
    /// The open descriptor that holds the lock (close-on-exec), or -1 once released.
    public var fileDescriptor: Int32 { state.withLock { $0 } }

    /// The held descriptor; -1 once released. Guarded by its lock.
    private let state: Locked<Int32>

    /// Takes the lock at `path`, creating the file (mode 0600) if needed.
    /// - Throws: `SocketSetupError.anotherDaemonHoldsLock` when another process holds
    ///   it (with that process's pid when the file names one), `.cannotOpenLock` for
    ///   any other failure (a symlink at `path` is refused rather than followed).
    public init(path: String) throws(SocketSetupError) {
        self.path = path
        // A lock file that is unlinked between our open() and our flock() by a daemon
        // that is exiting is locked by nobody else, so we would "win" on a dead inode
        // while a third daemon wins on a new file. Re-check that the path still names
        // the inode we locked, and start again if not.
        for _ in 0..<16 {
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else { throw .cannotOpenLock(path: path, errno: errno) }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let error = errno
                let holder = Self.readPID(fd)
                close(fd)
                if error == EWOULDBLOCK { throw .anotherDaemonHoldsLock(path: path, pid: holder) }
                throw .cannotOpenLock(path: path, errno: error)
            }
            var opened = stat()
            var named = stat()
            guard fstat(fd, &opened) == 0 else {
                let error = errno
                close(fd)
                throw .cannotOpenLock(path: path, errno: error)
            }
            if lstat(path, &named) == 0, named.st_dev == opened.st_dev, named.st_ino == opened.st_ino {
                Self.writePID(fd)
                state = Locked(fd)
                return
            }
            close(fd)
        }
        throw .cannotOpenLock(path: path, errno: EAGAIN)
    }

    /// Releases the lock; with `removingFile`, first unlinks the file (still holding the
    /// lock, so no other daemon can be between locking and using it). Idempotent.
    public func release(removingFile: Bool) {
        let fd = state.withLock { fd -> Int32 in
            let held = fd
            fd = -1
            return held
        }
        guard fd >= 0 else { return }
        if removingFile { unlink(path) }
        close(fd)
    }

    deinit {
        // A lock that is dropped without release still frees the descriptor; the file
        // is left, which is harmless.
        let fd = state.withLock { $0 }
        if fd >= 0 { close(fd) }
    }

    private static func writePID(_ fd: Int32) {
        let text = Array("\(getpid())\n".utf8)
        guard ftruncate(fd, 0) == 0 else { return }
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    private static func readPID(_ fd: Int32) -> pid_t? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self)
        return pid_t(text.split(separator: "\n").first ?? "")
    }
}

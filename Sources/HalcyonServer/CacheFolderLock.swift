// One daemon per cache folder. Two daemons that share a folder (different sockets, same
// `--cache-dir` and `--name`) would each replay and append the same journal and each
// write files behind the other's back, losing acknowledged writes; the socket lock cannot
// see them, so the folder has a lock of its own.
//
// The lock file is `<root>/<name>.lock`, beside the folder as the journal
// (`<root>/<name>.journal`) is, not inside it: the folder holds one file per key, and
// `cache.clear`, the start-up scan and (with plain file names) keys own its names, so no
// name inside it is safe from being listed, counted or removed.
//
// It is taken before anything of the cache is created or replayed, and held for the
// daemon's life (the kernel drops a flock when its holder dies, however it dies). A
// daemon that is refused, or that finds the folder unusable, removes the folders it
// created on the way, so it leaves nothing behind.

import Foundation
import HalcyonRPC
#if canImport(Glibc)
import Glibc
#endif

/// The held lock of one cache folder, and the check that the folder can be used.
///
/// Threading: made once on the main thread before the daemon starts; immutable after
/// (the lock's own `Locked` guards its descriptor).
public final class CacheFolderLock: Sendable {
    /// The cache folder, `<root>/<name>`.
    public let folder: String
    /// The held lock on `<folder>.lock`.
    private let lock: SocketLock

    /// Why a cache folder cannot be used. `description` is one line for the operator.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Another process holds the folder's lock: another halcyond serves from it.
        case inUse(folder: String, lockPath: String, pid: pid_t?)
        /// `path` (the folder, a parent of it, its lock file or its journal folder) could
        /// not be created or used.
        case unusable(folder: String, path: String, errno: Int32)

        public var description: String {
            switch self {
            case .inUse(let folder, let lockPath, let pid):
                let holder = pid.map { "another halcyond (pid \($0))" } ?? "another halcyond"
                return "the cache folder \(folder) is in use by \(holder), which holds \(lockPath); "
                    + "give this daemon another --cache-dir or --name"
            case .unusable(let folder, let path, let code):
                let what = path == folder ? "" : " (at \(path))"
                return "cannot use the cache folder \(folder)\(what): \(RPCError.errnoName(code)) "
                    + "(\(String(cString: strerror(code))))"
            }
        }
    }

    private init(folder: String, lock: SocketLock) {
        self.folder = folder
        self.lock = lock
    }

    /// Locks `folder` and makes sure the daemon can create files in it (creating it and
    /// its parents, mode 0700, when missing).
    ///
    /// - Parameters:
    ///   - folder: the cache folder, `<root>/<name>`.
    ///   - journal: the journal folder, checked when it exists (it is created later, by
    ///     the journal itself).
    /// - Throws: `Failure.inUse` when another process holds the lock;
    ///   `Failure.unusable` with the failing path and errno when a folder cannot be
    ///   created, is not a folder, or cannot be written (EACCES, EROFS, ENOTDIR, ...).
    ///   Either way the folders this call created are removed again.
    public static func acquire(folder: URL, journal: URL) throws(Failure) -> CacheFolderLock {
        let path = folder.standardizedFileURL.path
        let lockPath = path + ".lock"
        var created: [String] = []
        func fail(_ failure: Failure, releasing lock: SocketLock? = nil) -> Failure {
            lock?.release(removingFile: true)
            for made in created.reversed() { rmdir(made) }
            return failure
        }
        let root = (path as NSString).deletingLastPathComponent
        if let (at, code) = makeDirectories(root, created: &created) {
            throw fail(.unusable(folder: path, path: at, errno: code))
        }
        let lock: SocketLock
        do {
            lock = try SocketLock(path: lockPath)
        } catch {
            switch error {
            case .anotherDaemonHoldsLock(_, let pid):
                throw fail(.inUse(folder: path, lockPath: lockPath, pid: pid))
            case .cannotOpenLock(_, let code):
                throw fail(.unusable(folder: path, path: lockPath, errno: code))
            default:
                // SocketLock throws only the two cases above; any other would still be
                // a lock file this daemon cannot take.
                throw fail(.unusable(folder: path, path: lockPath, errno: EINVAL))
            }
        }
        if let (at, code) = makeDirectories(path, created: &created) {
            throw fail(.unusable(folder: path, path: at, errno: code), releasing: lock)
        }
        for candidate in [path, journal.standardizedFileURL.path] {
            var info = stat()
            guard stat(candidate, &info) == 0 else {
                if errno == ENOENT, candidate != path { continue }
                throw fail(.unusable(folder: path, path: candidate, errno: errno), releasing: lock)
            }
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw fail(.unusable(folder: path, path: candidate, errno: ENOTDIR), releasing: lock)
            }
            // Root passes `access` whatever the mode; a read-only mount still fails it (EROFS).
            if access(candidate, W_OK | X_OK) != 0 {
                throw fail(.unusable(folder: path, path: candidate, errno: errno), releasing: lock)
            }
        }
        return CacheFolderLock(folder: path, lock: lock)
    }

    /// `mkdir -p path` (mode 0700), appending each folder it made to `created`, outermost
    /// first. Returns the path that failed and its errno, or nil.
    private static func makeDirectories(_ path: String, created: inout [String]) -> (String, Int32)? {
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += "/" + component
            if mkdir(prefix, 0o700) == 0 {
                created.append(prefix)
                continue
            }
            let code = errno
            guard code == EEXIST else { return (prefix, code) }
            var info = stat()
            guard stat(prefix, &info) == 0 else { return (prefix, errno) }
            guard info.st_mode & S_IFMT == S_IFDIR else { return (prefix, ENOTDIR) }
        }
        return nil
    }
}

// The cache folder's own permissions: a folder others may write to lets them plant files
// (links, FIFOs, forged entries) where the daemon reads its cache, so it is refused at
// start, as the socket folder is.

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Checks a cache folder before the daemon serves from it.
///
/// Thread-safe (no state); a couple of `lstat` calls.
enum CacheFolderCheck {
    /// Why a cache folder is refused. `description` is one line for the operator.
    enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// Group or others may write to the folder (mode has 0o022 bits).
        case writableByOthers(path: String, mode: mode_t)

        var description: String {
            switch self {
            case .writableByOthers(let path, let mode):
                return "the cache folder \(path) is writable by group or others (mode 0\(String(mode & 0o7777, radix: 8))); "
                    + "run chmod go-w on it"
            }
        }
    }

    /// Refuses `folder` if it exists and group or others may write to it. A folder that
    /// does not exist yet is left to the disk tier, which creates it with the umask's mode.
    /// - Throws: `Failure.writableByOthers`.
    static func verify(_ folder: URL) throws(Failure) {
        var info = stat()
        guard lstat(folder.path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else { return }
        if info.st_mode & 0o022 != 0 {
            throw .writableByOthers(path: folder.path, mode: info.st_mode)
        }
    }
}

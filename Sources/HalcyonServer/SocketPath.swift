// Getting a socket path ready to bind: its folder (created 0700, ours, not a symlink),
// the lock that makes us the only daemon using it, and whatever already sits at the path
// (nothing; a stale socket, which we remove; a live daemon or a non-socket, which we
// refuse). The server calls `SocketPath.prepare` before binding and the returned
// `PreparedSocket` after binding and at exit.

import Foundation
import Glibc
import HalcyonSupport

/// Prepares the path a daemon will bind its Unix socket to.
///
/// Order matters: the folder first (so the lock file lives somewhere safe), then the lock
/// (so no other daemon is probing or binding the same path), then the existing path.
///
/// Folder rules, because the socket is the daemon's only access control besides peer
/// credentials:
/// - A missing folder is created with mode 0700 (0711 when `socketMode` grants group or
///   other access, so those users can reach the socket by name but not list or add
///   files); its parent must exist.
/// - The default folder (`defaultSocketPath`) must be a real folder (not a symlink) owned
///   by our effective uid; if its mode differs from the one above we set it, as it is ours.
/// - An explicit folder (`--socket`) must be a real folder owned by us or by root and not
///   writable by group or others (so `/tmp` itself is refused: use a folder in it). We
///   never change its mode: it is the operator's.
///
/// Thread-safe (no shared state); it blocks on a few file-system calls and one
/// `connect()`, so call it before starting the event loops, not on one.
public enum SocketPath {
    /// The longest path a `sockaddr_un` holds, without its terminating NUL.
    public static let maximumPathBytes = 107

    /// Prepares `configuration.socketPath` for binding. Do not call it for a socket
    /// inherited from systemd: that one is bound already and must never be unlinked.
    /// - Returns: the prepared socket, holding the lock until `cleanUp()`.
    /// - Throws: `SocketSetupError` with a message fit to print as is.
    public static func prepare(_ configuration: ServerConfiguration) throws(SocketSetupError) -> PreparedSocket {
        let isDefault = configuration.socketPath == ServerConfiguration.defaultSocketPath()
        return try prepare(configuration, isDefaultPath: isDefault)
    }

    /// `prepare(_:)` with the folder rule chosen by the caller; for tests, which cannot
    /// create folders at the real default path.
    public static func prepare(_ configuration: ServerConfiguration, isDefaultPath: Bool) throws(SocketSetupError) -> PreparedSocket {
        let path = configuration.socketPath
        guard path.utf8.count <= maximumPathBytes else {
            throw .pathTooLong(path: path, bytes: path.utf8.count)
        }
        guard path.hasPrefix("/"), !path.hasSuffix("/") else { throw .pathNotAbsolute(path: path) }
        let folderMode: mode_t = configuration.socketMode & 0o077 == 0 ? 0o700 : 0o711
        try prepareFolder(folder(of: path), mode: folderMode, ownedByUs: isDefaultPath)
        let lock = try SocketLock(path: path + ".lock")
        do {
            try removeStaleSocket(at: path)
        } catch {
            // We hold the lock, so removing its file cannot race another daemon: a refused
            // start leaves nothing behind.
            lock.release(removingFile: true)
            throw error
        }
        return PreparedSocket(path: path, lock: lock, mode: configuration.socketMode, group: configuration.socketGroup)
    }

    /// Where the server's listener comes from: a socket systemd passed us, or a path we
    /// prepared and will bind.
    public enum ListenSource: Sendable {
        /// Socket activation: serve this already-listening descriptor (SwiftNIO:
        /// `ServerBootstrap.withBoundSocket`). `path` is where it is bound, for logs and
        /// `server.info`. Take no lock; never unlink it: systemd owns it.
        case inherited(fileDescriptor: Int32, path: String)
        /// Bind to `prepared.path`, then `prepared.applyPermissions()`; at exit close the
        /// listener, then `prepared.cleanUp()`.
        case bind(PreparedSocket)

        /// The path clients connect to: the inherited socket's own (from `getsockname`),
        /// or the one about to be bound. For `server.info` and the start log.
        public var path: String {
            switch self {
            case .inherited(_, let path): return path
            case .bind(let prepared): return prepared.path
            }
        }
    }

    /// The one call the server makes before listening: the first socket systemd passed
    /// (`Systemd.listenFileDescriptors`, which also clears `LISTEN_*`), checked to be a
    /// listening Unix stream socket; otherwise `prepare(configuration)`. Call once, at
    /// start, before other threads read the environment.
    /// - Parameters:
    ///   - environment: where `LISTEN_PID`/`LISTEN_FDS` are read; default, the process's.
    ///   - baseFD: the first inherited descriptor; default 3 (tests pass another).
    /// - Throws: `SocketSetupError`, `.inheritedSocketUnusable` for a passed descriptor
    ///   that is not a listening Unix stream socket.
    public static func listenSource(
        _ configuration: ServerConfiguration,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        baseFD: Int32 = Systemd.listenFileDescriptorsStart
    ) throws(SocketSetupError) -> ListenSource {
        let inherited = Systemd.listenFileDescriptors(environment: environment, baseFD: baseFD)
        if let fd = inherited.first {
            do {
                return .inherited(fileDescriptor: fd, path: try Systemd.listeningUnixSocketPath(of: fd))
            } catch {
                throw .inheritedSocketUnusable(description: error.description)
            }
        }
        return .bind(try prepare(configuration))
    }

    /// The folder part of an absolute path (`/` for `/x`).
    static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[path.startIndex..<slash])
    }

    /// Creates or checks the socket's folder; see the type's doc for the rules.
    static func prepareFolder(_ folder: String, mode: mode_t, ownedByUs: Bool) throws(SocketSetupError) {
        let uid = geteuid()
        if mkdir(folder, mode) == 0 {
            // mkdir's mode is filtered by the umask; set it exactly.
            guard chmod(folder, mode) == 0 else { throw .cannotCreateFolder(path: folder, errno: errno) }
            return
        }
        let mkdirError = errno
        guard mkdirError == EEXIST else {
            if mkdirError == ENOENT { throw .folderParentMissing(path: folder) }
            throw .cannotCreateFolder(path: folder, errno: mkdirError)
        }
        var info = stat()
        guard lstat(folder, &info) == 0 else { throw .cannotCreateFolder(path: folder, errno: errno) }
        let type = info.st_mode & S_IFMT
        if type == S_IFLNK { throw .folderIsSymlink(path: folder) }
        guard type == S_IFDIR else { throw .folderNotADirectory(path: folder) }
        if ownedByUs {
            guard info.st_uid == uid else { throw .folderForeignOwner(path: folder, owner: info.st_uid) }
            if info.st_mode & 0o7777 != mode, chmod(folder, mode) != 0 {
                throw .cannotCreateFolder(path: folder, errno: errno)
            }
        } else {
            guard info.st_uid == uid || info.st_uid == 0 else {
                throw .folderForeignOwner(path: folder, owner: info.st_uid)
            }
            guard info.st_mode & 0o022 == 0 else { throw .folderWritableByOthers(path: folder) }
        }
    }

    /// What sits at a socket path, found by looking and by knocking.
    public enum Occupant: Sendable, Equatable {
        /// Nothing.
        case none
        /// Something that is not a socket (file, folder, symlink...).
        case notASocket
        /// A socket nobody listens on (`connect` got `ECONNREFUSED`).
        case staleSocket
        /// A socket a process accepts connections on.
        case liveSocket
    }

    /// Looks at `path` without changing anything. A socket whose listener's backlog is
    /// full (`EAGAIN`) counts as live.
    /// - Throws: `.cannotProbeSocket` when `connect` fails for another reason
    ///   (`EACCES` for a socket we may not write, for instance).
    public static func occupant(of path: String) throws(SocketSetupError) -> Occupant {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return .none }
            throw .cannotProbeSocket(path: path, errno: errno)
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else { return .notASocket }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .cannotProbeSocket(path: path, errno: errno) }
        defer { close(fd) }
        let result = withUnixAddress(path) { address, length in connect(fd, address, length) }
        if result == 0 { return .liveSocket }
        switch errno {
        case ECONNREFUSED: return .staleSocket
        case ENOENT: return .none
        case EAGAIN, EINPROGRESS: return .liveSocket
        case let error: throw .cannotProbeSocket(path: path, errno: error)
        }
    }

    /// Clears the way for `bind`: removes a stale socket, refuses anything else.
    /// Only call it holding the path's lock, else another daemon may be about to bind.
    static func removeStaleSocket(at path: String) throws(SocketSetupError) {
        switch try occupant(of: path) {
        case .none: return
        case .notASocket: throw .notASocket(path: path)
        case .liveSocket: throw .daemonAlreadyListening(path: path)
        case .staleSocket:
            guard unlink(path) == 0 || errno == ENOENT else {
                throw .cannotRemoveStaleSocket(path: path, errno: errno)
            }
        }
    }

    /// Calls `body` with a `sockaddr_un` for `path` and its length. `path` must fit.
    static func withUnixAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8.prefix(maximumPathBytes))
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}

/// A socket path made ready by `SocketPath.prepare`: the folder checked, the lock held,
/// the path free. The server binds to `path`, then calls `applyPermissions()`; at exit
/// it closes its listener and calls `cleanUp()`.
///
/// Thread-safe: `cleanUp()` may race with itself from a signal handler's queue and a
/// normal exit; a `Locked` flag makes the first call do the work.
public final class PreparedSocket: Sendable {
    /// The socket's path.
    public let path: String
    /// The lock held on `<path>.lock` until `cleanUp()`.
    public let lock: SocketLock
    /// The permission bits `applyPermissions()` sets.
    public let mode: mode_t
    /// The group `applyPermissions()` sets, if any.
    public let group: gid_t?
    /// The lock's descriptor (close-on-exec), -1 after `cleanUp()`.
    public var lockFD: Int32 { lock.fileDescriptor }

    /// Whether `cleanUp()` ran. Guarded by its lock.
    private let cleanedUp = Locked(false)

    init(path: String, lock: SocketLock, mode: mode_t, group: gid_t?) {
        self.path = path
        self.lock = lock
        self.mode = mode
        self.group = group
    }

    /// Creates the listening socket at `path` (non-blocking, close-on-exec), for
    /// `ServerBootstrap.withBoundSocket`. The daemon binds it itself, rather than letting
    /// NIO do it, so it knows the listening descriptor: when the process runs out of
    /// descriptors, `DescriptorReserve` accepts on it directly to answer waiting clients.
    /// - Returns: the listening descriptor; the caller owns it.
    /// - Throws: `.cannotBind` with the failing call's `errno`.
    public func bindAndListen(backlog: Int32) throws(SocketSetupError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .cannotBind(path: path, errno: errno) }
        let bound = SocketPath.withUnixAddress(path) { address, length in bind(fd, address, length) }
        guard bound == 0, listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw .cannotBind(path: path, errno: code)
        }
        return fd
    }

    /// Sets the bound socket's mode, then its group. Call right after `bind`; until then
    /// the socket has the umask's mode, which the 0700 folder keeps private.
    /// - Throws: `.cannotSetPermissions` with the failing call's `errno`.
    public func applyPermissions() throws(SocketSetupError) {
        // chown first: changing the group may clear set-id bits, never permission bits,
        // but doing the mode last guarantees the exact mode the operator asked for.
        if let group, chown(path, uid_t.max, group) != 0 {
            throw .cannotSetPermissions(path: path, errno: errno)
        }
        guard chmod(path, mode) == 0 else { throw .cannotSetPermissions(path: path, errno: errno) }
    }

    /// Removes the socket file (only if it still is a socket) and the lock file, then
    /// releases the lock. Idempotent. Close the listening socket first, so no client
    /// connects to a path that is about to vanish.
    public func cleanUp() {
        let first = cleanedUp.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        var info = stat()
        if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK {
            unlink(path)
        }
        lock.release(removingFile: true)
    }
}

/// Why a socket path could not be prepared. `description` is a one-line message for the
/// operator; the case is for tests and for choosing an exit status.
public enum SocketSetupError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path does not fit a `sockaddr_un`.
    case pathTooLong(path: String, bytes: Int)
    /// The path is relative or ends in `/`.
    case pathNotAbsolute(path: String)
    /// The folder's parent does not exist; we create only the last folder.
    case folderParentMissing(path: String)
    /// `mkdir`/`chmod`/`lstat` of the folder failed.
    case cannotCreateFolder(path: String, errno: Int32)
    /// The folder is a symlink, which could point anywhere.
    case folderIsSymlink(path: String)
    /// Something other than a folder is at the folder's path.
    case folderNotADirectory(path: String)
    /// The folder belongs to another user.
    case folderForeignOwner(path: String, owner: uid_t)
    /// The explicit folder is writable by group or others (like `/tmp`).
    case folderWritableByOthers(path: String)
    /// The lock file could not be opened or locked.
    case cannotOpenLock(path: String, errno: Int32)
    /// Another process holds the lock: another halcyond uses this socket path.
    case anotherDaemonHoldsLock(path: String, pid: pid_t?)
    /// The path holds something that is not a socket; we never delete it.
    case notASocket(path: String)
    /// A process accepts connections on the path.
    case daemonAlreadyListening(path: String)
    /// Probing the existing socket failed.
    case cannotProbeSocket(path: String, errno: Int32)
    /// The stale socket could not be removed.
    case cannotRemoveStaleSocket(path: String, errno: Int32)
    /// `chmod`/`chown` of the bound socket failed.
    case cannotSetPermissions(path: String, errno: Int32)
    /// `socket`/`bind`/`listen` of the path failed.
    case cannotBind(path: String, errno: Int32)
    /// systemd passed a descriptor we cannot serve (see `SystemdError`).
    case inheritedSocketUnusable(description: String)

    public var description: String {
        func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
        switch self {
        case .pathTooLong(let path, let bytes):
            return "socket path '\(path)' is \(bytes) bytes; the limit is \(SocketPath.maximumPathBytes)"
        case .pathNotAbsolute(let path):
            return "socket path '\(path)' must be an absolute path to a file"
        case .folderParentMissing(let path):
            return "cannot create socket folder \(path): its parent folder does not exist"
        case .cannotCreateFolder(let path, let code):
            return "cannot prepare socket folder \(path): \(reason(code))"
        case .folderIsSymlink(let path):
            return "refusing socket folder \(path): it is a symbolic link"
        case .folderNotADirectory(let path):
            return "refusing socket folder \(path): it is not a folder"
        case .folderForeignOwner(let path, let owner):
            return "refusing socket folder \(path): owned by uid \(owner), not by uid \(geteuid())"
        case .folderWritableByOthers(let path):
            return "refusing socket folder \(path): writable by other users; use a private folder"
        case .cannotOpenLock(let path, let code):
            return "cannot lock \(path): \(reason(code))"
        case .anotherDaemonHoldsLock(let path, let pid):
            return "another halcyond holds \(path)" + (pid.map { " (pid \($0))" } ?? "")
        case .notASocket(let path):
            return "refusing to replace \(path): it exists and is not a socket"
        case .daemonAlreadyListening(let path):
            return "a daemon is already listening at \(path)"
        case .cannotProbeSocket(let path, let code):
            return "cannot check existing socket \(path): \(reason(code))"
        case .cannotRemoveStaleSocket(let path, let code):
            return "cannot remove stale socket \(path): \(reason(code))"
        case .cannotSetPermissions(let path, let code):
            return "cannot set permissions of \(path): \(reason(code))"
        case .cannotBind(let path, let code):
            return "cannot listen on \(path): \(reason(code))"
        case .inheritedSocketUnusable(let description):
            return "cannot use the socket systemd passed: \(description)"
        }
    }
}

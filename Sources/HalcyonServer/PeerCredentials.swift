// Who is on the other end of an accepted Unix socket: the kernel's record of the peer's
// process, user and groups, taken when it called connect(2).

import CHalcyonSystem
import Glibc

/// The credentials of a Unix socket's peer, as the kernel recorded them at `connect()`
/// (`SO_PEERCRED` and `SO_PEERGROUPS`).
///
/// They describe the connecting process at connect time, not now: a process that later
/// changes user or hands the socket to another keeps the credentials it connected with,
/// which is what access control wants. Reading them is a couple of system calls; a value
/// is `Sendable` and any thread may read it.
public struct PeerCredentials: Sendable, Equatable, CustomStringConvertible {
    /// The peer's process id at connect time (0 if the kernel does not know it).
    public var pid: pid_t
    /// The peer's effective user id.
    public var uid: uid_t
    /// The peer's effective (primary) group id.
    public var gid: gid_t
    /// The peer's supplementary groups (`SO_PEERGROUPS`, Linux 4.13+); empty when the
    /// kernel cannot tell.
    public var groups: [gid_t]

    /// Credentials given by value; for tests and policy checks.
    public init(pid: pid_t, uid: uid_t, gid: gid_t, groups: [gid_t] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    /// Reads the peer credentials of a connected Unix stream socket. Any thread.
    /// - Throws: `PeerCredentialsError` with the `errno` of `getsockopt` (for instance
    ///   `ENOTSOCK`, or `ENOPROTOOPT` on a socket that is not `AF_UNIX`).
    public static func of(fileDescriptor: Int32) throws(PeerCredentialsError) -> PeerCredentials {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
        guard hc_peer_credentials(fileDescriptor, &pid, &uid, &gid) == 0 else {
            throw PeerCredentialsError(errno: errno)
        }
        return PeerCredentials(pid: pid, uid: uid, gid: gid, groups: supplementaryGroups(of: fileDescriptor))
    }

    /// `SO_PEERGROUPS` answers `ERANGE` with the size it needs when the buffer is short,
    /// so ask with a typical size first and once more with the exact one. Older kernels
    /// answer `ENOPROTOOPT`: then only the primary group counts.
    private static func supplementaryGroups(of fd: Int32) -> [gid_t] {
        var capacity = 32
        for _ in 0..<2 {
            var groups = [gid_t](repeating: 0, count: capacity)
            var length = socklen_t(capacity * MemoryLayout<gid_t>.stride)
            let result = groups.withUnsafeMutableBytes { buffer in
                getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, buffer.baseAddress, &length)
            }
            if result == 0 {
                return Array(groups.prefix(Int(length) / MemoryLayout<gid_t>.stride))
            }
            guard errno == ERANGE, Int(length) > capacity * MemoryLayout<gid_t>.stride else { return [] }
            capacity = Int(length) / MemoryLayout<gid_t>.stride
        }
        return []
    }

    public var description: String { "pid=\(pid) uid=\(uid) gid=\(gid)" }
}

/// Reading a peer's credentials failed; `errno` is the system's reason.
public struct PeerCredentialsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `errno` of the failed `getsockopt`.
    public var errno: Int32

    public var description: String { "cannot read peer credentials: \(String(cString: strerror(errno)))" }
}

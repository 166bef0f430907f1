// Who is on the other end of an accepted Unix socket: the kernel's record of the peer's
// process, user and groups, taken when it called connect(2).

import Glibc
import NIOCore

/// The credentials of a Unix socket's peer, as the kernel recorded them at `connect()`
/// (`SO_PEERCRED` and `SO_PEERGROUPS`). The daemon reads them with `of(channel:)` for
/// every accepted connection, before the access policy decides.
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

    /// Reads the peer credentials of an accepted Unix socket channel through NIO's
    /// socket-option access (`SO_PEERCRED`, then `SO_PEERGROUPS`), as NIO does not expose
    /// the descriptor. On the channel's own event loop the future is complete on return.
    ///
    /// A kernel without `SO_PEERGROUPS` (before 4.13) leaves `groups` empty: then only the
    /// primary group counts, as it does for a peer with more than 32 groups (`ERANGE`).
    /// - Returns: a future failing with `PeerCredentialsError` when the channel is not a
    ///   socket, else with the `IOError` of `getsockopt`.
    static func of(channel: any Channel) -> EventLoopFuture<PeerCredentials> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeFailedFuture(PeerCredentialsError(errno: ENOTSOCK))
        }
        let raw: EventLoopFuture<Ucred> = provider.unsafeGetSocketOption(
            level: .socket, name: NIOBSDSocket.Option(rawValue: SO_PEERCRED)
        )
        let groups: EventLoopFuture<Groups> = provider.unsafeGetSocketOption(
            level: .socket, name: NIOBSDSocket.Option(rawValue: SO_PEERGROUPS)
        )
        return raw.and(groups.flatMap { groups in
            // NIO zero-fills the buffer and drops the length the kernel wrote, so unused
            // slots read as group 0. The kernel keeps groups sorted, so a real group 0 can
            // only be first, followed by larger ones; when every slot is 0, an empty
            // buffer tells "no groups" (it fits) from "only group 0" (ERANGE).
            let list = groups.slots
            let nonZero = list.filter { $0 != 0 }
            guard nonZero.isEmpty else {
                return channel.eventLoop.makeSucceededFuture(list[0] == 0 ? [0] + nonZero : nonZero)
            }
            let none: EventLoopFuture<NoGroups> = provider.unsafeGetSocketOption(
                level: .socket, name: NIOBSDSocket.Option(rawValue: SO_PEERGROUPS)
            )
            return none.map { _ in [gid_t]() }.recover { _ in [0] }
        }.recover { _ in [gid_t]() }).map { raw, groups in
            PeerCredentials(pid: raw.pid, uid: raw.uid, gid: raw.gid, groups: groups)
        }
    }

    /// The kernel's `struct ucred`, mirrored because Glibc's does not import.
    struct Ucred: Sendable {
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
    }

    /// Room for 32 supplementary groups as `SO_PEERGROUPS` writes them; a peer with more
    /// gets `ERANGE`, and is then matched on its primary group only.
    struct Groups: Sendable {
        var storage: (
            gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t,
            gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t, gid_t,
            gid_t, gid_t
        ) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

        var slots: [gid_t] { withUnsafeBytes(of: storage) { Array($0.bindMemory(to: gid_t.self)) } }
    }

    /// A zero-length buffer: `SO_PEERGROUPS` into it succeeds only for a peer with no groups.
    struct NoGroups: Sendable {}

    public var description: String { "pid=\(pid) uid=\(uid) gid=\(gid)" }
}

/// Reading a peer's credentials failed; `errno` is the system's reason.
public struct PeerCredentialsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Why: `ENOTSOCK` for a channel that is not a socket.
    public var errno: Int32

    public var description: String { "cannot read peer credentials: \(String(cString: strerror(errno)))" }
}

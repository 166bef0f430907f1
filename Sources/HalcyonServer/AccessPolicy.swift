// Who may talk to the daemon, decided once per accepted connection from its peer
// credentials, and the user/group name look-ups the flags need to say so.

import Foundation
import Glibc

/// Decides whether a connected peer may use the daemon.
///
/// Allowed: the daemon's own effective uid, root (uid 0, who could read the cache folder
/// anyway), every uid in `allowedUIDs`, and any peer whose primary group or one of whose
/// supplementary groups is in `allowedGIDs`. Everyone else is refused: the server closes
/// the connection at once and logs it.
///
/// Supplementary groups come from `SO_PEERGROUPS`, which the kernel records at
/// `connect()` time like `SO_PEERCRED`. We deliberately do not read
/// `/proc/<pid>/status`: by the time we read it the peer may have exited and its pid been
/// reused, or it may have passed the socket on, so it could describe another process.
///
/// The policy only narrows what the file system already allows: to connect at all, a
/// peer needs write permission on the socket (`--socket-mode`, `--socket-group`) and
/// search permission on its folder. An immutable value: any thread may call `allows`.
public struct AccessPolicy: Sendable, Equatable {
    /// The daemon's own effective uid, always allowed.
    public var ownUID: uid_t
    /// Extra users allowed (`--allow-uid`).
    public var allowedUIDs: Set<uid_t>
    /// Groups whose members are allowed (`--allow-gid`).
    public var allowedGIDs: Set<gid_t>

    /// The policy of `configuration`, for a daemon running as `ownUID` (default: this
    /// process's effective uid).
    public init(configuration: ServerConfiguration, ownUID: uid_t = geteuid()) {
        self.ownUID = ownUID
        self.allowedUIDs = Set(configuration.allowedUIDs)
        self.allowedGIDs = Set(configuration.allowedGIDs)
    }

    /// Whether `peer` may use the daemon.
    public func allows(_ peer: PeerCredentials) -> Bool {
        if peer.uid == ownUID || peer.uid == 0 || allowedUIDs.contains(peer.uid) { return true }
        if allowedGIDs.isEmpty { return false }
        return allowedGIDs.contains(peer.gid) || peer.groups.contains { allowedGIDs.contains($0) }
    }
}

/// User and group names from the system's databases (`/etc/passwd`, `/etc/group`, or
/// whatever NSS is configured with). The `_r` functions keep it thread-safe: any thread.
public enum AccountNames {
    /// A name or number that names no user or group.
    public struct UnknownNameError: Error, Sendable, Equatable, CustomStringConvertible {
        /// What kind of name: "user" or "group".
        public var kind: String
        /// The text given.
        public var name: String
        public var description: String { "no \(kind) named '\(name)'" }
    }

    /// A user id from a decimal number (taken as is, even without a password entry, as
    /// `chown` does) or a user name.
    public static func userID(_ text: String) throws(UnknownNameError) -> uid_t {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let number = uid_t(trimmed) { return number }
        guard let ids = userIDs(named: trimmed) else { throw UnknownNameError(kind: "user", name: text) }
        return ids.uid
    }

    /// The user id and primary group of the user called `name`, or nil.
    private static func userIDs(named name: String) -> (uid: uid_t, gid: gid_t)? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard !name.isEmpty, getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return (entry.pw_uid, entry.pw_gid)
    }

    /// A group id from a decimal number or a group name.
    public static func groupID(_ text: String) throws(UnknownNameError) -> gid_t {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let number = gid_t(trimmed) { return number }
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 65_536)
        let status = getgrnam_r(trimmed, &entry, &buffer, buffer.count, &result)
        guard status == 0, result != nil, !trimmed.isEmpty else { throw UnknownNameError(kind: "group", name: text) }
        return entry.gr_gid
    }

    /// The home folder of `uid` from the password database, or nil.
    public static func homeDirectory(of uid: uid_t) -> String? {
        passwordEntry(of: uid) { $0.pw_dir }
    }

    /// The user name of `uid` from the password database, or nil.
    public static func userName(_ uid: uid_t) -> String? {
        passwordEntry(of: uid) { $0.pw_name }
    }

    /// The credentials a process of the user called `name` would have, from the password
    /// and group databases (its primary group and every group that lists it), or nil when
    /// no user has that name. For peers the daemon knows of without a connection.
    public static func credentials(ofUser name: String) -> PeerCredentials? {
        guard let ids = userIDs(named: name) else { return nil }
        var groups = [gid_t](repeating: 0, count: 64)
        var count = Int32(groups.count)
        if getgrouplist(name, ids.gid, &groups, &count) < 0 {
            // Too small: `count` now says how many there are.
            groups = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(name, ids.gid, &groups, &count) < 0 { count = 0 }
        }
        return PeerCredentials(pid: 0, uid: ids.uid, gid: ids.gid, groups: Array(groups.prefix(Int(max(0, count)))))
    }

    /// One text field of `uid`'s password entry, or nil.
    private static func passwordEntry(of uid: uid_t, _ field: (passwd) -> UnsafeMutablePointer<CChar>?) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let text = field(entry) else {
            return nil
        }
        return String(cString: text)
    }
}

// The two pieces of the systemd protocol a daemon needs, written against the documented
// wire format rather than libsystemd: socket activation (sd_listen_fds(3)) and readiness
// notification (sd_notify(3)).

import Foundation
import Glibc

/// systemd socket activation and `sd_notify`, without linking libsystemd.
///
/// Both are harmless outside systemd: with no `LISTEN_*` variables there is nothing to
/// inherit, with no `NOTIFY_SOCKET` nothing is sent. Stateless and thread-safe, except
/// that `listenFileDescriptors` changes the process environment (`unsetenv`) when asked
/// to, so call it once, at start, before other threads read the environment.
public enum Systemd {
    /// The first inherited descriptor, `SD_LISTEN_FDS_START`.
    public static let listenFileDescriptorsStart: Int32 = 3

    /// The descriptors systemd passed us: `LISTEN_FDS` of them from `baseFD` on, when
    /// `LISTEN_PID` is our pid (otherwise they were meant for a parent and are not ours).
    /// Each gets `FD_CLOEXEC`, so children we might start do not inherit the listener.
    ///
    /// - Parameters:
    ///   - environment: where to read `LISTEN_PID`/`LISTEN_FDS`; default, the process's.
    ///   - baseFD: the first descriptor; default 3. Tests pass another, as 3 may be in use.
    ///   - pid: the pid `LISTEN_PID` must equal; default `getpid()`.
    ///   - unsetEnvironment: whether to remove `LISTEN_PID`, `LISTEN_FDS` and
    ///     `LISTEN_FDNAMES` from the process environment, so a child does not believe the
    ///     descriptors are its own. Default `true`.
    /// - Returns: the descriptors, empty when not socket-activated.
    /// - Important: never unlink the path such a socket is bound to: systemd owns it and
    ///   keeps it across our restarts.
    public static func listenFileDescriptors(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        baseFD: Int32 = listenFileDescriptorsStart,
        pid: pid_t = getpid(),
        unsetEnvironment: Bool = true
    ) -> [Int32] {
        defer {
            if unsetEnvironment {
                unsetenv("LISTEN_PID")
                unsetenv("LISTEN_FDS")
                unsetenv("LISTEN_FDNAMES")
            }
        }
        guard let listenPID = environment["LISTEN_PID"].flatMap({ pid_t($0) }), listenPID == pid,
              let count = environment["LISTEN_FDS"].flatMap({ Int32($0) }), count > 0,
              count < Int32.max - baseFD
        else { return [] }
        let descriptors = Array(baseFD..<(baseFD + count))
        for fd in descriptors {
            let flags = fcntl(fd, F_GETFD)
            if flags >= 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
        }
        return descriptors
    }

    /// Checks that an inherited descriptor is a listening Unix stream socket, as the
    /// example `halcyon.socket` unit makes it, and returns the path it is bound to (empty
    /// for an abstract or unnamed socket).
    /// - Throws: `SystemdError.notAListeningUnixSocket` naming what is wrong.
    public static func listeningUnixSocketPath(of fd: Int32) throws(SystemdError) -> String {
        var type: Int32 = 0
        var listening: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0 else {
            throw .notAListeningUnixSocket(fd: fd, reason: String(cString: strerror(errno)))
        }
        guard type == Int32(SOCK_STREAM.rawValue) else {
            throw .notAListeningUnixSocket(fd: fd, reason: "not a stream socket (use ListenStream=)")
        }
        length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0, listening != 0 else {
            throw .notAListeningUnixSocket(fd: fd, reason: "not listening (Accept=yes is not supported)")
        }
        var address = sockaddr_un()
        var addressLength = socklen_t(MemoryLayout<sockaddr_un>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &addressLength) }
        }
        guard named == 0, address.sun_family == sa_family_t(AF_UNIX) else {
            throw .notAListeningUnixSocket(fd: fd, reason: "not a Unix domain socket")
        }
        let pathLength = Int(addressLength) - MemoryLayout<sa_family_t>.size
        guard pathLength > 0 else { return "" }
        let bytes = withUnsafeBytes(of: address.sun_path) { Array($0.prefix(pathLength)) }
        if bytes.first == 0 { return "" }
        return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// Sends `state` (for instance `"READY=1"`, `"STOPPING=1"`, `"STATUS=..."`, several
    /// joined by newlines) to the service manager's `NOTIFY_SOCKET`. A name starting with
    /// `@` is in the abstract namespace. Any thread; never blocks for long (one datagram).
    /// - Returns: `true` if sent; `false` when `NOTIFY_SOCKET` is unset (not under
    ///   systemd, or not `Type=notify`) or the send failed; notification is best effort,
    ///   as in `sd_notify`.
    @discardableResult
    public static func notify(
        _ state: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Bool {
        guard let target = environment["NOTIFY_SOCKET"], !target.isEmpty else { return false }
        var pathBytes = Array(target.utf8)
        if pathBytes.first == UInt8(ascii: "@") {
            pathBytes[0] = 0
        } else if pathBytes.first != UInt8(ascii: "/") {
            // vsock: addresses and other forms are for VMs; not supported here.
            return false
        }
        guard pathBytes.count <= SocketPath.maximumPathBytes else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: pathBytes) }
        // An abstract name is exactly its bytes, with no terminating NUL counted.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes[0] == 0 ? 0 : 1))
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                message.withUnsafeBytes {
                    sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), socketAddress, length)
                }
            }
        }
        return sent == message.count
    }

    /// `notify("READY=1\nMAINPID=<pid>")`: the socket is bound and requests are served.
    @discardableResult
    public static func notifyReady(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        notify("READY=1\nMAINPID=\(getpid())", environment: environment)
    }

    /// `notify("STOPPING=1")`: shutdown has begun (draining).
    @discardableResult
    public static func notifyStopping(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        notify("STOPPING=1", environment: environment)
    }
}

/// A problem with a descriptor systemd passed us.
public enum SystemdError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The descriptor is not what `halcyon.socket` should give us.
    case notAListeningUnixSocket(fd: Int32, reason: String)

    public var description: String {
        switch self {
        case .notAListeningUnixSocket(let fd, let reason): return "inherited descriptor \(fd): \(reason)"
        }
    }
}

// What the daemon does when it runs out of file descriptors: it cannot accept a waiting
// client, so the listening socket stays readable and every wake-up of the event loop
// fails the same accept again. Backing off alone does not help (the event loop keeps
// the read it started pending until an accept succeeds), so the daemon keeps one spare
// descriptor: when accepts fail for want of descriptors, it gives the spare up, accepts
// the waiting clients one at a time, tells each why it cannot be served, closes it, and
// takes the spare back. Every wake-up then makes progress, and clients get an answer
// instead of hanging in the backlog.
//
// The daemon binds the listening socket itself, so it knows the descriptor; with the spare
// an out-of-descriptors episode costs no CPU, where a backoff alone spins a core
// (Benchmarks/RESULTS.md, "Out of file descriptors: the spare descriptor"). NIO's
// `AcceptBackoffHandler` then spaces the next accepts by 250 ms. Refused clients count in
// `refusedPeers`; the first failure of each episode is logged.

import Foundation
import HalcyonSupport

/// One descriptor held in reserve for shedding clients when the process is out of them.
///
/// Threading: thread-safe; `spare` is a `Locked` descriptor, held while `shed` runs, so
/// two calls never give the spare up at once.
final class DescriptorReserve: Sendable {
    /// The spare (open on /dev/null), or -1 while it is given up or could not be had.
    private let spare: Locked<Int32>
    /// Connections accepted only to be refused; read by `shedCount`.
    private let shed = Locked(0)
    /// The most clients one call sheds, so one call never holds its event loop for long.
    static let maximumPerCall = 256

    init() {
        spare = Locked(open("/dev/null", O_RDONLY | O_CLOEXEC))
    }

    deinit {
        spare.withLock { if $0 >= 0 { close($0) } }
    }

    /// Connections refused so far for want of descriptors.
    var shedCount: Int { shed.withLock { $0 } }

    /// Frees the spare, accepts the clients waiting on `listener` (at most
    /// `maximumPerCall`), writes `line` and a newline to each and closes it, then takes
    /// the spare back. Returns how many clients were refused.
    func shedWaitingClients(listener: Int32, line: [UInt8]) -> Int {
        guard listener >= 0 else { return 0 }
        let refused = spare.withLock { fd -> Int in
            if fd >= 0 { close(fd) }
            var count = 0
            while count < Self.maximumPerCall {
                // The listener is non-blocking, so this never waits. (`accept4` is not
                // imported; the flags are set right after instead.)
                let client = accept(listener, nil, nil)
                guard client >= 0 else { break }  // EAGAIN: nobody waits; EMFILE: the spare is gone too
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                _ = fcntl(client, F_SETFL, O_NONBLOCK)
                Self.refuse(client, line: line)
                count += 1
            }
            fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            return count
        }
        shed.withLock { $0 += refused }
        return refused
    }

    /// Best effort, never blocking: the line fits a fresh socket's buffer. Input the client
    /// already sent is read first, since closing a Unix socket with unread input resets
    /// the connection and the client would see ECONNRESET instead of the line.
    private static func refuse(_ client: Int32, line: [UInt8]) {
        var scratch = [UInt8](repeating: 0, count: 4096)
        while recv(client, &scratch, scratch.count, Int32(MSG_DONTWAIT)) > 0 {}
        let message = line + [UInt8(ascii: "\n")]
        _ = message.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        shutdown(client, Int32(SHUT_WR))
        close(client)
    }
}

import Foundation
import Glibc
import HalcyonSupport
import Testing
@testable import HalcyonServer

@Suite(.timeLimit(.minutes(1))) struct SocketLockTests {
    @Test func aSecondHolderIsRefusedWithThePID() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let path = "\(base)/h.sock.lock"
        let first = try SocketLock(path: path)
        #expect(throws: SocketSetupError.anotherDaemonHoldsLock(path: path, pid: getpid())) {
            try SocketLock(path: path)
        }
        first.release(removingFile: false)
        #expect(TestSockets.exists(path))
        let second = try SocketLock(path: path)
        second.release(removingFile: true)
        second.release(removingFile: true)
        #expect(!TestSockets.exists(path))
    }

    @Test func theMessageNamesTheLock() {
        let error = SocketSetupError.anotherDaemonHoldsLock(path: "/run/h.sock.lock", pid: 42)
        #expect(error.description == "another halcyond holds /run/h.sock.lock (pid 42)")
    }

    @Test func refusesASymlinkAtTheLockPath() {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        symlink("\(base)/elsewhere", "\(base)/h.sock.lock")
        #expect(throws: SocketSetupError.cannotOpenLock(path: "\(base)/h.sock.lock", errno: ELOOP)) {
            try SocketLock(path: "\(base)/h.sock.lock")
        }
        #expect(!TestSockets.exists("\(base)/elsewhere"))
    }

    @Test func droppingTheLockFreesIt() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let path = "\(base)/h.sock.lock"
        do { _ = try SocketLock(path: path) }
        let again = try SocketLock(path: path)
        again.release(removingFile: true)
    }

    /// Daemons starting together: exactly one wins the path, every other one is told
    /// why, and none removes the winner's socket.
    @Test func racingPreparesHaveOneWinner() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let path = "\(base)/h.sock"
        let config = TestSockets.config(path)
        let winners = Locked<[PreparedSocket]>([])
        let losers = Locked<[SocketSetupError]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do {
                let prepared = try SocketPath.prepare(config, isDefaultPath: false)
                winners.withLock { $0.append(prepared) }
            } catch let error as SocketSetupError {
                losers.withLock { $0.append(error) }
            } catch {
                Issue.record("untyped \(error)")
            }
        }
        let won = winners.withLock { $0 }
        let lost = losers.withLock { $0 }
        #expect(won.count + lost.count == 8)
        // Every winner still holds its lock here, so a second winner would be a bug.
        #expect(won.count == 1)
        for error in lost {
            guard case .anotherDaemonHoldsLock = error else {
                Issue.record("unexpected \(error)")
                continue
            }
        }
        won.forEach { $0.cleanUp() }
    }
}

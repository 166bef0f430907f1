import Foundation
import Glibc
import Testing
@testable import HalcyonServer

@Suite(.timeLimit(.minutes(1))) struct SystemdTests {
    let pid = getpid()

    @Test func notSocketActivatedGivesNothing() {
        #expect(Systemd.listenFileDescriptors(environment: [:], unsetEnvironment: false).isEmpty)
        // Meant for another process (our parent, say): not ours.
        #expect(Systemd.listenFileDescriptors(environment: ["LISTEN_PID": "\(pid + 1)", "LISTEN_FDS": "1"], unsetEnvironment: false).isEmpty)
        #expect(Systemd.listenFileDescriptors(environment: ["LISTEN_PID": "\(pid)", "LISTEN_FDS": "0"], unsetEnvironment: false).isEmpty)
        #expect(Systemd.listenFileDescriptors(environment: ["LISTEN_PID": "\(pid)", "LISTEN_FDS": "x"], unsetEnvironment: false).isEmpty)
        #expect(Systemd.listenFileDescriptors(environment: ["LISTEN_FDS": "1"], unsetEnvironment: false).isEmpty)
    }

    /// Descriptors 3, 4... may be in use in a test process, so the inherited ones are
    /// placed with dup2 at a high base, which the function takes as a parameter.
    @Test func inheritedDescriptorsAreReturnedAndMadeCloseOnExec() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let listener = TestSockets.bind("\(base)/h.sock")
        defer { close(listener) }
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        let first: Int32 = 900
        try #require(dup2(listener, first) == first && dup2(pair[0], first + 1) == first + 1)
        defer { close(first); close(first + 1) }
        #expect(fcntl(first, F_GETFD) & FD_CLOEXEC == 0)

        let fds = Systemd.listenFileDescriptors(
            environment: ["LISTEN_PID": "\(pid)", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:b"],
            baseFD: first, unsetEnvironment: false)
        #expect(fds == [first, first + 1])
        for fd in fds { #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0) }

        #expect(try Systemd.listeningUnixSocketPath(of: first) == "\(base)/h.sock")
        #expect(throws: SystemdError.self) { try Systemd.listeningUnixSocketPath(of: first + 1) }
    }

    @Test func rejectsADatagramSocket() {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let fd = TestSockets.bind("\(base)/d.sock", listening: false, type: Int32(SOCK_DGRAM.rawValue))
        defer { close(fd) }
        #expect(throws: SystemdError.self) { try Systemd.listeningUnixSocketPath(of: fd) }
    }

    @Test func notifyIsANoOpWithoutNotifySocket() {
        #expect(!Systemd.notify("READY=1", environment: [:]))
        #expect(!Systemd.notify("READY=1", environment: ["NOTIFY_SOCKET": ""]))
    }

    @Test func notifiesAPathSocket() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let path = "\(base)/notify"
        let receiver = TestSockets.bind(path, listening: false, type: Int32(SOCK_DGRAM.rawValue))
        defer { close(receiver) }
        #expect(Systemd.notifyReady(environment: ["NOTIFY_SOCKET": path]))
        #expect(Self.receive(receiver) == "READY=1\nMAINPID=\(pid)")
        #expect(Systemd.notifyStopping(environment: ["NOTIFY_SOCKET": path]))
        #expect(Self.receive(receiver) == "STOPPING=1")
    }

    @Test func notifiesAnAbstractSocket() throws {
        let name = "halcyon-test-\(UUID().uuidString)"
        let receiver = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(receiver) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = [UInt8(0)] + Array(name.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(receiver, $0, length) }
        }
        try #require(bound == 0)
        #expect(Systemd.notify("STATUS=warming up", environment: ["NOTIFY_SOCKET": "@" + name]))
        #expect(Self.receive(receiver) == "STATUS=warming up")
    }

    @Test func notifyToNobodyFailsQuietly() {
        #expect(!Systemd.notify("READY=1", environment: ["NOTIFY_SOCKET": "/tmp/hcops-missing-\(UUID().uuidString.prefix(8))"]))
    }

    static func receive(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        guard count >= 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }
}

@Suite struct ListenSourceTests {
    @Test func anInheritedSocketIsUsedAsIs() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let listener = TestSockets.bind("\(base)/activated.sock")
        defer { close(listener) }
        let fd: Int32 = 910
        try #require(dup2(listener, fd) == fd)
        defer { close(fd) }
        let config = TestSockets.config("\(base)/ignored.sock")
        let source = try SocketPath.listenSource(
            config, environment: ["LISTEN_PID": "\(getpid())", "LISTEN_FDS": "1"], baseFD: fd)
        guard case .inherited(let inheritedFD, let path) = source else {
            Issue.record("expected the inherited socket, got \(source)")
            return
        }
        #expect(inheritedFD == fd && path == "\(base)/activated.sock")
        // Neither a lock nor a prepared path was made.
        #expect(!TestSockets.exists("\(base)/ignored.sock.lock"))
    }

    @Test func anUnusableInheritedDescriptorIsRefused() throws {
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        let fd: Int32 = 920
        try #require(dup2(pair[0], fd) == fd)
        defer { close(fd) }
        #expect(throws: SocketSetupError.self) {
            try SocketPath.listenSource(TestSockets.config("/tmp/hcops-none/h.sock"),
                                        environment: ["LISTEN_PID": "\(getpid())", "LISTEN_FDS": "1"], baseFD: fd)
        }
    }

    @Test func withoutSystemdThePathIsPrepared() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        // listenSource uses prepare(_:), which applies the explicit-folder rule here.
        let source = try SocketPath.listenSource(TestSockets.config("\(base)/h.sock"), environment: [:])
        guard case .bind(let prepared) = source else {
            Issue.record("expected a prepared path, got \(source)")
            return
        }
        #expect(prepared.path == "\(base)/h.sock" && prepared.lockFD >= 0)
        prepared.cleanUp()
    }
}

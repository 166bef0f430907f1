import Foundation
import Glibc
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing
@testable import HalcyonServer

/// The daemon's own path: credentials read through NIO's socket options on a channel a
/// real `ServerBootstrap` accepted from a real client.
@Suite(.timeLimit(.minutes(1))) struct PeerCredentialsTests {
    @Test func readsAnAcceptedChannel() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let seen = group.next().makePromise(of: PeerCredentials.self)
        let server = try ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                PeerCredentials.of(channel: channel).map { seen.succeed($0) }.recover { seen.fail($0) }
            }
            .bind(unixDomainSocketPath: "\(base)/h.sock").wait()
        defer { try? server.close().wait() }
        let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(client) }
        try #require(SocketPath.withUnixAddress("\(base)/h.sock") { connect(client, $0, $1) } == 0)
        let peer = try seen.futureResult.wait()
        #expect(peer.pid == getpid())
        #expect(peer.uid == geteuid())
        #expect(peer.gid == getegid())
        let count = getgroups(0, nil)
        var ours = [gid_t](repeating: 0, count: Int(max(count, 0)))
        _ = getgroups(count, &ours)
        #expect(Set(peer.groups) == Set(ours))
    }

    @Test func failsOnAChannelThatIsNotASocket() {
        let channel = EmbeddedChannel()
        #expect(throws: PeerCredentialsError(errno: ENOTSOCK)) {
            try PeerCredentials.of(channel: channel).wait()
        }
    }
}

@Suite struct AccessPolicyTests {
    func policy(uids: [uid_t] = [], gids: [gid_t] = []) -> AccessPolicy {
        var config = ServerConfiguration(socketPath: "/tmp/x.sock", cacheDirectory: URL(fileURLWithPath: "/tmp"))
        config.allowedUIDs = uids
        config.allowedGIDs = gids
        return AccessPolicy(configuration: config, ownUID: 1000)
    }

    @Test func ownUserAndRootAreAlwaysAllowed() {
        let policy = policy()
        #expect(policy.allows(PeerCredentials(pid: 1, uid: 1000, gid: 1000)))
        #expect(policy.allows(PeerCredentials(pid: 1, uid: 0, gid: 0)))
        #expect(!policy.allows(PeerCredentials(pid: 1, uid: 1001, gid: 1000)))
        #expect(!policy.allows(PeerCredentials(pid: 1, uid: 65534, gid: 65534, groups: [1000, 0])))
    }

    @Test func allowedUsers() {
        let policy = policy(uids: [1001, 1002])
        #expect(policy.allows(PeerCredentials(pid: 1, uid: 1002, gid: 5)))
        #expect(!policy.allows(PeerCredentials(pid: 1, uid: 1003, gid: 5)))
    }

    @Test func allowedGroupsPrimaryOrSupplementary() {
        let policy = policy(gids: [50])
        #expect(policy.allows(PeerCredentials(pid: 1, uid: 2000, gid: 50)))
        #expect(policy.allows(PeerCredentials(pid: 1, uid: 2000, gid: 2000, groups: [7, 50])))
        #expect(!policy.allows(PeerCredentials(pid: 1, uid: 2000, gid: 2000, groups: [7, 51])))
    }

    @Test func policyDefaultsToOurEffectiveUID() {
        let config = ServerConfiguration(socketPath: "/tmp/x.sock", cacheDirectory: URL(fileURLWithPath: "/tmp"))
        #expect(AccessPolicy(configuration: config).ownUID == geteuid())
    }

    @Test func namesAndNumbers() throws {
        #expect(try AccountNames.userID("root") == 0)
        #expect(try AccountNames.userID("4242") == 4242)
        #expect(try AccountNames.groupID("root") == 0)
        #expect(try AccountNames.groupID("77") == 77)
        #expect(throws: AccountNames.UnknownNameError.self) { try AccountNames.userID("no-such-user-halcyon") }
        #expect(throws: AccountNames.UnknownNameError.self) { try AccountNames.groupID("") }
        #expect(AccountNames.homeDirectory(of: 0) == "/root")
    }
}

/// A real peer of another user: a client started as `nobody` connects, and the policy
/// sees its uid and refuses it. Needs root (to switch user) and setpriv.
@Suite(.timeLimit(.minutes(1))) struct ForeignPeerTests {
    static let setpriv = "/usr/bin/setpriv"
    static let python = "/usr/bin/python3"

    @Test(.enabled(if: geteuid() == 0, "needs root to run a client as nobody"),
          .enabled(if: FileManager.default.isExecutableFile(atPath: setpriv), "needs setpriv"),
          .enabled(if: FileManager.default.isExecutableFile(atPath: python), "needs /usr/bin/python3"))
    func aClientRunningAsNobodyIsSeenAndRefused() throws {
        let setpriv = Self.setpriv
        let python = Self.python
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        chmod(base, 0o711)
        let path = "\(base)/h.sock"
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let seen = group.next().makePromise(of: PeerCredentials.self)
        let server = try ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                PeerCredentials.of(channel: channel).map { seen.succeed($0) }.recover { seen.fail($0) }
                    .flatMap { channel.close() }
            }
            .bind(unixDomainSocketPath: path).wait()
        defer { try? server.close().wait() }
        chmod(path, 0o666)

        let client = Process()
        client.executableURL = URL(fileURLWithPath: setpriv)
        client.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", python, "-c",
                            "import socket; s = socket.socket(socket.AF_UNIX); s.connect('\(path)'); s.recv(1)"]
        try client.run()
        defer { client.waitUntilExit() }
        let peer = try seen.futureResult.wait()
        #expect(peer.uid == 65534 && peer.gid == 65534)
        #expect(peer.groups.isEmpty)
        #expect(peer.pid != getpid())
        let config = TestSockets.config(path)
        #expect(!AccessPolicy(configuration: config).allows(peer))
        var allowing = config
        allowing.allowedUIDs = [65534]
        #expect(AccessPolicy(configuration: allowing).allows(peer))
    }
}

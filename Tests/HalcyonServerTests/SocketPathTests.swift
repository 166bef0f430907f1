import Foundation
import Glibc
import Testing
@testable import HalcyonServer

/// Real folders and sockets for the socket tests: short unique paths under /tmp (a Unix
/// socket path holds at most 107 bytes), removed by the caller.
enum TestSockets {
    /// A fresh private folder such as `/tmp/hcops-1a2b3c4d`.
    static func makeFolder() -> String {
        let path = "/tmp/hcops-\(UUID().uuidString.prefix(8).lowercased())"
        mkdir(path, 0o700)
        return path
    }

    static func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A stream socket bound at `path`; listening unless told otherwise.
    static func bind(_ path: String, listening: Bool = true, type: Int32 = Int32(SOCK_STREAM.rawValue)) -> Int32 {
        let fd = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        precondition(fd >= 0)
        let bound = SocketPath.withUnixAddress(path) { Glibc.bind(fd, $0, $1) }
        precondition(bound == 0, "bind \(path): \(errno)")
        if listening { precondition(listen(fd, 8) == 0) }
        return fd
    }

    static func mode(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o7777 : 0
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    static func config(_ socketPath: String, mode: mode_t = 0o600) -> ServerConfiguration {
        var config = ServerConfiguration(socketPath: socketPath, cacheDirectory: URL(fileURLWithPath: "/nonexistent"))
        config.socketMode = mode
        return config
    }
}

@Suite struct SocketPathTests {
    @Test func createsAMissingFolderWithMode0700() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let prepared = try SocketPath.prepare(TestSockets.config("\(base)/run/h.sock"), isDefaultPath: false)
        defer { prepared.cleanUp() }
        #expect(TestSockets.mode("\(base)/run") == 0o700)
        #expect(prepared.path == "\(base)/run/h.sock")
        #expect(TestSockets.exists("\(base)/run/h.sock.lock"))
    }

    @Test func sharedSocketModeMakesTheFolderSearchable() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let prepared = try SocketPath.prepare(TestSockets.config("\(base)/run/h.sock", mode: 0o660), isDefaultPath: false)
        defer { prepared.cleanUp() }
        #expect(TestSockets.mode("\(base)/run") == 0o711)
    }

    @Test func refusesWhenTheParentIsMissing() {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        #expect(throws: SocketSetupError.folderParentMissing(path: "\(base)/a/b")) {
            try SocketPath.prepare(TestSockets.config("\(base)/a/b/h.sock"), isDefaultPath: false)
        }
    }

    @Test func refusesASymlinkedFolder() {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        mkdir("\(base)/real", 0o700)
        symlink("\(base)/real", "\(base)/link")
        for isDefault in [true, false] {
            #expect(throws: SocketSetupError.folderIsSymlink(path: "\(base)/link")) {
                try SocketPath.prepare(TestSockets.config("\(base)/link/h.sock"), isDefaultPath: isDefault)
            }
        }
        #expect(!TestSockets.exists("\(base)/real/h.sock.lock"))
    }

    @Test func refusesAFileWhereTheFolderShouldBe() {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        _ = FileManager.default.createFile(atPath: "\(base)/file", contents: Data())
        #expect(throws: SocketSetupError.folderNotADirectory(path: "\(base)/file")) {
            try SocketPath.prepare(TestSockets.config("\(base)/file/h.sock"), isDefaultPath: false)
        }
    }

    @Test func explicitFolderMustNotBeWritableByOthersAndKeepsItsMode() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        chmod(base, 0o777)
        #expect(throws: SocketSetupError.folderWritableByOthers(path: base)) {
            try SocketPath.prepare(TestSockets.config("\(base)/h.sock"), isDefaultPath: false)
        }
        chmod(base, 0o755)
        let prepared = try SocketPath.prepare(TestSockets.config("\(base)/h.sock"), isDefaultPath: false)
        prepared.cleanUp()
        #expect(TestSockets.mode(base) == 0o755)
    }

    @Test func defaultFolderIsTightenedTo0700() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        chmod(base, 0o755)
        let prepared = try SocketPath.prepare(TestSockets.config("\(base)/h.sock"), isDefaultPath: true)
        prepared.cleanUp()
        #expect(TestSockets.mode(base) == 0o700)
    }

    @Test(.enabled(if: geteuid() == 0, "needs root to give a folder away"))
    func refusesAForeignOwner() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        mkdir("\(base)/theirs", 0o700)
        chown("\(base)/theirs", 65534, 65534)
        for isDefault in [true, false] {
            #expect(throws: SocketSetupError.folderForeignOwner(path: "\(base)/theirs", owner: 65534)) {
                try SocketPath.prepare(TestSockets.config("\(base)/theirs/h.sock"), isDefaultPath: isDefault)
            }
        }
    }

    @Test func refusesAPathThatDoesNotFit() {
        let path = "/tmp/" + String(repeating: "x", count: 103)
        #expect(throws: SocketSetupError.pathTooLong(path: path, bytes: 108)) {
            try SocketPath.prepare(TestSockets.config(path), isDefaultPath: false)
        }
        #expect(throws: SocketSetupError.pathNotAbsolute(path: "h.sock")) {
            try SocketPath.prepare(TestSockets.config("h.sock"), isDefaultPath: false)
        }
    }

    @Test func neverDeletesANonSocket() {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let path = "\(base)/h.sock"
        _ = FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8))
        #expect(throws: SocketSetupError.notASocket(path: path)) {
            try SocketPath.prepare(TestSockets.config(path), isDefaultPath: false)
        }
        #expect(FileManager.default.contents(atPath: path) == Data("keep me".utf8))
        // A symlink is not a socket either, even one pointing at a socket.
        unlink(path)
        let target = TestSockets.bind("\(base)/target.sock")
        defer { close(target) }
        symlink("\(base)/target.sock", path)
        #expect(throws: SocketSetupError.notASocket(path: path)) {
            try SocketPath.prepare(TestSockets.config(path), isDefaultPath: false)
        }
    }

    @Test func replacesAStaleSocket() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let path = "\(base)/h.sock"
        close(TestSockets.bind(path))  // closed without unlink: what a crash leaves
        #expect(try SocketPath.occupant(of: path) == .staleSocket)
        let prepared = try SocketPath.prepare(TestSockets.config(path), isDefaultPath: false)
        defer { prepared.cleanUp() }
        #expect(!TestSockets.exists(path))
        #expect(try SocketPath.occupant(of: path) == SocketPath.Occupant.none)
    }

    @Test func doesNotDisplaceALiveDaemonAndReleasesTheLock() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let path = "\(base)/h.sock"
        let listener = TestSockets.bind(path)
        #expect(try SocketPath.occupant(of: path) == .liveSocket)
        #expect(throws: SocketSetupError.daemonAlreadyListening(path: path)) {
            try SocketPath.prepare(TestSockets.config(path), isDefaultPath: false)
        }
        #expect(TestSockets.exists(path))
        close(listener)
        // The failed attempt let go of the lock: once the listener is gone, it works.
        let prepared = try SocketPath.prepare(TestSockets.config(path), isDefaultPath: false)
        prepared.cleanUp()
    }

    @Test func bindApplyPermissionsAndCleanUp() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let path = "\(base)/h.sock"
        var config = TestSockets.config(path, mode: 0o660)
        config.socketGroup = 0
        let prepared = try SocketPath.prepare(config, isDefaultPath: false)
        #expect(prepared.lockFD >= 0)
        let listener = TestSockets.bind(path)
        try prepared.applyPermissions()
        #expect(TestSockets.mode(path) == 0o660)
        var info = stat()
        lstat(path, &info)
        #expect(info.st_gid == 0)
        close(listener)
        prepared.cleanUp()
        prepared.cleanUp()
        #expect(!TestSockets.exists(path))
        #expect(!TestSockets.exists(path + ".lock"))
        #expect(prepared.lockFD == -1)
    }

    @Test func cleanUpLeavesAReplacedPathAlone() throws {
        let base = TestSockets.makeFolder()
        defer { TestSockets.remove(base) }
        let path = "\(base)/h.sock"
        let prepared = try SocketPath.prepare(TestSockets.config(path), isDefaultPath: false)
        _ = FileManager.default.createFile(atPath: path, contents: Data("not ours".utf8))
        prepared.cleanUp()
        #expect(TestSockets.exists(path))
    }
}

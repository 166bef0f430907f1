// Operating the daemon: signals, the socket file, peers, limits.

import Foundation
import HalcyonJSON
import Testing

@Suite("Lifecycle end to end", .serialized, .timeLimit(.minutes(1)))
struct LifecycleEndToEndTests {
    @Test func sigtermDrainsInFlightWork() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        try client.request("debug.sleep", #"{"seconds":1}"#, id: 1)
        try client.request("cache.set", #"{"key":"drained","value":"v"}"#, id: 2)
        usleep(400_000)
        kill(daemon.process.processIdentifier, SIGTERM)
        let replies = try client.readReplies(2)
        #expect(replies[2]?["result"]?["stored"]?.bool == true)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus == 0)
        #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
        // The acknowledged write survives the restart.
        let again = try DaemonProcess(root: daemon.root)
        defer { again.cleanUp() }
        #expect(try again.client().result("cache.get", #"{"key":"drained"}"#)["value"]?.string == "v")
    }

    @Test func drainTimeoutAnswersShuttingDown() throws {
        let daemon = try DaemonProcess(arguments: ["--drain-timeout", "0.2s"])
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        try client.request("debug.sleep", #"{"seconds":2}"#, id: 1)
        try client.request("cache.set", #"{"key":"late","value":"v"}"#, id: 2)
        usleep(100_000)
        kill(daemon.process.processIdentifier, SIGTERM)
        var codes: [Int64] = []
        while let line = try client.readLine(timeout: 10) {
            let reply = try JSONValue.parse(Array(line.utf8)).get()
            if let code = reply["error"]?["code"]?.int64 { codes.append(code) }
        }
        #expect(codes.contains(-32005))
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus == 0)
    }

    @Test func staleSocketIsReplacedAndALiveDaemonIsNot() throws {
        let first = try DaemonProcess()
        // A second daemon on the same socket refuses to start and leaves the first alone.
        let rival = try DaemonProcess(root: first.root, waitUntilReady: false)
        rival.process.waitUntilExit()
        #expect(rival.process.terminationStatus != 0)
        #expect(try first.client().result("server.ping")["pong"]?.bool == true)

        // SIGKILL leaves the socket file behind; the next daemon replaces it.
        first.stop(signal: SIGKILL)
        #expect(FileManager.default.fileExists(atPath: first.socketPath))
        let next = try DaemonProcess(root: first.root)
        defer { next.cleanUp() }
        #expect(try next.client().result("server.ping")["pong"]?.bool == true)
    }

    @Test func nonSocketPathIsNeverDeleted() throws {
        let root = URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let precious = root.appendingPathComponent("s.sock")
        try Data("keep me".utf8).write(to: precious)
        let daemon = try DaemonProcess(root: root, waitUntilReady: false)
        daemon.process.waitUntilExit()
        #expect(daemon.process.terminationStatus != 0)
        #expect(try String(contentsOf: precious, encoding: .utf8) == "keep me")
    }

    @Test func tooManyConnectionsIsOverloaded() throws {
        let daemon = try DaemonProcess(arguments: ["--max-connections", "2"])
        defer { daemon.cleanUp() }
        let a = try daemon.client()
        // The readiness probe's connection may still be closing: wait until only `a` is open.
        for _ in 0..<200 where try a.result("cache.stats")["connections"]?.int64 != 1 { usleep(10_000) }
        let b = try daemon.client()
        _ = try b.result("server.ping")
        let c = try daemon.client()
        let refused = try c.readReply()
        #expect(refused["error"]?["code"]?.int64 == -32005)
        #expect(refused["error"]?["data"]?["reason"]?.string == "tooManyConnections")
        a.close()
        usleep(200_000)
        #expect(try daemon.client().result("server.ping")["pong"]?.bool == true)
    }

    /// A peer with another uid is refused unless allowed (needs root to switch uid).
    @Test func foreignPeerIsRefusedUnlessAllowed() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
              FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            print("skipped: needs root, /usr/bin/setpriv and /usr/bin/python3 to connect as another uid")
            return
        }
        for (allow, expectAnswer) in [(false, false), (true, true)] {
            let root = URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            chmod(root.path, 0o755)
            let daemon = try DaemonProcess(
                arguments: ["--socket-mode", "0666"] + (allow ? ["--allow-uid", "65534"] : []), root: root
            )
            defer { daemon.cleanUp() }
            let script = """
                import socket, sys
                data = b''
                try:
                    s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
                    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"server.ping"}\\n')
                    data = s.recv(4096)
                except OSError:
                    pass
                print('answered' if b'pong' in data else 'refused')
                """
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, daemon.socketPath]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            process.waitUntilExit()
            let said = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(said.contains(expectAnswer ? "answered" : "refused"), "allow=\(allow): \(said)")
            if !allow {
                #expect(try daemon.client().result("cache.stats")["refusedPeers"]?.int64 == 1)
            }
        }
    }
}
